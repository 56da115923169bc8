"""Two controllers in one client, in a real run: the adaptive retry paper's setting, its AIMD retry
beside the adaptive breaker in one real sidecar Envoy, a CPU-bound target under a cgroup budget
overloaded by open-loop load. Both decide at every tick on the same window, what changed goes into
force in one switch, and the route and cluster the sidecar last accepted hold both controllers' last
values."""

from __future__ import annotations

import json
from pathlib import Path

from rbl.store.controllers import read_decisions

from .conftest import run_rbl

SPEC = """
space composed_controllers {
  load = open
  load.rps = 50
  load.duration = 12s
  load.warmup = 2s
  load.window = 2s
  load.timeout = 1s
  target = "/factorial/5000"
  target.cpus = 0.25
  target.drop_abandoned = true
  client istio.aimd_retry + adaptive_breaker as both {
    aimd_retry.target = 100ms
    aimd_retry.retryOn = "5xx"
    aimd_retry.interval = 2s
    adaptive_breaker.trt = 50ms
    adaptive_breaker.interval = 2s
  }
}
"""


def test_composed_controllers_decide_together_and_are_both_in_force(tmp_path: Path):
    (tmp_path / "both.rbl").write_text(SPEC)
    done = run_rbl("run", "both.rbl", "-o", "run", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    decisions = list(read_decisions(tmp_path / "run"))
    by_tick: dict[float, dict[str, dict]] = {}
    for decision in decisions:
        by_tick.setdefault(decision["elapsedS"], {})[decision["controller"]] = decision
    # every tick: both, on one window
    assert len(by_tick) >= 4 and all(set(tick) == {"aimd_retry", "adaptive_breaker"} for tick in by_tick.values())
    assert all(tick["aimd_retry"]["window"] == tick["adaptive_breaker"]["window"] for tick in by_tick.values())
    # what changed in a tick went into force in one switch
    for tick in by_tick.values():
        applied = {d["appliedMs"] for d in tick.values() if d["value"] != d["previous"]}
        assert len(applied) <= 1 and None not in applied, tick
    last = {d["controller"]: d["value"] for d in decisions}
    assert last["adaptive_breaker"] != 1024 and any(d["value"] < d["previous"] for d in decisions
                                                    if d["controller"] == "aimd_retry"), decisions
    # the files the sidecar watched, as it last accepted them: both values, whatever changed last
    sidecar = tmp_path / "run" / "envoy" / "sidecar-istio"
    (cluster,) = json.loads((sidecar / "cds.json").read_text())["resources"]
    assert cluster["circuit_breakers"]["thresholds"][0]["max_requests"] == last["adaptive_breaker"]
    (route,) = json.loads((sidecar / "rds.json").read_text())["resources"][0]["virtual_hosts"][0]["routes"]
    retries = route["route"].get("retry_policy", {}).get("num_retries", 0)
    assert retries == last["aimd_retry"], route
    assert row["oracleViolations"] == []
