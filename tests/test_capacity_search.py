"""How calibration searches for the target's capacity (rbl/runner/capacity.py) without a target: the
search against a stand-in step function, a failing step's verdict read from its first records, and
how long a step lasts."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from rbl.runner import capacity
from rbl.runner.capacity import PRECISION, certainly_failed, search, served_rps, step_seconds
from rbl.store.open_metrics import open_loop_metrics


def stand_in(capacity_rps: float, served_factor: float | None):
    """A step function: rates up to capacity_rps pass; a failing step reports what the target
    served (served_factor x the capacity, as a saturated target answers at its most), or nothing."""
    asked: list[float] = []

    def measure(rps: float) -> dict:
        asked.append(rps)
        passed = rps <= capacity_rps
        served = None if passed or served_factor is None else min(rps, served_factor * capacity_rps)
        return {"rps": rps, "passed": passed, "servedRps": served}
    return measure, asked


@pytest.mark.parametrize("true_capacity", [30, 90, 130, 777, 5000])
@pytest.mark.parametrize("served_factor", [1.03, 1.08, 1.3, None])
def test_the_search_ends_within_its_precision_below_the_capacity(true_capacity, served_factor):
    measure, asked = stand_in(true_capacity, served_factor)
    found, steps = search(measure)
    doublings = next(i for i, step in enumerate(steps) if not step["passed"]) + 2     # its failure, measured twice
    assert steps[doublings - 1]["repeated"] and steps[doublings - 1]["rps"] == steps[doublings - 2]["rps"]
    bisections = len(steps) - doublings
    assert found <= true_capacity
    assert bisections <= capacity.MAX_BISECTIONS
    assert true_capacity <= found * (1 + PRECISION) or bisections == capacity.MAX_BISECTIONS


def test_a_failing_steps_served_rate_saves_bisections():
    """A target whose capacity is within PRECISION of what it serves overloaded (a short service
    time against the bound): one step after the first failure ends the search."""
    without, asked_without = stand_in(130, None)
    with_served, asked_with = stand_in(130, 1.03)
    found_without, _ = search(without)
    found_with, _ = search(with_served)
    assert asked_with == [25, 50, 100, 200, 200, 130 * 1.03 / (1 + PRECISION)]
    assert len(asked_with) < len(asked_without)
    assert 130 / (1 + PRECISION) <= found_with <= 130
    assert found_without <= 130


def test_a_served_rate_hardly_above_the_passing_rate_is_no_bound():
    """A chain whose goodput collapses under overload serves less than it carries at capacity:
    overloaded at 100 req/s it answered 52, while 70 passes. The search bisects below the failing
    rate instead of stopping just above 50."""
    asked = []

    def collapsing(rps: float) -> dict:
        asked.append(rps)
        passed = rps <= 70
        return {"rps": rps, "passed": passed, "servedRps": None if passed else 52.0}
    found, _ = search(collapsing)
    assert asked[:5] == [25, 50, 100, 100, 75]
    assert 70 / (1 + PRECISION) <= found <= 70


@pytest.mark.parametrize("true_capacity", [6, 11, 19, 24])
@pytest.mark.parametrize("served_factor", [1.03, 1.3, None])
def test_a_target_that_fails_the_first_step_is_searched_below_it(true_capacity, served_factor):
    measure, asked = stand_in(true_capacity, served_factor)
    found, steps = search(measure)
    assert asked[0] == capacity.START_RPS and not steps[0]["passed"]
    assert all(rps >= capacity.MIN_RPS for rps in asked)
    bisections = len(steps) - next(i for i, step in enumerate(steps) if step["passed"]) - 1
    assert 0 < found <= true_capacity
    assert true_capacity <= found * (1 + PRECISION) or bisections == capacity.MAX_BISECTIONS


def test_a_target_too_slow_for_the_lowest_step_has_no_capacity():
    measure, asked = stand_in(capacity.MIN_RPS * 0.9, None)
    assert search(measure)[0] == 0
    # halved, MIN_RPS the last step, each failure measured twice
    assert asked == [25, 25, 12.5, 12.5, 6.25, 6.25, capacity.MIN_RPS, capacity.MIN_RPS]


def test_a_failure_that_does_not_repeat_does_not_set_the_bracket():
    """A moment of other work fails a step once: measured again, it passes, and the search goes on up."""
    measure, asked = stand_in(130, 1.03)
    flaky = {50.0}

    def once_flaky(rps: float) -> dict:
        step = measure(rps)
        if rps in flaky:
            flaky.discard(rps)
            return {**step, "passed": False, "servedRps": 20.0}
        return step
    found, steps = search(once_flaky)
    assert asked[:4] == [25, 50, 50, 100] and steps[2]["repeated"] and steps[2]["passed"]
    assert 130 / (1 + PRECISION) <= found <= 130


def test_steps_last_what_their_statistics_need():
    assert step_seconds(25, 100) == 2.0                      # 50 requests
    assert step_seconds(1000, 100) == capacity.MIN_STEP_S    # a 7% overload shows in 1.5 s past 100 ms
    assert step_seconds(1000, 500) == 7.5                    # ... and in 7.5 s past 500 ms


def table(outcomes: list[tuple[str, float]], warmup: int = 0) -> pa.Table:
    """A step's request table: (class, response ms) per request, 10 ms apart, the first `warmup` in warm-up."""
    n = len(outcomes)
    return pa.table({
        "seq": pa.array(range(n), pa.int64()), "scheduled_s": pa.array([i / 100 for i in range(n)], pa.float64()),
        "lag_ms": pa.array([0.0] * n), "response_ms": pa.array([ms for _, ms in outcomes], pa.float64()),
        "status": pa.array([200] * n, pa.int32()), "cls": pa.array([cls for cls, _ in outcomes]),
        "requests": pa.array([None] * n, pa.int32()), "flags": pa.array([""] * n),
        "warmup": pa.array([i < warmup for i in range(n)])})


def passes(t: pa.Table, slo_ms: float) -> bool:
    metrics = open_loop_metrics(t, window_s=1.0, slo_ms=slo_ms)
    return metrics["successShare"] >= capacity.MIN_SUCCESS_SHARE and metrics["successP95Ms"] < slo_ms


def test_a_step_has_certainly_failed_once_too_many_requests_failed_or_were_slow():
    fast, slow, failed = ("success", 5.0), ("success", 150.0), ("timed_out", None)
    assert not certainly_failed(table([fast] * 10 + [failed]), 100, 100)        # 1 of 100 may fail
    assert certainly_failed(table([fast] * 10 + [failed] * 2), 100, 100)
    assert not certainly_failed(table([slow] * 5), 100, 100)          # p95 of 100: between the 95th and 96th
    assert certainly_failed(table([slow] * 6), 100, 100)
    assert not certainly_failed(table([failed] * 5, warmup=5), 100, 100)       # the warm-up does not count


def test_a_certain_failure_is_a_failure_however_the_step_goes_on():
    rng = random.Random(45)
    for _ in range(300):
        measured = rng.randint(50, 200)
        seen = rng.randint(1, measured)
        prefix = [rng.choice([("success", 5.0)] * 8 + [("success", 150.0), ("timed_out", None)])
                  for _ in range(seen)]
        if certainly_failed(table(prefix), measured, 100):
            best_case = prefix + [("success", 1.0)] * (measured - seen)      # every later request fast
            assert not passes(table(best_case), 100), (measured, seen)


def test_served_rate_counts_successful_answers_from_the_first_to_the_last():
    # 100 successes scheduled 10 ms apart (a failure among them), each answered 1 s later: 99 gaps over 1 s;
    # the failure does not count
    t = table([("success", 1000.0)] * 50 + [("timed_out", None)] + [("success", 1000.0)] * 50)
    assert served_rps(t) == pytest.approx(99.0)
    assert served_rps(table([("success", 1000.0)] * 19)) is None            # too few to tell
