"""Calibration beside other work: `rbl calibrate` on a real target (httpbin under a cgroup budget, the
fault proxy, rbl-load) while a busy loop outside rbl takes a core; the stored capacity is marked busy
with what the sampler measured, the warning says so, and `--show` prints it with every step."""

from __future__ import annotations

import json
import subprocess
import sys

from rbl.runner.capacity import machine_fingerprint, target_key
from rbl.runner.capacity_cache import store_path

from .conftest import run_rbl

# a path of its own, so this entry (measured busy on purpose) is no other test's capacity
SPEC = """space busy_calibration {
  load = open
  load.rate = 50%
  load.duration = 4s
  target = "/factorial/4321"
  target.cpus = 0.25
  client istio.circuit_breaker { http2MaxRequests = 4 }
}
"""


def _stored(proxy: str) -> dict:
    key = json.dumps({"machine": machine_fingerprint(),
                      "target": target_key({"path": "/factorial/4321", "replicas": 1, "cpus": 0.25}, proxy, 100.0)},
                     sort_keys=True)
    return json.loads(store_path().read_text())[key]


def test_a_calibration_beside_a_busy_loop_is_stored_marked_busy_and_said_loudly(tmp_path):
    (tmp_path / "busy.rbl").write_text(SPEC)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])     # other work: about a core
    try:
        done = run_rbl("calibrate", "busy.rbl", "--force", cwd=tmp_path, timeout=600)
    finally:
        spinner.kill()
        spinner.wait()
    assert done.returncode == 0, done.stderr
    output = " ".join(done.stderr.split())               # the console wraps long lines
    assert "warning: other processes used" in output and "marked busy" in output, output
    proxy = "envoy" if "Envoy" in done.stderr else "builtin"
    record = _stored(proxy)
    assert record["busy"] is True and record["otherWork"]["otherCores"] >= 0.25
    assert record["otherWork"]["samples"] >= 3 and record["method"]["start_rps"] == 25
    assert float(done.stdout.strip()) == record["capacity_rps"] > 0
    # the steps as measured; a failed step that set the bracket was measured twice
    assert record["steps"] and all({"rps", "passed", "successP95Ms"} <= set(step) for step in record["steps"])
    first_failure = next(i for i, step in enumerate(record["steps"]) if not step["passed"])
    assert record["steps"][first_failure + 1]["rps"] == record["steps"][first_failure]["rps"]
    assert record["steps"][first_failure + 1]["repeated"] is True
    shown = run_rbl("calibrate", "busy.rbl", "--show", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"capacity: {record['capacity_rps']:g} req/s" in shown.stdout and "BUSY" in shown.stdout
    assert sum(" req/s " in line and ("pass" in line or "FAIL" in line) for line in shown.stdout.splitlines()) \
        == len(record["steps"])
    # a run that uses it repeats the warning
    again = run_rbl("calibrate", "busy.rbl", cwd=tmp_path)
    assert again.returncode == 0 and "marked busy" in " ".join(again.stderr.split())


def test_show_without_a_stored_capacity_says_how_to_measure_it(tmp_path):
    (tmp_path / "none.rbl").write_text(SPEC.replace("/factorial/4321", "/factorial/4322"))
    done = run_rbl("calibrate", "none.rbl", "--show", cwd=tmp_path)
    assert done.returncode != 0 and "no capacity of this target is stored" in done.stderr
    assert "Traceback" not in done.stderr
