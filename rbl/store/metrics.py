"""Table 2 of the seed paper, computed centrally from a client's raw observations (clients/protocol.py).

Every library's client returns the same raw shape, so every metric is computed here, once, the
same way. Names are the original tool's (its CSV columns); times are in milliseconds as there,
with microsecond resolution. An average over nothing is None (an empty CSV cell), not 0.
"""

from __future__ import annotations

import math

from ..libraries.composition import SEPARATOR
from ..clients.protocol import SIDECAR_REFUSAL_DETAILS

METRIC_COLUMNS = (
    "successfulCalls", "unsuccessfulCalls", "totalCalls",
    "successfulRequests", "unsuccessfulRequests", "totalRequests",
    "successTime", "successTimePerRequest", "errorTime", "errorTimePerRequest",
    "totalContentionTime", "contentionRate", "totalExecutionTime", "throughput",
)
LATENCY_COLUMNS = ("latencyP50", "latencyP95", "latencyP99")
# Calls an open breaker rejects cost the client nothing, so how many it makes while open depends
# on how fast its loop spins (one tool's 40 rejected calls are another's 4000): these Table 2
# metrics are kept for comparison with the paper, but mean little for a circuit breaker ...
SPIN_DEPENDENT = ("unsuccessfulCalls", "totalCalls")
# ... and these say what the breaker did without counting rejected calls (docs/threats-to-validity.md).
SPIN_FREE_COLUMNS = ("rejectedTime", "openTransitions", "requestsPerSuccess", "timeToNthSuccess")
# A mesh client's requests as its sidecar answered them (Envoy's response flags, clients/protocol.py):
# refused by a connection-pool limit (UO), timed out by the sidecar (UT), refused because the
# target was ejected (UH). Empty for library clients, which have no sidecar.
RESPONSE_CLASS_COLUMNS = ("circuitBrokenRequests", "timedOutRequests", "ejectedRequests")
# The sidecar's own counters over one round (the same for every virtual user of the round).
SIDECAR_COLUMNS = ("sidecarUpstreamRequests", "sidecarRetries", "sidecarRetrySuccesses", "sidecarRetryOverflows",
                   "sidecarPoolOverflows", "sidecarPerTryTimeouts", "sidecarTimeouts", "sidecarEjections")
# A topology's round along its chain (rbl/runner/hops.py, the same for every row of the round): requests
# at every service per entry request, the calls its sidecars refused (UO) and those that failed, and the
# CPU its services spent (and wasted beyond what the carried requests needed).
CHAIN_COLUMNS = ("chainAmplification", "chainRefusedCalls", "chainFailedCalls", "chainWastedCpuSeconds",
                 "chainCpuSeconds")
# (a request Envoy's adaptive concurrency or admission control filter refused carries its response
# code details instead of a flag, clients/protocol.py: refused by the sidecar as by a pool limit)
RESPONSE_CLASS_FLAGS = {"circuitBrokenRequests": ("UO", *SIDECAR_REFUSAL_DETAILS.values()),
                        "timedOutRequests": ("UT",), "ejectedRequests": ("UH",)}
# How library patterns ended calls (the calls' "rejected", "timed_out" and "fallback" in protocol v1),
# so that timeouts, bulkheads, rate limiters, hedging and fallbacks compare across libraries: calls a
# timeout ended, calls each policy refused and the mean time from such a call's start to its refusal
# (ms: a permit's wait, and in a composition the attempts before it), requests a hedge started while
# an earlier one of its call was in flight, and calls a fallback answered (never successes). Written
# for clients that run one of PATTERNS_WITH_COLUMNS.
PATTERN_COLUMNS = ("timedOutCalls", "breakerRejectedCalls", "bulkheadRejectedCalls", "rateLimitedCalls",
                   "rejectionWaitTime", "hedgedRequests", "fallbackCalls")
PATTERNS_WITH_COLUMNS = ("timeout", "bulkhead", "rate_limiter", "hedge", "fallback")
REJECTION_COLUMNS = {"circuit_breaker": "breakerRejectedCalls", "bulkhead": "bulkheadRejectedCalls",
                     "rate_limiter": "rateLimitedCalls"}


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default method)."""
    if not sorted_values:
        return None
    position = (len(sorted_values) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def _ms(microseconds: float) -> float:
    return round(microseconds / 1000, 3)


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def is_success(status: int) -> bool:
    return 200 <= status < 300


def vu_metrics(observation: dict, sidecar: bool = False, patterns: bool = False) -> dict:
    """Table 2 metrics plus request latency percentiles for one virtual user's observation (with
    `sidecar`, its requests' response classes; with `patterns`, PATTERN_COLUMNS)."""
    successful_calls = unsuccessful_calls = 0
    success_us = error_us = 0
    successful_requests = unsuccessful_requests = 0
    durations: list[int] = []
    classes = dict.fromkeys(RESPONSE_CLASS_COLUMNS, 0)
    for call in observation["calls"]:
        repeat = call.get("repeat", 1)
        if call["ok"]:
            successful_calls += repeat
        else:
            unsuccessful_calls += repeat
        for request in call["requests"]:
            duration, status = request[1], request[2]
            if len(request) > 3:
                _count_class(classes, request[3], repeat)
            durations.append(duration)
            if is_success(status):
                successful_requests += repeat
                success_us += duration * repeat
            else:
                unsuccessful_requests += repeat
                error_us += duration * repeat
    total_us = observation["total_us"]
    total_requests = successful_requests + unsuccessful_requests
    durations.sort()
    metrics = {
        "successfulCalls": successful_calls,
        "unsuccessfulCalls": unsuccessful_calls,
        "totalCalls": successful_calls + unsuccessful_calls,
        "successfulRequests": successful_requests,
        "unsuccessfulRequests": unsuccessful_requests,
        "totalRequests": total_requests,
        "successTime": _ms(success_us),
        "successTimePerRequest": _maybe_ms(_ratio(success_us, successful_requests)),
        "errorTime": _ms(error_us),
        "errorTimePerRequest": _maybe_ms(_ratio(error_us, unsuccessful_requests)),
        "totalContentionTime": _ms(success_us + error_us),
        "contentionRate": _round(_ratio(success_us + error_us, total_us)),
        "totalExecutionTime": _ms(total_us),
        "throughput": _round(_ratio(total_requests * 1_000_000, total_us)),
    }
    for column, q in zip(LATENCY_COLUMNS, (0.50, 0.95, 0.99)):
        metrics[column] = _maybe_ms(percentile(durations, q))
    metrics.update(spin_free_metrics(observation, total_requests, successful_calls))
    if sidecar:
        metrics.update(classes)
    if patterns:
        metrics.update(pattern_metrics(observation))
    return metrics


def _count_class(classes: dict[str, int], flags, repeat: int) -> None:
    """Envoy joins several response flags with commas (`UT,URX`)."""
    present = set(str(flags).split(","))
    for column, markers in RESPONSE_CLASS_FLAGS.items():
        if present.intersection(markers):
            classes[column] += repeat


def spin_free_metrics(observation: dict, total_requests: int, successful_calls: int) -> dict:
    """Breaker metrics that do not count rejected calls. A rejected call carries no timestamp,
    but the loop calls again at once, so a run of rejected calls starts when the request before it
    ended and lasts until the next request starts (or the job ends): that is `rejectedTime`, and
    each such run is one opening the user saw (`openTransitions`)."""
    rejected_us = openings = 0
    last_end = 0                      # job start: a breaker shared with other users may be open already
    rejecting = False
    nth_success_us = None
    for call in observation["calls"]:
        requests = call["requests"]
        if not requests and not call["ok"] and not call.get("cut_short"):
            if not rejecting:
                openings += 1
                rejecting = True
            continue
        if requests:
            if rejecting:
                rejected_us += max(0, requests[0][0] - last_end)
                rejecting = False
            last_end = requests[-1][0] + requests[-1][1]
            if call["ok"]:
                nth_success_us = last_end
    if rejecting:                     # the job ended while the breaker still rejected
        rejected_us += max(0, observation["total_us"] - last_end)
    reached = observation.get("stopped_by") == "successes" and nth_success_us is not None
    return {
        "rejectedTime": _ms(rejected_us),
        "openTransitions": openings,
        "requestsPerSuccess": _round(_ratio(total_requests, successful_calls)),
        # the n-th (last needed) success; empty when the user stopped before reaching it
        "timeToNthSuccess": _ms(nth_success_us) if reached else None,
    }


def runs_measured_patterns(pattern: str) -> bool:
    """Whether a client's pattern ("retry+timeout") has a PATTERNS_WITH_COLUMNS part."""
    return any(part in PATTERNS_WITH_COLUMNS for part in pattern.split(SEPARATOR))


def pattern_metrics(observation: dict) -> dict:
    """PATTERN_COLUMNS of one virtual user's observation."""
    counts = dict.fromkeys(PATTERN_COLUMNS, 0)
    wait_us = rejected = 0
    for call in observation["calls"]:
        repeat = call.get("repeat", 1)
        kind = call.get("rejected")
        if kind in REJECTION_COLUMNS:
            counts[REJECTION_COLUMNS[kind]] += repeat
            rejected += repeat
            wait_us += call.get("wait_us", 0)
        counts["timedOutCalls"] += repeat if call.get("timed_out") else 0
        counts["fallbackCalls"] += repeat if call.get("fallback") else 0
        counts["hedgedRequests"] += hedged_requests(call["requests"]) * repeat
    counts["rejectionWaitTime"] = _maybe_ms(_ratio(wait_us, rejected))
    return counts


def hedged_requests(requests: list) -> int:
    """Requests of one call that started while an earlier one of the call was still in flight:
    only a hedge does that (a retry waits for the attempt before it to end)."""
    hedged, busy_until = 0, None
    for start, duration, *_ in sorted(requests, key=lambda request: request[0]):
        if busy_until is not None and start < busy_until:
            hedged += 1
        busy_until = max(busy_until or 0, start + duration)
    return hedged


def _maybe_ms(microseconds: float | None) -> float | None:
    return None if microseconds is None else _ms(microseconds)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
