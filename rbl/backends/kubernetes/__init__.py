"""The kubernetes backend: manifests and the runner image's build context, and the driver that runs
a plan as a Job of shards (each pod an `rbl run --shard I/N` on the local backend inside it) and
merges what the pods wrote. It drives whole runs, not services, so it has no Services of its own."""
