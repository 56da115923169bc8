"""Open-loop load end to end on the local backend: real rbl-load (vegeta), a CPU-bound target under a
cgroup CPU budget, library clients through POST /call and mesh clients through real sidecar Envoys;
per-request Parquet files, the overload metrics and the report's figures. And the reproduction of
a published ordering (ICPE '22 Fig. 6) at small scale, on examples/overload-pool.rbl."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest

from rbl.backends.local.cpu_budget import create_budget
from rbl.runner.load_schedule import send_offsets
from rbl.plan_records import load_of
from rbl.store.requests import read_requests

from .conftest import REPO, drawn_svg, run_rbl
from .pool_rounds import assert_the_paper_s_order, pool_run as run_pool

# Rates as shares of the capacity `rbl run` calibrates (or finds stored) for this target on this
# machine, so the spikes overload it on a fast machine and a slow one alike (fixed rates left a
# faster machine's target idle through the spikes)
SPIKES = """space spikes {
  load = open
  load.rate = 40%
  load.profile = spikes
  load.peak = 250%
  load.period = 6s
  load.length = 2s
  load.duration = 12s
  load.warmup = 2s
  load.timeout = 4s
  target = "/factorial/5000"
  target.cpus = 0.25
  client tenacity.retry { stop_after_attempt = 2 }
  client istio.circuit_breaker { http2MaxRequests = 4 }
}
"""


@pytest.fixture(scope="module")
def spike_run(tmp_path_factory) -> tuple[Path, list[dict], str]:
    work = tmp_path_factory.mktemp("spikes")
    (work / "spikes.rbl").write_text(SPIKES)
    done = run_rbl("run", "spikes.rbl", "-o", "out", "--report", cwd=work, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in (work / "out" / "results.jsonl").read_text().splitlines()]
    return work / "out", rows, done.stderr


def _scenarios(run: Path) -> dict[str, dict]:
    return {s["id"]: s for s in map(json.loads, (run / "scenarios.jsonl").read_text().splitlines())}


def test_every_scheduled_request_is_recorded_once_with_its_scheduled_time(spike_run):
    run, rows, _ = spike_run
    requests = read_requests(run)
    for scenario_id, scenario in _scenarios(run).items():
        mine = requests.filter(pc.equal(requests["scenario"], scenario_id))
        row = next(r for r in rows if r["scenarioId"] == scenario_id)
        expected = list(send_offsets(load_of(scenario), row["capacityRps"], seed=f"{scenario_id}/1"))
        assert sorted(mine["seq"].to_pylist()) == list(range(len(expected)))
        by_seq = dict(zip(mine["seq"].to_pylist(), mine["scheduled_s"].to_pylist()))
        assert [round(by_seq[i] * 1e9) for i in range(len(expected))] == expected
        assert min(mine["lag_ms"].to_pylist()) >= 0           # never sent before its time
        warm = sum(mine["warmup"].to_pylist())
        assert warm == sum(1 for offset in expected if offset < 2e9)
        assert row["offeredRequests"] == len(expected) - warm
        assert row["oracleViolations"] == []


def test_the_sidecar_pool_refuses_during_the_spikes(spike_run):
    run, rows, _ = spike_run
    requests = read_requests(run)
    istio = next(r for r in rows if r["lib"] == "istio")
    mine = requests.filter(pc.equal(requests["scenario"], istio["scenarioId"]))
    broken = [t for t, cls in zip(mine["scheduled_s"].to_pylist(), mine["cls"].to_pylist()) if cls == "circuit_broken"]
    assert istio["circuitBrokenShare"] > 0 and len(broken) > 0
    # at 250% of capacity the pool of 4 fills; at 40% it does not
    in_spikes = sum(1 for t in broken if t % 6 >= 4)
    assert in_spikes / len(broken) > 0.8, (in_spikes, len(broken))
    assert istio["sidecarUpstreamRequests"] == istio["proxyRequests"]


def test_a_library_client_is_called_once_per_arriving_request(spike_run):
    run, rows, _ = spike_run
    requests = read_requests(run)
    tenacity = next(r for r in rows if r["lib"] == "tenacity")
    istio = next(r for r in rows if r["lib"] == "istio")
    mine = requests.filter(pc.equal(requests["scenario"], tenacity["scenarioId"]))
    answered = [sent for sent, cls in zip(mine["requests"].to_pylist(), mine["cls"].to_pylist()) if cls != "timed_out"]
    assert answered and set(answered) <= {1, 2}          # one call each, at most its 2 attempts
    assert tenacity["proxyRequests"] >= sum(answered)     # the proxy saw the calls' requests (and late ones)
    assert tenacity["successShare"] > 0.3
    # nothing bounds the library's calls, so spikes queue at the target; the sidecar's pool of 4
    # refuses instead, and keeps the tail of what it lets through short
    assert tenacity["successP99Ms"] > 3 * istio["successP99Ms"]


def test_the_report_draws_the_time_series_and_the_cdf(spike_run):
    run, _, stderr = spike_run
    report = run / "report"
    html = (report / "report.html").read_text()
    for name, heading in (("overload-classes", "Response classes over time"),
                          ("overload-cdf", "Response time CDF: successful requests, and all requests"),
                          ("overload-percentiles", "Response time percentiles over time")):
        assert drawn_svg(report / f"{name}.svg") >= 3
        assert f"<h2>{heading}" in html
    assert "0.25 CPU (cgroup" in stderr or "NOT enforced" in stderr      # the budget, and whether it holds
    assert "target: replica 1: 1 worker, 0.25 CPU" in html                # the report says what the target was


def test_a_cpu_budget_holds_its_processes_to_their_share():
    """A busy loop inside a 0.2-CPU budget gets at most a fifth of a core (with room for accounting);
    or the machine says why not. The bound tells only if the machine gave the same loop, free, more
    than that at the same moment: on a busy machine a longer burn is tried before giving up."""
    cores_asked = 0.2
    for burn_s in (1.5, 4.5):
        budget, why = create_budget(f"rbl-test-{os.getpid()}", cores_asked)
        if budget is None:
            assert why                                # the run reports "NOT enforced: <why>"
            return
        burn = f"import time\nend = time.time() + {burn_s}\nwhile time.time() < end: pass\nimport resource\n" \
               "print(resource.getrusage(resource.RUSAGE_SELF).ru_utime)"
        try:
            limited = subprocess.run(budget.wrap([sys.executable, "-c", burn]), capture_output=True, text=True,
                                     timeout=60)
            free = subprocess.run([sys.executable, "-c", burn], capture_output=True, text=True, timeout=60)
        finally:
            time.sleep(0.1)
            budget.remove()
        assert not budget.path.exists()
        cpu_limited, cpu_free = float(limited.stdout), float(free.stdout)
        bound = cores_asked * burn_s * 1.5
        assert cpu_limited < bound, f"{cpu_limited:.2f} s of CPU in {burn_s} s within a {cores_asked}-CPU budget"
        if cpu_free > bound:                      # the machine could have given more: the budget held it back
            return
    raise AssertionError(f"the machine gave a free loop {cpu_free:.2f} s of CPU in {burn_s} s, no more than the "
                         f"budget's bound ({bound:.2f} s): too busy to tell whether the budget holds")


@pytest.fixture(scope="module")
def pool_run(tmp_path_factory) -> dict[int, dict]:
    """examples/overload-pool.rbl small on this machine (pool_rounds.py says how)."""
    return run_pool(tmp_path_factory.mktemp("pool"))


def test_the_pool_limits_order_as_the_paper_reports(pool_run):
    """ICPE '22 Fig. 6 (pool_rounds.py: assert_the_paper_s_order)."""
    assert_the_paper_s_order(pool_run)


def test_calibrate_reuses_the_stored_capacity_and_force_is_needed_to_measure_again(pool_run, tmp_path):
    cache = next(iter(pool_run.values()))["_cache"]
    done = run_rbl("calibrate", str(REPO / "examples" / "overload-pool.rbl"), cwd=tmp_path, timeout=60,
                   env={"XDG_CACHE_HOME": cache})
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) == next(iter(pool_run.values()))["capacityRps"] > 0
    assert "stored capacity" in done.stderr and "--force" in done.stderr


# a light request under a small budget: the first step (25 req/s) passes even on a busy machine, and
# the search still ends within a few steps
CALIBRATED = """space calibrated {
  load = open
  load.rate = 50%
  target = "/status/200"
  target.cpus = 0.25
  client tenacity.baseline {}
}
"""


def test_calibrate_force_measures_through_the_backend_and_stores_it(tmp_path):
    """`rbl calibrate --force` starts the target and the proxy through the local backend (none of
    the spec's client services), measures and stores the capacity a later run reads."""
    (tmp_path / "c.rbl").write_text(CALIBRATED)
    done = run_rbl("calibrate", "c.rbl", "--force", "--proxy", "builtin", cwd=tmp_path, timeout=300,
                   env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    capacity = float(done.stdout)
    assert capacity >= 25                       # at least the first step passed
    assert "target: replica 1: 1 worker, 0.25 CPU" in done.stderr and "calibrating /status/200" in done.stderr
    assert "client service" not in done.stderr  # the spec's clients are not started to calibrate its target
    stored = json.loads((tmp_path / "cache" / "rbl" / "capacity.json").read_text())
    assert [record["capacity_rps"] for record in stored.values()] == [capacity]


FIXED_CAPACITY = """space fixed {
  load = open
  load.capacity = 100
  load.rate = 50%
  load.duration = 3s
  load.warmup = 1s
  target = "/status/200"
  client tenacity.baseline {}
}
"""


def test_a_capacity_the_spec_gives_is_what_its_shares_are_of(tmp_path):
    """`load.capacity = 100` with `load.rate = 50%`: 50 req/s, no calibration, the row says 100
    (the shares once failed every round: no capacity was handed to the schedule)."""
    (tmp_path / "fixed.rbl").write_text(FIXED_CAPACITY)
    done = run_rbl("run", "fixed.rbl", "-o", "out", cwd=tmp_path, timeout=300,
                   env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    assert "calibrat" not in done.stderr
    (row,) = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert row["capacityRps"] == 100
    assert row["offeredRequests"] == 100            # 50 req/s over the 2 measured seconds, evenly spaced


INTERRUPTED = """space interrupted {
  rounds = 2
  load = open
  load.rps = 40
  load.duration = 5s
  target = "/bytes/64"
  client tenacity.retry { stop_after_attempt = 2 }
}
"""


def test_an_interrupted_open_loop_run_stops_its_load_and_resumes(tmp_path):
    from .test_run import process_gone, start_run_in_background, wait_until
    process, out = start_run_in_background(tmp_path, INTERRUPTED)

    def load_generators() -> list[int]:
        found = subprocess.run(["pgrep", "-f", "clients/loadgen-"], capture_output=True, text=True).stdout
        return [int(pid) for pid in found.split()]
    wait_until(load_generators, 20, "the second round's load generator")     # inside its schedule
    loads = load_generators()
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    wait_until(lambda: all(process_gone(p) for p in loads), 10, "the load generator to stop")
    done = run_rbl("run", "--resume", "out", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    found = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["round"] for r in found) == [1, 2]
    assert sorted(p.name for p in (out / "requests").glob("*/*")) == ["round-1.parquet", "round-2.parquet"]


@pytest.mark.parametrize("args, refusal", [
    (["--backend", "kubernetes"], "each shard's pod measures its own target's capacity"),
    (["--backend", "docker", "--proxy", "builtin"], "--proxy and --workers apply to the local backend"),
    (["--image", "python=x"], "--image and --network apply to --backend docker"),
])
def test_calibrate_refuses_what_its_backend_cannot_take(tmp_path, args, refusal):
    (tmp_path / "spikes.rbl").write_text(SPIKES)
    done = run_rbl("calibrate", "spikes.rbl", *args, cwd=tmp_path, env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert refusal in done.stderr, done.stderr
    assert not (tmp_path / "cache" / "rbl" / "capacity.json").exists()
