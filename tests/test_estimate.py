"""The duration estimate of `rbl plan` and `rbl run --dry-run`: the model's arithmetic on known
cases, its response to what makes a run longer, and sampling that does not expand huge spaces."""

from __future__ import annotations

import pytest

from rbl.compiler.expand import iter_scenario_lines
from rbl.compiler.pipeline import compile_source
from rbl.estimate import (ROUND_OVERHEAD_S, STARTUP_S, duration_text, estimate, sample_lines, sample_space,
                          user_seconds)


def scenario(pattern="baseline", rate=0, config=None, users=1, library="tenacity", successes=10, cap=500, kind="abort"):
    fault = {"kind": kind, "rate": rate, **({"duration_ms": 100} if kind == "delay" else {"status": 503})}
    return {"fault": fault, "users": users, "library": library, "pattern": pattern, "config": config or {},
            "successes": successes, "max_requests": cap}


def test_a_baseline_without_faults_takes_successes_times_the_request_time():
    assert user_seconds(scenario(), 2.0) == pytest.approx(10 * 2.0 / 1000)


def test_faults_cost_requests_and_the_cap_bounds_them():
    assert user_seconds(scenario(rate=50), 2.0) == pytest.approx(20 * 2.0 / 1000)
    assert user_seconds(scenario(rate=100, cap=40), 2.0) == pytest.approx(40 * 2.0 / 1000)


def test_retry_waits_are_counted():
    fixed = {"stop_after_attempt": 3, "wait": "fixed", "wait_fixed": 0.1, "multiplier": 1, "exp_base": 2,
             "wait_max": 0}
    quiet = user_seconds(scenario("retry", 0, fixed), 1.0)
    faulted = user_seconds(scenario("retry", 50, fixed), 1.0)
    assert quiet == pytest.approx(10 * 1.0 / 1000)
    # per call: 1 + .5 + .25 requests, waits .5 * 100 + .25 * 100 ms; 10 / (1 - .125) calls
    calls = 10 / (1 - 0.125)
    assert faulted == pytest.approx(calls * (1.75 * 1.0 + 75.0) / 1000, rel=1e-6)


def test_breakers_add_their_open_time():
    breaker = {"fail_max": 2, "reset_timeout": 0.5, "success_threshold": 1}
    plain = user_seconds(scenario("baseline", 50, library="pybreaker"), 1.0)
    opened = user_seconds(scenario("circuit_breaker", 50, breaker, library="pybreaker"), 1.0)
    assert opened > plain + 1.0                   # 20 requests x .25 x .5 openings of 0.5 s


def test_more_users_than_cores_slow_each_request(monkeypatch):
    monkeypatch.setattr("rbl.estimate.os.cpu_count", lambda: 2)
    assert user_seconds(scenario(users=8), 1.0) == pytest.approx(4 * user_seconds(scenario(users=2), 1.0))


def test_delay_faults_lengthen_requests_instead_of_failing_them():
    assert user_seconds(scenario(rate=50, kind="delay"), 1.0) == pytest.approx(10 * (1.0 + 50) / 1000)


def test_the_plan_estimate_adds_start_up_and_a_per_round_overhead():
    result = estimate([(scenario(), 1.0)], size=10, rounds=3, base_ms=1.0)
    assert result.seconds == pytest.approx(STARTUP_S + 30 * (0.01 + ROUND_OVERHEAD_S))
    assert result.measured and "measured" in result.text()


@pytest.mark.parametrize("seconds,text", [(5, "5 s"), (200, "3 min"), (3 * 3600, "3.0 h"), (5 * 86400, "5.0 days"),
                                          (10 * 365.25 * 86400, "10 years"), (1e20, "over a million years")])
def test_durations_read_at_a_glance(seconds, text):
    assert duration_text(seconds) == text


SPACE = """space s {
  users in [1, 10]
  fault.rate in [0%, 50%]
  client tenacity.baseline {}
  client tenacity.retry { stop_after_attempt = 4
    wait = fixed
    wait_fixed in [10ms, 50ms] }
}"""


def test_sampling_a_space_agrees_with_expanding_it():
    space = compile_source(SPACE).space
    from_space = estimate(sample_space(space), space.size, 1).seconds
    from_lines = estimate(sample_lines(iter_scenario_lines(space), space.size), space.size, 1).seconds
    assert from_space == pytest.approx(from_lines, rel=1e-9)


def test_a_huge_space_is_estimated_without_expanding_it():
    huge = compile_source("space h {\n users in 1..1000000\n fault.rate in 0%..100% step 0.01%\n"
                          " client tenacity.retry { stop_after_attempt in 1..1000000 }\n}\n").space
    sample = list(sample_space(huge))              # expanding 10^16 scenarios would never end
    assert len(sample) <= 5 * 5 * 200
    result = estimate(sample, huge.size, huge.rounds)
    assert duration_text(result.seconds) == "over a million years"
