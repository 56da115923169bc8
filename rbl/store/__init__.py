"""The results store: a run directory and what it records (plan, manifest, rows, failures, the
run's order and shard), written durably and locked while a run owns it, checked when read back,
and merged from shards; used by the runner, `rbl merge`, `rbl report` and `rbl diff`."""
