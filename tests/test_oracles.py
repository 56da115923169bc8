"""The oracles (rbl/runner/oracles.py) on observations that break them and on ones that do not.

Observations are written the way rbl client protocol v1 reports them: per call `ok` and its
requests [start_us, duration_us, status]. The live tests (test_oracles_live.py) show the same
oracles firing in real runs of mis-mapped clients and staying silent on the real ones.
"""

from __future__ import annotations

import random

import pytest

from rbl.runner.oracles import (fault_rate_violation, request_count_violation, user_violations,
                                wilson_interval)

TENACITY_FIXED = {"stop_after_attempt": 3, "wait": "fixed", "wait_fixed": 0.01, "multiplier": 1, "exp_base": 2.0,
                  "min": 0}
PYBREAKER = {"fail_max": 2, "reset_timeout": 0.05, "success_threshold": 1, "throw_new_error_on_trip": True}


def scenario(library: str, pattern: str, config: dict, kind: str = "abort") -> dict:
    fault = {"kind": kind, "rate": 50, **({"status": 503} if kind == "abort" else {"duration_ms": 100})}
    return {"library": library, "pattern": pattern, "config": config, "fault": fault}


def req(start_ms: float, duration_ms: float = 1, status: int = 200) -> list[int]:
    return [int(start_ms * 1000), int(duration_ms * 1000), status]


def call(*requests, ok: bool | None = None, **extra) -> dict:
    if ok is None:
        ok = bool(requests) and 200 <= requests[-1][2] < 300
    return {"ok": ok, "requests": list(requests), **extra}


def rejected(repeat: int = 1) -> dict:
    return {"ok": False, "requests": [], **({"repeat": repeat} if repeat > 1 else {})}


def oracles(s: dict, calls: list[dict], share: str = "user") -> list[str]:
    return [v.oracle for v in user_violations(s, share, {"calls": calls, "total_us": 10**9})]


# -- baseline --------------------------------------------------------------------------------------

def test_baseline_one_request_per_call_is_silent_and_two_fire():
    s = scenario("tenacity", "baseline", {})
    assert oracles(s, [call(req(0)), call(req(2, status=503)), call(req(4))]) == []
    assert oracles(s, [call(req(0)), call(req(2, status=503), req(4))]) == ["baseline.requests"]


def test_a_call_cut_short_is_not_judged():
    s = scenario("tenacity", "baseline", {})
    assert oracles(s, [call(req(0)), call(ok=False, cut_short=True)]) == []


# -- retry -----------------------------------------------------------------------------------------

def test_retry_as_configured_is_silent():
    s = scenario("tenacity", "retry", TENACITY_FIXED)
    calls = [call(req(0, 1, 503), req(11, 1, 503), req(22, 1, 503)),      # 3 attempts, 10 ms waits
             call(req(30, 1, 503), req(41, 1, 200)),                      # success on the retry
             call(req(50, 1, 200))]
    assert oracles(s, calls) == []


def test_retry_with_one_attempt_too_many_fires():
    s = scenario("tenacity", "retry", TENACITY_FIXED)
    calls = [call(req(0, 1, 503), req(11, 1, 503), req(22, 1, 503), req(33, 1, 503))]
    assert oracles(s, calls) == ["retry.attempts"]


def test_a_failed_call_that_gave_up_early_fires():
    s = scenario("tenacity", "retry", TENACITY_FIXED)
    assert oracles(s, [call(req(0, 1, 503), req(11, 1, 503))]) == ["retry.attempts"]


def test_a_wait_shorter_than_configured_fires_and_a_longer_one_does_not():
    s = scenario("tenacity", "retry", TENACITY_FIXED)
    assert oracles(s, [call(req(0, 1, 503), req(5, 1, 503), req(40, 1, 503))]) == ["retry.wait"]
    assert oracles(s, [call(req(0, 1, 503), req(30, 1, 503), req(90, 1, 503))]) == []   # a busy machine


def test_exponential_waits_are_checked_per_retry():
    # Resilience4j ofExponentialBackoff(20, 1.5): waits 20, 30 ms
    config = {"maxAttempts": 3, "intervalFunction": "EXPONENTIAL_BACKOFF", "initialIntervalMillis": 20,
              "multiplier": 1.5, "waitDuration": 500}
    s = scenario("resilience4j", "retry", config)
    assert oracles(s, [call(req(0, 1, 503), req(21, 1, 503), req(52, 1, 503))]) == []
    assert oracles(s, [call(req(0, 1, 503), req(21, 1, 503), req(42, 1, 503))]) == ["retry.wait"]


def test_random_waits_are_checked_for_attempts_only():
    s = scenario("tenacity", "retry", {**TENACITY_FIXED, "wait": "random_exponential"})
    assert oracles(s, [call(req(0, 1, 503), req(1.5, 1, 503), req(3, 1, 503))]) == []
    assert oracles(s, [call(*(req(i, 0.5, 503) for i in range(4)))]) == ["retry.attempts"]


# -- circuit breaker ---------------------------------------------------------------------------------

def test_breaker_as_configured_is_silent():
    s = scenario("pybreaker", "circuit_breaker", PYBREAKER)
    calls = [call(req(0)), call(req(2, 1, 503)), call(req(4, 1, 503)),      # opens at 5 ms
             rejected(40),
             call(req(56, 1, 503)),                                         # probe fails at 57: open again
             rejected(30),
             call(req(108, 1, 200)),                                        # probe succeeds: closed
             call(req(110, 1, 503)), call(req(112, 1, 200))]
    assert oracles(s, calls) == []


def test_a_breaker_that_opens_too_early_fires():
    s = scenario("pybreaker", "circuit_breaker", PYBREAKER)
    assert oracles(s, [call(req(0, 1, 503)), rejected(10), call(req(60))]) == ["breaker.opened_early"]


def test_a_breaker_that_lets_a_request_through_before_its_open_duration_fires():
    s = scenario("pybreaker", "circuit_breaker", PYBREAKER)
    calls = [call(req(0, 1, 503)), call(req(2, 1, 503)), rejected(20), call(req(25))]
    assert oracles(s, calls) == ["breaker.open_duration"]


def test_a_breaker_that_never_opens_fires():
    s = scenario("pybreaker", "circuit_breaker", PYBREAKER)
    calls = [call(req(0, 1, 503)), call(req(2, 1, 503)), call(req(4, 1, 503)), call(req(6))]
    assert "breaker.open_duration" in oracles(s, calls)


def test_a_breaker_shared_by_all_users_is_not_replayed():
    s = scenario("pybreaker", "circuit_breaker", PYBREAKER)
    assert oracles(s, [call(req(0, 1, 503)), rejected(10)], share="client") == []


def test_resilience4j_slow_calls_count_as_failures_under_a_delay_fault():
    config = {"failureRateThreshold": 100, "slidingWindowType": "COUNT_BASED", "slidingWindowSize": 2,
              "minimumNumberOfCalls": 2, "waitDurationInOpenState": 50, "permittedNumberOfCallsInHalfOpenState": 1,
              "slowCallDurationThreshold": 60, "slowCallRateThreshold": 100}
    s = scenario("resilience4j", "circuit_breaker", config, kind="delay")
    slow = [call(req(0, 100, 200)), call(req(101, 100, 200)), rejected(5), call(req(260, 100, 200))]
    assert oracles(s, slow) == []                       # two slow calls opened it, as configured
    early = [call(req(0, 100, 200)), call(req(101, 100, 200)), call(req(202, 100, 200))]
    assert oracles(s, early) == ["breaker.open_duration"]


# -- per round: fault rate and request count ---------------------------------------------------------

def test_wilson_interval_closes_on_the_observed_side_at_0_and_n():
    assert wilson_interval(0, 100, 0.01)[0] == 0.0
    assert wilson_interval(100, 100, 0.01)[1] == 1.0
    low, high = wilson_interval(50, 100, 0.05)
    assert 0.39 < low < 0.41 and 0.59 < high < 0.61


@pytest.mark.parametrize("configured, injected, seen, fires", [
    (50, 500, 1000, False),
    (50, 250, 1000, True),          # the proxy faulted half as often as configured
    (0, 0, 500, False),
    (0, 1, 500, True),              # any fault at 0% is wrong
    (100, 500, 500, False),
    (100, 499, 500, True),
    (20, 0, 0, False),              # nothing seen: nothing to judge
])
def test_fault_rate_oracle(configured, injected, seen, fires):
    assert (fault_rate_violation(configured, injected, seen, rounds_in_run=60) is not None) == fires


def test_fault_rate_oracle_stays_silent_on_correct_rates_over_many_rounds():
    """The level accounts for testing every round: 2000 honest rounds raise nothing, while a run of
    60 rounds judged against a rate 20 points off is caught in most of them."""
    rng = random.Random(7)

    def rounds(count):
        for _ in range(count):
            seen = rng.randint(80, 300)
            yield sum(rng.random() < 0.3 for _ in range(seen)), seen

    assert not any(fault_rate_violation(30, injected, seen, 2000) for injected, seen in rounds(2000))
    caught = sum(fault_rate_violation(50, injected, seen, 60) is not None for injected, seen in rounds(60))
    assert caught > 60 // 2


def test_the_fault_rate_oracle_catches_a_slipped_rate_in_a_single_small_round():
    """40% applied as 4%, or a proxy that never faults: caught in any round of 100 requests, in a run of 500 rounds."""
    assert fault_rate_violation(40, 4, 100, rounds_in_run=500) is not None
    assert fault_rate_violation(40, 0, 100, rounds_in_run=500) is not None
    assert fault_rate_violation(40, 40, 100, rounds_in_run=500) is None


def test_request_count_oracle():
    assert request_count_violation(100, 100, False) is None
    assert request_count_violation(100, 101, False).oracle == "requests.count"
    assert request_count_violation(100, 101, True) is None         # cut short, or a connection error


def test_a_resilience4j_breaker_opened_by_slow_calls_on_a_loaded_machine_is_not_judged():
    """Under an abort fault the configuration expects only failures to open it, but two plain
    requests slower than slowCallDurationThreshold (a stalled machine) open it too: not a violation."""
    config = {"failureRateThreshold": 100, "slidingWindowType": "COUNT_BASED", "slidingWindowSize": 2,
              "minimumNumberOfCalls": 2, "waitDurationInOpenState": 20, "permittedNumberOfCallsInHalfOpenState": 1,
              "slowCallDurationThreshold": 1000, "slowCallRateThreshold": 100}
    s = scenario("resilience4j", "circuit_breaker", config)
    stalled = [call(req(0, 1100, 200)), call(req(1101, 1050, 200)), rejected(5), call(req(2200, 1, 200))]
    assert oracles(s, stalled) == []
    fast = [call(req(0, 1, 200)), call(req(2, 1, 200)), rejected(5), call(req(30, 1, 200))]
    assert oracles(s, fast) == ["breaker.opened_early"]             # fast successes never open it
