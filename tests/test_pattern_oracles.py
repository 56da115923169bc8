"""The per-user metrics and per-round oracles of timeouts, bulkheads, rate limiters, hedges and
fallbacks (rbl/store/metrics.py, rbl/runner/pattern_oracles.py), on hand-written observations."""

from __future__ import annotations

from rbl.runner.pattern_oracles import pattern_violations
from rbl.store.metrics import hedged_requests, pattern_metrics, runs_measured_patterns, vu_metrics


def scenario(library: str, pattern: str, config: dict) -> dict:
    return {"library": library, "pattern": pattern, "config": config}


def observation(calls: list[dict], total_us: int = 1_000_000) -> dict:
    return {"calls": calls, "total_us": total_us, "stopped_by": "successes", "vu": 1}


def oracles(found) -> list[str]:
    return [violation.oracle for violation in found]


# -- metrics -------------------------------------------------------------------------------------------
def test_pattern_metrics_count_each_ending_and_the_mean_wait_before_a_refusal():
    got = pattern_metrics(observation([
        {"ok": True, "requests": [[0, 1000, 200]]},
        {"ok": False, "requests": [], "rejected": "bulkhead", "wait_us": 3000, "repeat": 3},   # 3 calls, 3 ms in all
        {"ok": False, "requests": [], "rejected": "rate_limiter", "wait_us": 5000},
        {"ok": False, "requests": [], "rejected": "circuit_breaker", "wait_us": 0},
        {"ok": False, "requests": [[10_000, 50_000, 0]], "timed_out": True},
        {"ok": False, "requests": [[70_000, 1000, 503]], "fallback": True},
        {"ok": True, "requests": [[80_000, 300_000, 0], [140_000, 20_000, 200]]},                # a hedge won
    ]))
    assert got == {"timedOutCalls": 1, "breakerRejectedCalls": 1, "bulkheadRejectedCalls": 3, "rateLimitedCalls": 1,
                   "rejectionWaitTime": 1.6, "hedgedRequests": 1, "fallbackCalls": 1}


def test_a_retrys_sequential_attempts_are_not_hedges():
    assert hedged_requests([[0, 10, 503], [20, 10, 503], [40, 10, 200]]) == 0
    assert hedged_requests([[0, 100, 0], [50, 100, 0], [60, 10, 200]]) == 2      # both start while one runs
    assert hedged_requests([[50, 10, 200], [0, 100, 0]]) == 1                      # in any order


def test_pattern_columns_are_written_only_for_clients_that_run_such_a_pattern():
    assert runs_measured_patterns("retry+timeout") and runs_measured_patterns("fallback")
    assert not runs_measured_patterns("retry+circuit_breaker") and not runs_measured_patterns("baseline")
    calls = observation([{"ok": True, "requests": [[0, 1000, 200]]}])
    assert "timedOutCalls" not in vu_metrics(calls)
    assert vu_metrics(calls, patterns=True)["rejectionWaitTime"] is None          # no refusal: no mean


# -- oracles -------------------------------------------------------------------------------------------
def test_a_fallback_reported_as_a_success_is_a_violation():
    s = scenario("failsafe", "retry+fallback", {"retry.maxAttempts": 2, "retry.delay": 0})
    assert oracles(pattern_violations(s, "user", observation([{"ok": False, "requests": [[0, 1, 503]],
                                                                "fallback": True}]))) == []
    assert oracles(pattern_violations(s, "user", observation([{"ok": True, "requests": [[0, 1, 503]],
                                                                "fallback": True}]))) == ["fallback.success"]


def test_an_innermost_timeout_never_cuts_a_request_before_its_bound():
    s = scenario("resilience4j", "retry+timeout", {"retry.maxAttempts": 2, "timeout.timeoutDuration": 50})
    right = [{"ok": False, "timed_out": True, "requests": [[0, 49_000, 0], [60_000, 51_000, 0]]}]
    assert oracles(pattern_violations(s, "user", observation(right))) == []
    early = [{"ok": False, "timed_out": True, "requests": [[0, 25_000, 0], [30_000, 25_000, 0]]}]
    assert oracles(pattern_violations(s, "user", observation(early))) == ["timeout.early", "timeout.early"]
    unfounded = [{"ok": False, "timed_out": True, "requests": [[0, 1000, 503]]}]
    assert oracles(pattern_violations(s, "user", observation(unfounded))) == ["timeout.reported"]
    # an answer that came as the timer fired (53 ms of 50): the library gave up on it first
    raced = [{"ok": False, "timed_out": True, "requests": [[0, 53_000, 200]]}]
    assert oracles(pattern_violations(s, "user", observation(raced))) == []
    answered_early = [{"ok": False, "timed_out": True, "requests": [[0, 39_000, 200]]}]
    assert oracles(pattern_violations(s, "user", observation(answered_early))) == ["timeout.reported"]
    # outside the retry the timeout bounds the whole call, not each request: nothing to judge per request
    outer = scenario("resilience4j", "timeout+retry", {"retry.maxAttempts": 2, "timeout.timeoutDuration": 50})
    assert oracles(pattern_violations(outer, "user", observation(early))) == []


def test_a_hedge_comes_no_earlier_than_its_delay_and_no_more_often_than_allowed():
    s = scenario("failsafe", "hedge", {"delay": 60, "maxHedges": 1})
    assert oracles(pattern_violations(s, "user", observation([{"ok": True, "requests": [[0, 300_000, 0],
                                                                                         [61_000, 300_000, 200]]}]))) == []
    assert oracles(pattern_violations(s, "user", observation([{"ok": True, "requests": [[0, 300_000, 0],
                                                                                         [30_000, 300_000, 200]]}]))) \
        == ["hedge.early"]
    three = [{"ok": True, "requests": [[0, 300_000, 0], [60_000, 300_000, 0], [120_000, 300_000, 200]]}]
    assert oracles(pattern_violations(s, "user", observation(three))) == ["hedge.count"]


def test_a_users_own_rate_limiter_never_lets_more_through_than_its_periods_allow():
    s = scenario("resilience4j", "rate_limiter", {"limitForPeriod": 2, "limitRefreshPeriod": 100_000_000,
                                                  "timeoutDuration": 1000})
    calls = [{"ok": True, "requests": [[k * 50_000, 1000, 200]]} for k in range(10)]
    assert oracles(pattern_violations(s, "user", observation(calls, total_us=460_000))) == []
    twice = [{"ok": True, "requests": [[k * 25_000, 1000, 200]]} for k in range(20)]
    assert oracles(pattern_violations(s, "user", observation(twice, total_us=480_000))) == ["rate_limiter.rate"]
    # one limiter for all users: a user sees only its share, nothing to judge
    assert oracles(pattern_violations(s, "client", observation(twice, total_us=480_000))) == []
