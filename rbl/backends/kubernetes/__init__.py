"""The kubernetes backend: the driver that runs a plan as a Job of shards (each pod an `rbl run
--shard I/N` on the local backend inside it), from the manifests rbl/targets/kubernetes writes,
and merges what the pods wrote. It drives whole runs, not services, so it has no Services of its own."""
