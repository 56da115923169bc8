"""The directories rbl writes beneath a run directory, named once: the writers use these names and
`rbl run --resume` checks every one of them for planted links before it writes anything."""

from __future__ import annotations

LOGS = "logs"                   # the services' logs (the local backend appends to them)
ENVOY = "envoy"                 # Envoy's configuration: the fault proxy's, a sidecar's
REQUESTS = "requests"           # open-loop rounds: SCENARIO/round-N.parquet and its round-N.work/
CALIBRATION = "calibration"     # a calibration's steps (the load generator's files), when a run calibrates
TOPOLOGY = "topology"           # a topology's replicas' configurations and its sidecars' files (local backend)

RUN_TREES = (LOGS, ENVOY, REQUESTS, CALIBRATION, TOPOLOGY)
