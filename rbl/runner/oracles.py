"""Oracles checked in every round: did the client do what its configuration says?

The conformance suite checks a client service once, on its own configurations; a production run
with other settings would otherwise be trusted blindly. So the runner checks each virtual user's
raw observations (clients/protocol.py) against the pattern's invariants for the scenario's
native configuration, as rbl/neutral/semantics.py computes them from the library's formulas:

- baseline: a call sends exactly one request;
- retry: a call sends at most `attempts` requests, a call that failed sent all of them, and no
  wait between two of its requests is shorter than configured (less TIMER_TOLERANCE_MS);
- circuit breaker (one instance per user, a breaker that opens after n consecutive failures):
  no call is rejected while the breaker must be closed, and after it opened no request starts
  before the open duration has passed; then the configured number of probes decides;
- every round: the proxy saw exactly the requests the clients report, and the fault rate the
  proxy realised lies in the binomial (Wilson) interval of the configured rate, at a level that
  accounts for testing every round of the run (Bonferroni), so a correct run stays silent.

Limits (docs/threats-to-validity.md): random waits (e.g. tenacity's wait_random_exponential) are
checked for attempts only; a breaker shared by all users (`share = client`) is not checked,
since each user's timestamps count from its own job start and cannot be interleaved; a breaker
that does not open on consecutive failures (a failure-rate window) is not checked; a library
without formulas in semantics.py gets the per-round checks only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from ..neutral.semantics import WAIT_TOLERANCE_MS, BreakerBehaviour, RetryBehaviour, behaviour_of
from ..store.metrics import is_success

# How much shorter than configured a measured wait may be: the library's own rounding to whole
# milliseconds (WAIT_TOLERANCE_MS) plus the gap between where the client takes its timestamps and
# where the library starts its timer. A busy machine only makes waits longer, never shorter.
TIMER_TOLERANCE_MS = WAIT_TOLERANCE_MS + 1.5
# The chance that a correct run reports any fault-rate violation at all. A violation ends the run
# with exit 3, and a user (or a test suite) makes hundreds of runs: at 1% one in a hundred correct
# runs failed. At 1e-5 a rate 20 points off is still caught in most rounds of a few hundred requests,
# and a mapping slip (40% applied as 4%, or no fault at all) in any round of 100 requests.
FAMILY_ALPHA = 1e-5


@dataclass(frozen=True)
class Violation:
    oracle: str
    message: str

    def record(self) -> dict:
        return {"oracle": self.oracle, "message": self.message}


def user_violations(scenario: dict, share: str, observation: dict) -> list[Violation]:
    """What one virtual user's observation breaks of its configuration's invariants."""
    pattern = scenario["pattern"]
    calls = observation["calls"]
    if pattern == "baseline":
        return _baseline(calls)
    fault = scenario["fault"]
    delay = fault.get("duration_ms") if fault["kind"] == "delay" else None
    try:
        behaviour = behaviour_of(scenario["library"], pattern, scenario["config"], delay)
    except (KeyError, TypeError, ValueError):
        return []                         # a configuration semantics.py cannot read: no formulas
    if isinstance(behaviour, RetryBehaviour):
        return _retry(calls, behaviour)
    if isinstance(behaviour, BreakerBehaviour) and share == "user" and behaviour.consecutive is not None:
        return _breaker(calls, behaviour, _slow_threshold_ms(scenario))
    return []


def _baseline(calls: list[dict]) -> list[Violation]:
    found = []
    for number, call in enumerate(calls, 1):
        if not call.get("cut_short") and len(call["requests"]) != 1:
            found.append(Violation("baseline.requests", f"call {number} sent {len(call['requests'])} requests; "
                                                        "a call without a pattern sends exactly one"))
    return found


def _retry(calls: list[dict], behaviour: RetryBehaviour) -> list[Violation]:
    found = []
    attempts = behaviour.attempts
    for number, call in enumerate(calls, 1):
        requests = call["requests"]
        if len(requests) > attempts:
            found.append(Violation("retry.attempts", f"call {number} sent {len(requests)} requests; "
                                                     f"the configuration allows {attempts} attempts"))
        elif not call["ok"] and not call.get("cut_short") and len(requests) < attempts:
            found.append(Violation("retry.attempts", f"call {number} failed after {len(requests)} requests; "
                                                     f"the configuration retries until {attempts} attempts"))
        if behaviour.waits is None:
            continue                      # random waits: no lower bound to check
        for k, (before, after) in enumerate(zip(requests, requests[1:]), 1):
            if k > len(behaviour.waits):
                break
            waited_ms = (after[0] - before[0] - before[1]) / 1000
            if waited_ms < behaviour.waits[k - 1] - TIMER_TOLERANCE_MS:
                found.append(Violation("retry.wait", f"call {number} waited {waited_ms:.3f} ms before retry {k}; "
                                                     f"configured {behaviour.waits[k - 1]:g} ms"))
    return found


def _slow_threshold_ms(scenario: dict) -> float | None:
    """Resilience4j also opens on slow calls (slowCallDurationThreshold), whatever the fault: on a
    loaded machine a plain request can take that long."""
    if scenario["library"] != "resilience4j":
        return None
    threshold = scenario["config"].get("slowCallDurationThreshold")
    return float(threshold) if isinstance(threshold, (int, float)) else None


def _breaker(calls: list[dict], behaviour: BreakerBehaviour, slow_threshold_ms: float | None = None) -> list[Violation]:
    """Replays the breaker the configuration describes over the user's requests in order and
    reports where the client's breaker did otherwise. From a request whose duration is near a
    slow-call threshold the replay cannot know the library's state (it times calls itself, a
    little longer than the client's request), so it stops there rather than guess."""
    found = []
    slow_margin_ms = None if slow_threshold_ms is None else max(2 * TIMER_TOLERANCE_MS, 0.1 * slow_threshold_ms)
    state, failures, probes, probe_failures, opened_at_us = "closed", 0, 0, 0, 0
    open_us = behaviour.open_for_ms * 1000
    tolerance_us = TIMER_TOLERANCE_MS * 1000
    for number, call in enumerate(calls, 1):
        if call.get("cut_short"):
            break                         # the job's limits ended it: what follows is not the breaker's
        requests = call["requests"]
        if not requests:
            if not call["ok"] and state == "closed":
                found.append(Violation("breaker.opened_early",
                                       f"call {number} was rejected after {failures} consecutive failure"
                                       f"{'s' if failures != 1 else ''}; the configuration opens {behaviour.opens}"))
                state, opened_at_us = "open", None     # what the client did; follow it from here
            continue
        for start_us, duration_us, status in requests:
            if state == "open":
                if opened_at_us is not None and start_us < opened_at_us + open_us - tolerance_us:
                    found.append(Violation("breaker.open_duration",
                                           f"call {number} sent a request {(start_us - opened_at_us) / 1000:.3f} ms "
                                           f"after the breaker opened; it stays open {behaviour.open_for_ms:g} ms"))
                state, probes, probe_failures = "half_open", 0, 0
            if slow_margin_ms is not None and _ambiguous(duration_us / 1000, slow_threshold_ms, slow_margin_ms,
                                                         modelled=behaviour.slow_calls_over_ms is not None):
                return found
            failed = not is_success(status) or (behaviour.slow_calls_over_ms is not None
                                                and duration_us / 1000 > behaviour.slow_calls_over_ms)
            end_us = start_us + duration_us
            if state == "closed":
                failures = failures + 1 if failed else 0
                if failures >= behaviour.consecutive:
                    state, opened_at_us, failures = "open", end_us, 0
            else:                          # half open: the probes decide
                probes += 1
                probe_failures += failed
                permits = behaviour.half_open_permits
                if permits is None:
                    return found           # not a fixed number of probes: nothing more to replay
                if probes >= permits:
                    # consecutive-failure breakers map to "open again unless a probe succeeded"
                    if probe_failures == probes:
                        state, opened_at_us = "open", end_us
                    else:
                        state, failures = "closed", 0
    return found


def _ambiguous(duration_ms: float, threshold_ms: float, margin_ms: float, modelled: bool) -> bool:
    """A request whose slowness the replay cannot judge: near the threshold when slow calls are
    modelled (a delay fault reaches it), or anywhere near or over it when they are not (a slow
    call the configuration did not foresee may have opened the breaker)."""
    if modelled:
        return abs(duration_ms - threshold_ms) < margin_ms
    return duration_ms > threshold_ms - margin_ms


def fault_rate_violation(configured_percent: float, injected: int, seen: int, rounds_in_run: int) -> Violation | None:
    """The proxy's realised fault rate against the configured one: a violation when the configured
    rate lies outside the Wilson interval of the realised one at level FAMILY_ALPHA / rounds."""
    if seen <= 0:
        return None
    p = configured_percent / 100
    low, high = wilson_interval(injected, seen, FAMILY_ALPHA / max(1, rounds_in_run))
    if low - 1e-12 <= p <= high + 1e-12:
        return None
    return Violation("fault.rate", f"the proxy faulted {injected} of {seen} requests "
                                   f"({100 * injected / seen:.2f}%); configured {configured_percent:g}%, outside "
                                   f"the binomial interval [{100 * low:.2f}%, {100 * high:.2f}%]")


def wilson_interval(successes: int, trials: int, alpha: float) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion at two-sided level alpha."""
    z = NormalDist().inv_cdf(1 - alpha / 2)
    phat = successes / trials
    denominator = 1 + z * z / trials
    centre = (phat + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(phat * (1 - phat) / trials + z * z / (4 * trials * trials)) / denominator
    # at 0 and n the interval closes exactly on the observed proportion's side
    return (0.0 if successes == 0 else max(0.0, centre - half)), (1.0 if successes == trials else min(1.0, centre + half))


def request_count_violation(reported: int, seen: int, uncertain: bool) -> Violation | None:
    """Every request a client reports went through the proxy, and no other did (a hidden retry in
    an HTTP library would be one). Not checked when a request's fate is `uncertain`: a call cut
    short may have had one in flight, and a connection error (status 0) may or may not have
    reached the proxy (a loaded proxy closes idle connections, a client may time out on an answer)."""
    if uncertain or reported == seen:
        return None
    return Violation("requests.count", f"the clients report {reported} requests, the proxy saw {seen}")


def as_records(violations: list[Violation]) -> list[dict]:
    """A row's `oracleViolations`: one record per oracle broken, with its first message and how
    many times the user broke it (a breaker can break one invariant hundreds of times)."""
    records: dict[str, dict] = {}
    for v in violations:
        if v.oracle in records:
            records[v.oracle]["count"] += 1
        else:
            records[v.oracle] = {**v.record(), "count": 1}
    return list(records.values())
