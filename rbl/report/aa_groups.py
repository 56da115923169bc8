"""A/A groups: cells of a plan that cannot differ in behaviour, so any difference the run measures
between them is noise. A pure function of the plan (its header and scenarios), from the same
library semantics the mapping view and the equivalence lint use (rbl/neutral/semantics.py).

At a 0% fault rate no retry ever retries and no breaker ever opens: every retry and breaker
configuration of one library behaves like the library's service calling the target unwrapped
(its baseline). With delay faults every call still succeeds, only later, so the same holds except
where a call's duration decides something: a breaker that counts slow calls, a call timeout.
Where rbl is not sure (no formulas, a threshold near the calls' duration) the cell is left out,
with the reason."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass

from ..neutral.semantics import BreakerBehaviour, BulkheadBehaviour, TimeoutBehaviour, behaviour_of

# A threshold on a call's duration closer than this above the calls' expected duration (0 ms, or the
# fault's delay) could be crossed by a slow machine or a slow response: such a cell is left out.
DURATION_MARGIN_MS = 500.0
# Parameters that fail or count a call by its duration (ms in the plan's native configuration);
# 0 means none for opossum's `timeout`.
DURATION_THRESHOLDS = {
    ("resilience4j", "circuit_breaker"): ("slowCallDurationThreshold", False),
    ("opossum", "circuit_breaker"): ("timeout", True),     # True: 0 switches it off
}
# The client services time a call out after 60 s or at the job's deadline; rbl counts a delayed call
# as a sure success only well below that.
LONGEST_SAFE_DELAY_MS = 1000.0


@dataclass(frozen=True)
class AAGroup:
    library: str
    service: str
    users: int
    fault: str                          # e.g. "abort 0%" or "delay 200 ms 50%"
    scenario_ids: tuple[str, ...]       # plan order; the baseline first when it is in the group

    @property
    def pairs(self) -> list[tuple[str, str]]:
        ids = self.scenario_ids
        return [(a, b) for i, a in enumerate(ids) for b in ids[i + 1:]]


@dataclass(frozen=True)
class LeftOut:
    scenario_id: str
    reason: str


@dataclass(frozen=True)
class Grouping:
    groups: list[AAGroup]
    left_out: list[LeftOut]


def fault_text(fault: dict) -> str:
    rate = f"{fault['rate']:g}%"
    if fault["kind"] == "delay" and fault.get("duration_ms") is not None:
        return f"delay {fault['duration_ms']} ms {rate}"
    return f"{fault['kind']} {rate}"


def exclusion(scenario: dict) -> str | None:
    """Why this cell may behave differently from its library's baseline under its fault, or None
    when it cannot. Only called for cells whose fault lets every call succeed (0%, or delays)."""
    library, pattern, config = scenario["library"], scenario["pattern"], scenario["config"]
    if pattern == "baseline":
        return None
    fault = scenario["fault"]
    delay = float(fault.get("duration_ms") or 0) if fault["kind"] == "delay" and fault["rate"] > 0 else 0.0
    try:
        behaviour = behaviour_of(library, pattern, config, delay or None)
    except (KeyError, TypeError, ValueError):
        behaviour = None
    if behaviour is None:
        return f"rbl has no formulas for {library} {pattern}"
    if isinstance(behaviour, BreakerBehaviour) and behaviour.slow_calls_over_ms is not None:
        return f"counts calls over {behaviour.slow_calls_over_ms:g} ms as failures and the delay reaches it"
    if isinstance(behaviour, BulkheadBehaviour):
        return "a bulkhead refuses calls by their number at once, whatever the fault"
    if isinstance(behaviour, TimeoutBehaviour) and behaviour.after_ms < delay + DURATION_MARGIN_MS:
        return (f"times a call out after {behaviour.after_ms:g} ms, within {DURATION_MARGIN_MS:g} ms of the calls' "
                f"duration ({delay:g} ms delay)")
    threshold = DURATION_THRESHOLDS.get((library, pattern))
    if threshold is not None:
        name, zero_is_off = threshold
        value = config.get(name)
        if value is None:
            return f"{name} is not in the configuration"
        if not (zero_is_off and value == 0) and value < delay + DURATION_MARGIN_MS:
            return f"{name} = {value:g} ms is within {DURATION_MARGIN_MS:g} ms of the calls' duration ({delay:g} ms delay)"
    return None


def every_call_succeeds(fault: dict) -> bool:
    """The fault never fails a call: no faults at all, or delays short enough not to time out."""
    if fault["rate"] == 0:
        return True
    return fault["kind"] == "delay" and float(fault.get("duration_ms") or 0) < LONGEST_SAFE_DELAY_MS


def aa_groups(header: dict, scenarios: list[dict]) -> Grouping:
    """The plan's A/A groups: per library and its service, user count and fault, the cells whose
    fault lets every call succeed and whose configuration cannot tell that from no resilience at
    all, with the service's baseline. Groups of one cell are dropped (nothing to compare)."""
    services = {client["label"]: client.get("service", client["label"]) for client in header.get("clients", [])}
    buckets: dict[tuple, list[dict]] = defaultdict(list)
    left_out = []
    for scenario in scenarios:
        fault = scenario["fault"]
        if not every_call_succeeds(fault):
            continue
        reason = exclusion(scenario)
        if reason is not None:
            left_out.append(LeftOut(scenario["id"], reason))
            continue
        # cells under another load or on another target's point are not alike, whatever their configuration
        key = (services.get(scenario["client"], scenario["client"]), scenario["users"], fault_text(fault),
               scenario.get("successes"), scenario.get("max_requests"),
               json.dumps(scenario.get("load"), sort_keys=True), json.dumps(scenario.get("target"), sort_keys=True))
        buckets[key].append(scenario)
    groups = []
    for (service, users, fault, *_), members in buckets.items():
        baselines = [s for s in members if s["pattern"] == "baseline"]
        libraries = list(dict.fromkeys(s["library"] for s in members if s["pattern"] != "baseline"))
        for library in libraries:
            ids = [s["id"] for s in baselines] + [s["id"] for s in members
                                                   if s["pattern"] != "baseline" and s["library"] == library]
            if len(ids) >= 2:
                groups.append(AAGroup(library, service, users, fault, tuple(ids)))
        if not libraries and len(baselines) >= 2:
            groups.append(AAGroup(baselines[0]["library"], service, users, fault, tuple(s["id"] for s in baselines)))
    return Grouping(groups, left_out)
