"""Per-round oracles for the patterns beyond retry and circuit breaker, composed or alone: what a
virtual user's raw observations (clients/protocol.py) can show of a timeout, a hedge, a rate limiter
and a fallback, judged only where the timestamps say it for certain (never a false alarm on a busy
machine: bounds are checked from below, with a tolerance, and only where the written order makes
the pattern act on each request directly):

- fallback: a call the fallback answered is never a success;
- timeout, innermost (it wraps each request): a request it cut (status 0) lasted no less than the
  bound, and a call it ended is reported so only if its last request was cut;
- hedge, innermost: a call sends at most 1 + maxHedges requests, each hedge no earlier than its delay
  after the request before it;
- rate limiter alone, one per user: the user's requests never exceed the permits of the periods its
  job spanned (plus one period for a limiter made just before the job's clock started).
"""

from __future__ import annotations

from ..libraries.composition import policies_of
from .oracles import Violation

# A timeout's timer starts a little before the client's clock for the request does (a promise, the
# policy's own set-up; the JVM client stamps the hand-off to its worker thread, where a busy machine
# lost 10 ms), so a cut request may look that much shorter than the bound; a mis-mapped bound (a
# unit slip, a halved bound) is far beyond.
TIMEOUT_TOLERANCE_MS = 10.0
HEDGE_TOLERANCE_MS = 2.5

# How each library names the bound of its timeout, in the milliseconds the plan holds.
TIMEOUT_MS = {"resilience4j": "timeoutDuration", "failsafe": "timeout", "cockatiel": "duration"}


def _rate_limit(library: str, params: dict) -> tuple[int, float] | None:
    """(permits, period ms) of a rate limiter's configuration."""
    if library == "resilience4j":
        return params["limitForPeriod"], params["limitRefreshPeriod"] / 1_000_000
    if library == "failsafe":
        return params["maxExecutions"], params["period"]
    return None


def pattern_violations(scenario: dict, share: str, observation: dict) -> list[Violation]:
    """What one virtual user's observation breaks of its timeout, hedge, rate limiter or fallback."""
    try:
        policies = policies_of(scenario["pattern"], scenario["config"])
    except ValueError:
        return []
    names = list(policies)
    library, calls = scenario["library"], observation["calls"]
    found = _fallback(calls) if "fallback" in policies else []
    innermost = names[-1] if names else None
    try:
        if innermost == "timeout" and library in TIMEOUT_MS:
            found += _timeout(calls, float(policies["timeout"][TIMEOUT_MS[library]]))
        if innermost == "hedge" and library == "failsafe":
            hedge = policies["hedge"]
            found += _hedge(calls, float(hedge["delay"]), int(hedge.get("maxHedges", 1)))
        if names == ["rate_limiter"] and share == "user":
            limit = _rate_limit(library, policies["rate_limiter"])
            if limit is not None:
                found += _rate(calls, observation["total_us"], *limit)
    except (KeyError, TypeError, ValueError):
        return found                     # a configuration without the values these read: no formulas
    return found


def _fallback(calls: list[dict]) -> list[Violation]:
    return [Violation("fallback.success", f"call {number} was answered by the fallback but reported a success")
            for number, call in enumerate(calls, 1) if call.get("fallback") and call["ok"]]


def _timeout(calls: list[dict], bound_ms: float) -> list[Violation]:
    found = []
    for number, call in enumerate(calls, 1):
        for request in call["requests"]:
            if request[2] == 0 and not call.get("cut_short") and request[1] / 1000 < bound_ms - TIMEOUT_TOLERANCE_MS:
                found.append(Violation("timeout.early", f"call {number}: a request cut after {request[1] / 1000:.1f} "
                                                        f"ms; the timeout is {bound_ms:g} ms"))
        if call.get("timed_out") and not _cut_or_raced(call["requests"], bound_ms):
            found.append(Violation("timeout.reported", f"call {number} is reported timed out, but no request of "
                                                       "it was cut"))
    return found


def _cut_or_raced(requests: list[list], bound_ms: float) -> bool:
    """A timed-out call's last request was cut, or its answer raced the timer: it came as the timeout
    fired, after the library had given up on the call but before the request could be cut
    (Resilience4j's TimeLimiter: 2 of 394 calls timed out at 51 ms had a 200 at 53-54 ms)."""
    if not requests:
        return False
    last = requests[-1]
    return last[2] == 0 or last[1] / 1000 >= bound_ms - TIMEOUT_TOLERANCE_MS


def _hedge(calls: list[dict], delay_ms: float, max_hedges: int) -> list[Violation]:
    found = []
    for number, call in enumerate(calls, 1):
        starts = sorted(request[0] for request in call["requests"])
        if len(starts) > 1 + max_hedges:
            found.append(Violation("hedge.count", f"call {number} sent {len(starts)} requests; one and at most "
                                                  f"{max_hedges} hedges are configured"))
        for before, after in zip(starts, starts[1:]):
            if (after - before) / 1000 < delay_ms - HEDGE_TOLERANCE_MS:
                found.append(Violation("hedge.early", f"call {number}: a hedge {(after - before) / 1000:.1f} ms "
                                                      f"after the request before it; the delay is {delay_ms:g} ms"))
                break
    return found


def _rate(calls: list[dict], total_us: int, permits: int, period_ms: float) -> list[Violation]:
    sent = sum(len(call["requests"]) * call.get("repeat", 1) for call in calls)
    periods = int(total_us / 1000 // period_ms) + 2
    if sent > permits * periods:
        return [Violation("rate_limiter.rate", f"{sent} requests in {total_us / 1000:.0f} ms; {permits} per "
                                               f"{period_ms:g} ms allow at most {permits * periods}")]
    return []
