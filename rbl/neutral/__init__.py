"""Library-neutral pattern values (docs/library-semantics.md section 6): the model,
what each library's native configuration does (semantics), the exact mapping from the model onto
each library's native parameters, and the equivalence check between clients."""
