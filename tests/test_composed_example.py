"""examples/composed.rbl run small with the real Resilience4j and failsafe-go clients: a retry around a
circuit breaker trips the breaker far more often than the breaker around the retry, as the two
libraries' semantics predict, and the innermost timeout bounds every attempt.

Why: outside, the retry hands the breaker every attempt, and with 60% of attempts late (cut at 50 ms,
a failure) half of the last four outcomes fail almost at once; the breaker then refuses the retries
too. Inside, the breaker sees whole calls, and a call fails only when all three attempts were late
(0.6^3 = 22%), so it opens a handful of times. A user meets an open breaker as a run of refused calls
(openTransitions) and loses the time they take (rejectedTime): both only a few times in the second
order. One round of 30 successes per user measured a factor 6 to 14 between the orders; the test
asks for 2.5 on the sums over the four users.
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from .conftest import REPO, run_rbl

FACTOR = 2.5
LATE_MS = 200                  # the spec's delay fault; the timeout is 50 ms


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("composed") / "run"
    done = run_rbl("run", str(REPO / "examples" / "composed.rbl"), "-o", str(out), "--rounds", "1",
                   "--set", "fault.rate = 60%", "--set", "successes = 30", "--proxy", "builtin", "--seed", "7",
                   cwd=out.parent, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def sums(rows: list[dict], column: str) -> dict[str, float]:
    total: dict[str, float] = defaultdict(float)
    for row in rows:
        total[row["client"]] += row[column]
    return total


@pytest.mark.parametrize("library", ["r4j", "failsafe"])
@pytest.mark.parametrize("column", ["openTransitions", "rejectedTime"])
def test_a_retry_around_the_breaker_trips_it_far_more_often_than_the_breaker_around_the_retry(rows, library, column):
    total = sums(rows, column)
    outside, inside = total[f"{library}_retry_outside"], total[f"{library}_breaker_outside"]
    assert outside > FACTOR * inside, f"{column}: retry outside {outside:g}, breaker outside {inside:g}"


def test_every_user_reached_its_successes_with_the_timeout_cutting_each_late_attempt(rows):
    assert len(rows) == 4 * 4
    for row in rows:
        assert row["stoppedBy"] == "successes" and row["successfulCalls"] == 30, row
        assert row["oracleViolations"] == [], row["oracleViolations"]
        # every request ends by 50 ms (answered, or cut by the innermost timeout), never at the 200 ms delay
        assert row["latencyP99"] < LATE_MS / 2, row
    for client, timed_out in sums(rows, "timedOutCalls").items():
        assert timed_out > 0, f"{client}: some calls end with all their attempts cut by the timeout"
