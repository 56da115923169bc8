"""What a plan's first run on this machine costs beyond its rounds, for `rbl plan`'s estimate: the
builds of the client services and tools it needs that are not cached yet, and a calibration of the
target's capacity when its rates are shares of one and none is stored."""

from __future__ import annotations

from itertools import islice

# Typical durations here (2 cores, modules and packages already downloaded once): a first build
# downloads more, so these are the least a first run adds.
BUILD_S = {"resilience4j": 90.0, "node": 30.0, "go": 40.0, "loadgen": 40.0, "chain": 10.0}
CALIBRATION_S = 30.0          # the examples' calibrations took 15-40 s here


def first_run_costs(space, header: dict) -> list[tuple[float, str]]:
    """(seconds, what) of each step the first run will take before its rounds, on this machine."""
    from ..targets.client_builds import BUILT_CLIENTS, needs_build
    kinds = {client["service"] for client in header["clients"] if client["service"] in BUILT_CLIENTS}
    if space.workload is not None:
        kinds.add("loadgen")
    if space.topology is not None:
        kinds.add("chain")
    costs = [(BUILD_S.get(kind, 30.0), f"building {kind}") for kind in sorted(kinds) if needs_build(kind)]
    if space.workload is not None and _needs_calibration(space, header):
        costs.append((CALIBRATION_S, "calibrating the target's capacity (none stored)"))
    return costs


def _needs_calibration(space, header: dict) -> bool:
    from ..compiler.expand import iter_scenarios
    from ..runner.capacity import needs_capacity, slo_of, stored_capacity, target_key
    from ..targets.envoy_binary import envoy_binary
    scenarios = list(islice(iter_scenarios(space), 1000))       # a large plan: its first scenarios tell
    if not needs_capacity(scenarios):
        return False
    proxy = "envoy" if envoy_binary() is not None else "builtin"       # what `--proxy auto` picks
    key = target_key(header["target"], proxy, slo_of(scenarios), header.get("topology"))
    return stored_capacity(key) is None
