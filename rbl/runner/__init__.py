"""The run loop, the same for every backend: a plan's rounds in their order (executor.py), each in
the round's frame (round.py: the fault set and confirmed, the client configured, counters read
around the driving, observers ticked during it) with the driver of its kind (closed_loop.py:
virtual users; open_loop.py: the load generator on a schedule), metrics, oracles, progress and
the run's summary. Where the services run is a backend's business (backend.py says what the
runner asks of one, and is one of the few seams the backends import); what is written and kept is
the store's (rbl.store)."""
