"""Breaker metrics that do not depend on how fast a client's loop spins (rbl/store/metrics.py):
the same breaker timeline seen by a slow and a fast loop gives the same rejectedTime,
openTransitions, requestsPerSuccess and timeToNthSuccess, while the paper's call counts differ;
and in a real pybreaker run every opening is at least the configured open duration long."""

from __future__ import annotations

from rbl.store.metrics import vu_metrics

from .test_run import rbl, rows


def timeline(rejected_per_opening: int) -> dict:
    """fail, fail, open 50 ms (rejected calls), probe fails, open 50 ms, probe succeeds, 2 more successes."""
    def req(start_ms, status, duration_ms=1):
        return [start_ms * 1000, duration_ms * 1000, status]
    rejected = {"ok": False, "requests": [], "repeat": rejected_per_opening}
    return {"total_us": 200_000, "stopped_by": "successes", "calls": [
        {"ok": False, "requests": [req(0, 503)]}, {"ok": False, "requests": [req(2, 503)]},
        rejected,
        {"ok": False, "requests": [req(53, 503)]},
        rejected,
        {"ok": True, "requests": [req(104, 200)]}, {"ok": True, "requests": [req(106, 200)]},
        {"ok": True, "requests": [req(108, 200)]},
    ]}


def test_spin_free_metrics_do_not_change_with_loop_speed_while_call_counts_do():
    slow, fast = vu_metrics(timeline(40)), vu_metrics(timeline(4000))
    assert slow["totalCalls"] != fast["totalCalls"]                 # the paper's counts follow the loop
    for metric in ("rejectedTime", "openTransitions", "requestsPerSuccess", "timeToNthSuccess"):
        assert slow[metric] == fast[metric], metric
    assert slow["openTransitions"] == 2
    assert slow["rejectedTime"] == (53 - 3) + (104 - 54)              # end of the opening request to the next
    assert slow["requestsPerSuccess"] == 6 / 3
    assert slow["timeToNthSuccess"] == 109


def test_no_breaker_no_rejections_and_an_unreached_success_is_empty():
    observation = {"total_us": 10_000, "stopped_by": "max_requests",
                   "calls": [{"ok": False, "requests": [[0, 1000, 503], [2000, 1000, 503]]}]}
    metrics = vu_metrics(observation)
    assert metrics["rejectedTime"] == 0 and metrics["openTransitions"] == 0
    assert metrics["requestsPerSuccess"] is None and metrics["timeToNthSuccess"] is None


def test_a_job_that_ends_while_rejected_counts_until_its_end():
    observation = {"total_us": 90_000, "stopped_by": "max_duration",
                   "calls": [{"ok": False, "requests": [[0, 10_000, 503]]}, {"ok": False, "requests": [], "repeat": 9}]}
    assert vu_metrics(observation)["rejectedTime"] == 80


SPACE = """
space breaker {
  users = 2
  successes = 1
  max_requests = 12
  target = "/bytes/64"
  fault.rate = 100%
  client pybreaker.circuit_breaker {
    fail_max = 2
    reset_timeout = 30ms
  }
}
"""


def test_in_a_real_run_each_opening_lasts_at_least_the_open_duration(tmp_path):
    (tmp_path / "b.rbl").write_text(SPACE)
    done = rbl("run", "b.rbl", "-o", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for row in rows(tmp_path / "out"):
        # 12 failed requests: the 2nd opens it, each of the 3rd to 11th is a probe that opens it again,
        # and the job ends at the 12th (max_requests) before calling again; a loop stalled for the
        # whole open duration on a loaded machine sees one opening fewer (no rejected call)
        assert 1 <= row["openTransitions"] <= 10, row
        assert row["rejectedTime"] >= row["openTransitions"] * (30 - 2)
        assert row["rejectedTime"] <= row["totalExecutionTime"]
        assert row["timeToNthSuccess"] is None and row["requestsPerSuccess"] is None
