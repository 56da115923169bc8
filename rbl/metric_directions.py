"""Which way each metric is better, and what a bound on it is written in: shared by the language
(a spec's `objective`, rbl/compiler/checks/objective.py) and the report (findings, the
recommendation), which must agree on it.

Times, failures and load are better low; what is produced is better high. Facts about a
mechanism (retries made, calls a breaker or pool refused, what was offered) have no better end:
fewer retries is not better when retrying is what saved the calls."""

from __future__ import annotations

HIGHER_IS_BETTER = frozenset({"throughput", "successfulCalls", "successfulRequests", "carriedRate", "carriedThroughput",
                              "successShare", "p95UnderSloShare"})
NEUTRAL = frozenset({"openTransitions", "contentionRate", "totalCalls", "totalRequests", "requestsPerCall",
                     "offeredRequests", "offeredRate", "measuredSeconds",
                     "sidecarUpstreamRequests", "sidecarRetries", "sidecarRetrySuccesses", "sidecarRetryOverflows",
                     "sidecarPoolOverflows", "sidecarPerTryTimeouts", "sidecarTimeouts", "sidecarEjections",
                     "ejectedRequests", "circuitBrokenRequests", "circuitBrokenShare", "timedOutCalls",
                     "breakerRejectedCalls", "bulkheadRejectedCalls", "rateLimitedCalls", "hedgedRequests",
                     "fallbackCalls", "chainAmplification", "chainRefusedCalls", "chainCpuSeconds"})


def direction(metric: str) -> str:
    """lower | higher (the better end) | none."""
    if metric in NEUTRAL:
        return "none"
    return "higher" if metric in HIGHER_IS_BETTER else "lower"


# The metrics an objective may name, per kind of round, with the unit a bound on each is written in:
# ms (a duration: `500ms`), share (a percentage: `90%`, a fraction in the rows) or number.
CLOSED_LOOP_OBJECTIVES = {
    "totalExecutionTime": "ms", "successTimePerRequest": "ms", "errorTimePerRequest": "ms",
    "latencyP50": "ms", "latencyP95": "ms", "latencyP99": "ms", "timeToNthSuccess": "ms",
    "throughput": "number", "successfulCalls": "number", "unsuccessfulRequests": "number",
    "totalRequests": "number", "requestsPerSuccess": "number",
}
OPEN_LOOP_OBJECTIVES = {
    "carriedThroughput": "share", "successShare": "share", "failedShare": "share", "timedOutShare": "share",
    "rejectedShare": "share", "circuitBrokenShare": "share", "p95UnderSloShare": "share",
    "carriedRate": "number", "successP50Ms": "ms", "successP95Ms": "ms", "successP99Ms": "ms",
    "windowP50Ms": "ms", "windowP95Ms": "ms",
}
# What "better" means where a spec says nothing: the seed paper's total time per virtual user, and
# for load the generator sends, the share of the offered requests carried.
DEFAULT_OBJECTIVES = {"closed": "totalExecutionTime", "open": "carriedThroughput"}


def is_share(metric: str) -> bool:
    """A fraction of requests or windows (carried throughput, the classes' shares): said in %."""
    return OPEN_LOOP_OBJECTIVES.get(metric) == "share" or metric.endswith("Share")


def objectives_for(open_loop: bool) -> dict[str, str]:
    return OPEN_LOOP_OBJECTIVES if open_loop else CLOSED_LOOP_OBJECTIVES


def bound_text(bound: dict, titles: dict | None = None) -> str:
    """`successP99Ms at most 500 ms`, `carriedThroughput at least 90%` (with `titles`, each metric's
    human label in its name's place)."""
    unit = OPEN_LOOP_OBJECTIVES.get(bound["metric"]) or CLOSED_LOOP_OBJECTIVES.get(bound["metric"], "number")
    limit = bound["limit"]
    value = f"{limit:g} ms" if unit == "ms" else f"{limit * 100:g}%" if unit == "share" else f"{limit:g}"
    name = (titles or {}).get(bound["metric"], bound["metric"]).replace(" (ms)", "")   # the value says ms
    return f"{name} {'at least' if bound['op'] == '>=' else 'at most'} {value}"


def value_text(metric: str, value: float) -> str:
    """A measured value in its bound's unit: `6139 ms`, `85.5%`, `12.3`."""
    unit = OPEN_LOOP_OBJECTIVES.get(metric) or CLOSED_LOOP_OBJECTIVES.get(metric, "number")
    return f"{value:.4g} ms" if unit == "ms" else f"{value * 100:.3g}%" if unit == "share" else f"{value:.4g}"


def objective_text(record: dict, titles: dict | None = None) -> str:
    """`the most carriedThroughput, with successP99Ms at most 500 ms` (a plan's `objective` record)."""
    name = (titles or {}).get(record["metric"], record["metric"])
    goal = f"the {'most' if record['direction'] == 'higher' else 'least'} {name}"
    bounds = [bound_text(b, titles) for b in record.get("bounds", [])]
    return goal + (f", with {' and '.join(bounds)}" if bounds else "")
