"""A controller in a real run (small scale): examples/adaptive.rbl on real Envoy sidecars, a CPU-bound
target in two replicas under cgroup budgets, open-loop spikes. The adaptive breaker retunes the
sidecar's pool while the load runs (every decision in controllers.jsonl, each in force in the sidecar's
cluster), and the adaptive overload control paper's result holds in shape: its windows' RT95 stays
under its target more often than with the static pool of 1024, and it carries no less than about a
pool of 1 (more, on a quiet machine)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest

from rbl.store.controllers import read_decisions
from rbl.store.requests import read_requests

from .conftest import REPO, drawn_svg, run_rbl

SHORT = ("--rounds", "1", "--set", "load.duration=20s", "--set", "haoc.trt=100ms")


@pytest.fixture(scope="module")
def adaptive(tmp_path_factory) -> tuple[Path, dict[str, dict], str]:
    work = tmp_path_factory.mktemp("adaptive")
    done = run_rbl("run", str(REPO / "examples" / "adaptive.rbl"), "-o", "run", *SHORT, "--report", cwd=work,
                   timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in (work / "run" / "results.jsonl").read_text().splitlines()]
    by_config = {f"{r['client']} {r['config']['http2MaxRequests']}" if r["client"] == "static" else r["client"]: r
                 for r in rows}
    return work / "run", by_config, done.stdout + done.stderr


def rt95_share_under(run: Path, row: dict, target_ms: float, window_s: float = 2.0) -> float:
    """The share of the measured windows whose p95 of successful response times is under the target
    (the paper's "RT95 under target"; windows by scheduled send time, as load.window cuts them)."""
    requests = read_requests(run)
    mine = requests.filter(pc.and_(pc.equal(requests["scenario"], row["scenarioId"]), pc.invert(requests["warmup"])))
    success = mine.filter(pc.equal(mine["cls"], "success"))
    times = success["scheduled_s"].to_numpy()
    response = success["response_ms"].to_numpy()
    start, end = float(pc.min(mine["scheduled_s"]).as_py()), float(pc.max(mine["scheduled_s"]).as_py())
    windows = max(1, int(np.ceil((end - start) / window_s)))
    under = 0
    for index in range(windows):
        inside = response[(times >= start + index * window_s) & (times < start + (index + 1) * window_s)]
        under += bool(inside.size) and float(np.quantile(inside, 0.95)) < target_ms
    return under / windows


def test_the_adaptive_breaker_retunes_the_pool_while_the_load_runs(adaptive):
    run, rows, output = adaptive
    assert "NOT enforced" not in output                   # the budgets are what makes the target saturate
    decisions = [d for d in read_decisions(run) if d["scenarioId"] == rows["haoc"]["scenarioId"]]
    # one decision every 2 s of the 20-s round, each with the window it saw
    assert 7 <= len(decisions) <= 11, [d["elapsedS"] for d in decisions]
    gaps = np.diff([d["elapsedS"] for d in decisions])
    assert gaps.min() > 1.5 and gaps.max() < 3.5, gaps
    assert decisions[0]["previous"] == 1024
    changed = [d for d in decisions if d["value"] != d["previous"]]
    # the spikes bring the limit down from Istio's default, and each new limit was put in force
    assert changed and min(d["value"] for d in decisions) < 64
    assert all(d["appliedMs"] is not None and d["appliedMs"] < 2000 for d in changed)
    assert all(d["appliedMs"] is None for d in decisions if d["value"] == d["previous"])
    # the sidecar refused requests over the limits it was given (a static 1024 never refuses)
    assert rows["haoc"]["circuitBrokenShare"] > 0 and rows["static 1024"]["circuitBrokenShare"] == 0
    assert all(row["oracleViolations"] == [] for row in rows.values())


def test_the_adaptive_breaker_keeps_rt95_under_target_and_carries_about_a_pool_of_one_or_more(adaptive):
    run, rows, _ = adaptive
    adaptive_share = rt95_share_under(run, rows["haoc"], 100.0)
    static_share = rt95_share_under(run, rows["static 1024"], 100.0)
    assert adaptive_share > static_share, (adaptive_share, static_share)
    # On a quiet machine it carries more than a pool of 1 (67% against 47%). On a busy one the RT95
    # it reads rises, HAOC lowers its limit to 1 as it should, and one 20-s round ends near a draw
    # (42% against 47% and 42% against 44% in two suite runs here). What must hold anywhere: it never
    # carries much less than a pool of 1, which a controller that refuses more than it must would. A
    # controller that never lowers its limit fails the RT95 check above; one that never moves fails
    # test_the_adaptive_breaker_retunes_the_pool_while_the_load_runs.
    haoc, pool_of_one = rows["haoc"]["carriedThroughput"], rows["static 1"]["carriedThroughput"]
    assert haoc >= 0.8 * pool_of_one, (haoc, pool_of_one)


def test_the_report_draws_the_controller_beside_rt95(adaptive):
    run, rows, _ = adaptive
    report = run / "report"
    assert drawn_svg(report / "controllers.svg") >= 4                  # the breaker's panels and Envoy's
    lines = (report / "controllers.csv").read_text().splitlines()
    assert lines[0].startswith("configuration,round,elapsedS,controller,parameter")
    assert len(lines) - 1 == len([d for d in read_decisions(run)])
    assert {line.split(",")[0] for line in lines[1:]} >= {"haoc", "envoy", "limiter", "netflix"}
    assert "Controllers over time" in (report / "report.html").read_text()


def test_envoys_filter_limit_is_read_every_window_beside_the_windows_rt95(adaptive):
    """Envoy's gradient controller sets its own limit: the runner reads it every 2-s load window. Its
    first minimum-RTT measurement holds the limit at 3 (minConcurrency), then the limit moves."""
    run, rows, _ = adaptive
    readings = [d for d in read_decisions(run) if d["scenarioId"] == rows["envoy"]["scenarioId"]]
    assert 7 <= len(readings) <= 11, [d["elapsedS"] for d in readings]
    assert all(d["algorithm"] == "envoy-gradient" and d["parameter"] == "concurrencyLimit" and d["appliedMs"] is None
               for d in readings)
    values = [d["value"] for d in readings]
    assert min(values) >= 1 and len(set(values)) > 1, values
    assert [d["previous"] for d in readings[1:]] == values[:-1]
    assert any(d["window"]["rt95Ms"] is not None for d in readings)
    assert rows["envoy"]["circuitBrokenShare"] > 0                      # its refusals, counted as the sidecar's


@pytest.mark.parametrize("client, algorithm", [("limiter", "failsafe-adaptivelimiter"), ("netflix", "netflix-vegas")])
def test_a_library_limiters_own_limit_is_read_every_window(adaptive, client, algorithm):
    """failsafe-go's and Netflix's limiters set their limits inside the client service: the runner
    reads them every 2-s load window (GET /limits) and records them as Envoy's filter's are. Under
    the spikes the limit moves, and the calls beyond it are refused as a concurrency limit's."""
    run, rows, _ = adaptive
    readings = [d for d in read_decisions(run) if d["scenarioId"] == rows[client]["scenarioId"]]
    assert 7 <= len(readings) <= 11, [d["elapsedS"] for d in readings]
    assert all(d["algorithm"] == algorithm and d["parameter"] == "concurrencyLimit" and d["appliedMs"] is None
               for d in readings)
    values = [d["value"] for d in readings]
    assert min(values) >= 1 and len(set(values)) > 1, values
    assert rows[client]["rejectedShare"] > 0, rows[client]


def test_each_decision_is_algorithm_1_on_the_window_it_saw(adaptive):
    """Replayed from controllers.jsonl: the limits the run set are the ones Algorithm 1 gives."""
    from rbl.runner.controllers import AdaptiveBreaker, Window
    run, rows, _ = adaptive
    replay = AdaptiveBreaker({"http2MaxRequests": 1024, "trt": 100, "p": 0.9})
    for decision in (d for d in read_decisions(run) if d["scenarioId"] == rows["haoc"]["scenarioId"]):
        seen = decision["window"]
        window = Window(seen["answered"], seen["successes"], seen["failed"], seen["circuitBroken"], seen["rt95Ms"],
                        seen["queue"])
        assert (decision["previous"], decision["value"]) == (replay.value, replay.decide(window)), decision


# a twentieth of the requests delayed 150 ms, and no retry of a timed-out try (retryOn): with retries, a
# delayed request outlasts its per-try timeout and fails (halve); with none left, a window of 20 with
# at most one delayed request is timely (one more attempt); both come up in a dozen windows
AIMD = """space aimd {
  rounds = 1
  load = open
  load.rps = 20
  load.duration = 12s
  load.warmup = 2s
  load.timeout = 2s
  target = "/status/200"
  fault.kind = delay
  fault.duration = 150ms
  fault.rate = 5%
  client istio.aimd_retry {
    attempts = 2
    target = 100ms
    retryOn = "connect-failure"
    interval = 1s
  }
}
"""


def test_the_aimd_retry_halves_after_a_late_window_and_adds_one_after_a_timely_one(tmp_path):
    from rbl.runner.controllers import AimdRetry, Window
    (tmp_path / "aimd.rbl").write_text(AIMD)
    done = run_rbl("run", "aimd.rbl", "-o", "run", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    decisions = list(read_decisions(tmp_path / "run"))
    assert 9 <= len(decisions) <= 14, [d["elapsedS"] for d in decisions]
    replay = AimdRetry({"attempts": 2, "target": 100})
    for decision in decisions:
        seen = decision["window"]
        window = Window(seen["answered"], seen["successes"], seen["failed"], seen["circuitBroken"], seen["rt95Ms"],
                        seen["queue"])
        assert (decision["previous"], decision["value"]) == (replay.value, replay.decide(window)), decision
        assert decision["state"]["perTryTimeoutMs"] == (max(1, 100 // decision["value"]) if decision["value"] else None)
    assert any(d["value"] < d["previous"] for d in decisions) and any(d["value"] > d["previous"] for d in decisions)
    # the last value set is the route's retry policy in the sidecar's files
    last = [d for d in decisions if d["appliedMs"] is not None][-1]
    route = json.loads((tmp_path / "run" / "envoy" / "sidecar-istio" / "rds.json").read_text())["resources"][0]
    policy = route["virtual_hosts"][0]["routes"][0]["route"].get("retry_policy")
    if last["value"] == 0:
        assert policy is None
    else:
        assert policy["num_retries"] == last["value"]
        assert policy["per_try_timeout"] == f"{max(1, 100 // last['value']) / 1000:.3f}s"
    (row,) = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert row["oracleViolations"] == []


HALVING = '''class Halving:
    """The docs' example (docs/controllers.md): halve after a late window, one more after a timely one."""

    def __init__(self, params):
        self.value = params["http2MaxRequests"]
        self.trt_ms = params["trt"]
        self.seen = 0

    def decide(self, window):
        self.seen += 1
        if window.rt95_ms is not None and window.rt95_ms > self.trt_ms:
            self.value = max(1, self.value // 2)
        else:
            self.value += 1
        return self.value

    def state(self):
        return {"windows": self.seen}


class Broken:
    def __init__(self, params):
        self.value = params["http2MaxRequests"]

    def decide(self, window):
        raise RuntimeError("no idea")
'''

OWN = """space own_controller {
  rounds = 1
  load = open
  load.rps = 20
  load.duration = 6s
  load.warmup = 1s
  load.timeout = 2s
  target = "/status/200"
  fault.kind = delay
  fault.duration = 150ms
  fault.rate = 10%
  client istio.adaptive_breaker as limit {
    controller in ["haoc", "halving"]
    http2MaxRequests = 64
    trt = 100ms
    interval = 1s
  }
}
"""


def installed_package(root: Path) -> dict:
    """A package with controllers under the entry-point group, on PYTHONPATH (as `pip install` would make it)."""
    (root / "mycontrollers.py").write_text(HALVING)
    info = root / "mycontrollers-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mycontrollers\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[rbl.controllers]\nhalving = mycontrollers:Halving\n"
                                           "broken = mycontrollers:Broken\n")
    import os
    return {"PYTHONPATH": f"{REPO}{os.pathsep}{root}"}


def test_a_controller_of_one_s_own_runs_beside_the_built_in_one(tmp_path):
    (tmp_path / "site").mkdir()
    env = installed_package(tmp_path / "site")
    (tmp_path / "own.rbl").write_text(OWN)
    checked = run_rbl("check", "own.rbl", cwd=tmp_path, env=env)
    assert checked.returncode == 0, checked.stderr
    unknown = run_rbl("check", "own.rbl", cwd=tmp_path)                   # without the package
    assert unknown.returncode == 1 and "no controller named 'halving' is installed" in unknown.stderr
    assert "own.rbl:13:5" in unknown.stderr
    done = run_rbl("run", "own.rbl", "-o", "run", cwd=tmp_path, env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    decisions = list(read_decisions(tmp_path / "run"))
    mine = [d for d in decisions if d["algorithm"] == "halving"]
    assert {d["algorithm"] for d in decisions} == {"haoc", "halving"} and 4 <= len(mine) <= 8
    value = 64
    for decision in mine:                      # the decisions are Halving's, on the windows it saw
        late = decision["window"]["rt95Ms"] is not None and decision["window"]["rt95Ms"] > 100
        value = max(1, value // 2) if late else value + 1
        assert (decision["value"], decision["state"]) == (value, {"windows": mine.index(decision) + 1})


def test_a_controller_that_fails_fails_its_round_with_its_message(tmp_path):
    (tmp_path / "site").mkdir()
    env = installed_package(tmp_path / "site")
    (tmp_path / "broken.rbl").write_text(OWN.replace('controller in ["haoc", "halving"]', 'controller = "broken"'))
    done = run_rbl("run", "broken.rbl", "-o", "run", cwd=tmp_path, env=env, timeout=600)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    failures = (tmp_path / "run" / "failures.jsonl").read_text()
    assert "controller 'broken' failed: RuntimeError: no idea" in failures
