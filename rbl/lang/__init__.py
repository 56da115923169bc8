"""The rbl language itself, the ground floor under the compiler, the catalogue and the neutral
patterns: source text and spans, diagnostics and their codes, units, the AST, parameter types, and
the readers that turn text into an AST (the Lark parser from rbl/grammar.lark and the hand-written
fast reader held equal to it). Nothing here imports from the packages above it."""
