"""The run backends of `rbl run`, one package each, bringing a plan's services up for the runner:
local (processes on this machine, the embedded default), docker (the compose deployment's
containers, through a Docker engine) and kubernetes (a Job of shards on a cluster, merged).
What they bring up comes from rbl/targets (what `rbl compile` writes) and rbl/mesh (a mesh
client's sidecar); net.py is what they share here (loopback addresses, free ports)."""
