"""The run loop, the same for every backend: a plan's rounds in their order, the fault set and
confirmed per round, virtual users posted to the client services, metrics, oracles, progress and
the run's summary. Where the services run is a backend's business (backend.py says what the
runner asks of one); what is written and kept is the store's (rbl.store)."""
