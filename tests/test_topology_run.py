"""Topologies end to end on the local backend: real rbl-chain services, a real sidecar Envoy per
calling service, each policy enforced where its host places it; hops.jsonl says what every edge and
service did; nothing is left running after a run, a failed start or Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rbl.store.hops import read_hops

from .conftest import as_from_a_shell, drawn_svg, run_rbl
from .two_tier import FAULT_AT_BACK, assert_the_back_s_own_faults_are_retried_in_the_front_s_sidecar

USERS = 8
SPEC = f"""space chain {{
  users = {USERS}
  successes = 15
  max_requests = 400
  topology {{
    service front {{
      work = factorial(100)
      calls middle * 2
    }}
    service middle {{
      work = none()
      calls back
    }}
    service back {{
      work = sleep(5ms)
      replicas = 2
      cpus = 0.5
    }}
  }}
  client istio.circuit_breaker {{
    http2MaxRequests = 1
    host in [front, back]
  }}
  client tenacity.retry {{ stop_after_attempt = 2 }}
}}
"""


@pytest.fixture(scope="module")
def chain_run(tmp_path_factory) -> tuple[Path, list[dict], list[dict], str]:
    root = tmp_path_factory.mktemp("topology")
    (root / "chain.rbl").write_text(SPEC)
    done = run_rbl("run", "chain.rbl", "-o", "run", cwd=root, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    out = root / "run"
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return out, rows, list(read_hops(out)), done.stdout + done.stderr


def by_client(hops: list[dict], client: str, index: int | None = None) -> dict:
    (record,) = [h for h in hops if h["client"] == client and (index is None or h["scenarioIndex"] == index)]
    return record


def test_every_round_has_its_record_along_the_chain(chain_run):
    out, rows, hops, stdout = chain_run
    assert len(hops) == 3 and {h["client"] for h in hops} == {"istio.circuit_breaker", "tenacity.retry"}
    assert "target: topology, entry front" in stdout and "back 2/2: 0.5 CPU" in stdout
    assert "refused in" in stdout and "wasted in" in stdout         # the summary says it too (headers wrap)
    for record in hops:
        assert record["oracleViolations"] == []
        services = {s["service"]: s for s in record["services"]}
        assert [services[name]["tier"] for name in ("front", "middle", "back")] == [1, 2, 3]
        assert record["entryRequests"] == services["front"]["requests"] > 0
        # processes here: each replica's own CPU time (a container's or pod's is its cgroup's)
        assert {s["cpuAccounting"] for s in services.values()} == {"process"}
        assert services["front"]["cpuSeconds"] > 0


def test_without_a_refusal_every_entry_request_becomes_the_graphs_requests(chain_run):
    _, rows, hops, _ = chain_run
    record = by_client(hops, "tenacity.retry")
    services = {s["service"]: s for s in record["services"]}
    entry = record["entryRequests"]
    # the library's requests all reach the entry: what the proxy saw in the round (each row repeats it)
    assert {r["proxyRequests"] for r in rows if r["client"] == "tenacity.retry"} == {entry}
    assert entry == sum(r["totalRequests"] for r in rows if r["client"] == "tenacity.retry")
    assert (services["middle"]["requests"], services["back"]["requests"]) == (2 * entry, 2 * entry)
    assert record["amplification"] == 5.0
    edges = {(e["caller"], e["callee"]): e for e in record["edges"]}
    assert edges[("front", "middle")]["calls"] == edges[("front", "middle")]["sidecarUpstreamRequests"] == 2 * entry
    back = edges[("middle", "back")]
    assert back["callsFailed"] == 0 and back["sidecarPoolOverflows"] == 0
    assert 5.0 <= back["successP50Ms"] < 100            # the back service sleeps 5 ms per request
    assert services["back"]["workSeconds"] >= 0.005 * services["back"]["requests"] * 0.9


def test_a_pool_limit_is_enforced_where_its_host_places_it(chain_run):
    _, rows, hops, _ = chain_run
    # on the entry: the client's own sidecar refuses; the services' sidecars never do
    at_front = [r for r in rows if r["client"] == "istio.circuit_breaker" and r["config"]["host"] == "front"]
    assert sum(r["circuitBrokenRequests"] for r in at_front) > 0
    front = by_client(hops, "istio.circuit_breaker", at_front[0]["scenarioIndex"])
    assert all(e["sidecarPoolOverflows"] == 0 for e in front["edges"])
    # on the back service: every caller's sidecar (middle's) refuses, the client's never does
    at_back = [r for r in rows if r["client"] == "istio.circuit_breaker" and r["config"]["host"] == "back"]
    assert sum(r["circuitBrokenRequests"] for r in at_back) == 0
    back = by_client(hops, "istio.circuit_breaker", at_back[0]["scenarioIndex"])
    edges = {(e["caller"], e["callee"]): e for e in back["edges"]}
    assert edges[("middle", "back")]["sidecarPoolOverflows"] > 0
    assert edges[("front", "middle")]["sidecarPoolOverflows"] == 0
    # refused late: the failure went up the chain, and the front's work on it was wasted
    services = {s["service"]: s for s in back["services"]}
    assert services["front"]["answeredFailed"] > 0 and services["front"]["failedWorkSeconds"] > 0
    assert services["back"]["wastedShare"] > 0 and back["wastedCpuSeconds"] > 0


def _processes_of(marker: str) -> list[str]:
    """Command lines of the running processes that mention `marker` (a run directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().split(") ")[-1].split()[0]
        except OSError:
            continue
        if marker in command and state != "Z":
            found.append(command)
    return found


def test_nothing_is_left_running_after_the_run(chain_run):
    out, *_ = chain_run
    assert _processes_of(str(out)) == []


def test_ctrl_c_during_a_topology_run_stops_every_service(tmp_path):
    (tmp_path / "chain.rbl").write_text(SPEC.replace("successes = 15", "successes = 400").replace(
        "max_requests = 400", "max_requests = 100000"))
    out = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-m", "rbl", "run", "chain.rbl", "-o", str(out)], cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               preexec_fn=as_from_a_shell)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (out / "results.jsonl").exists() and not \
                any("--token" in c for c in _processes_of(str(out))):
            time.sleep(0.2)
        time.sleep(1.0)
        assert any("--token" in c for c in _processes_of(str(out))), "the topology never started"
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode != 0, output
    assert _processes_of(str(out)) == [], output


def test_a_failed_start_stops_what_had_started(tmp_path):
    from rbl.backends.local.backend import LocalBackend
    from rbl.backends.local.processes import ServiceNotReady
    from rbl.compiler.pipeline import compile_source
    from rbl.compiler.plan import plan_header
    from rbl.runner.backend import Prepared
    from rbl.targets.envoy_binary import envoy_binary
    space = compile_source(SPEC, "chain.rbl").space
    header = plan_header(space)
    (tmp_path / "logs").mkdir()
    # an rbl-chain that exits at once: the sidecars and the proxy started beside it must go too
    broken = tmp_path / "rbl-chain"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    backend = LocalBackend()
    services = backend.start({**header, "clients": []}, tmp_path, tmp_path / "logs", Prepared(chain=broken))
    with pytest.raises(ServiceNotReady, match="replica 1 \\(rbl-chain\\) exited with code 3"):
        with services:
            pass
    assert envoy_binary() is not None
    assert _processes_of(str(tmp_path)) == []


def test_the_report_shows_the_chain_tier_by_tier(chain_run, tmp_path):
    import csv
    out, *_ = chain_run
    done = run_rbl("report", str(out), "-o", str(tmp_path / "report"), cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "along the chain" in done.stdout
    rows = list(csv.DictReader((tmp_path / "report" / "topology.csv").open()))
    assert [(r["tier"], r["service"]) for r in rows[:3]] == [("1", "front"), ("2", "middle"), ("3", "back")]
    assert len(rows) == 3 * 3                          # three configurations, three services each
    at_back = [r for r in rows if "host=back" in r["configuration"] and r["service"] == "back"]
    assert float(at_back[0]["refusedCallsIn"]) > 0
    for figure in ("topology-tiers.svg", "topology-series.svg"):
        assert drawn_svg(tmp_path / "report" / figure) >= 3
    assert "answers per tier over time" in (tmp_path / "report" / "report.html").read_text().lower()


def test_a_fault_at_a_deep_service_is_injected_and_measured_there(tmp_path):
    (tmp_path / "deep.rbl").write_text(FAULT_AT_BACK)
    done = run_rbl("run", "deep.rbl", "-o", "run", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert_the_back_s_own_faults_are_retried_in_the_front_s_sidecar(rows, read_hops(tmp_path / "run"))


def test_the_chains_metrics_are_columns_rbl_diff_compares(chain_run, tmp_path):
    out, rows, hops, _ = chain_run
    for row in rows:                                   # every row carries its round's record along the chain
        (record,) = [h for h in hops if h["scenarioId"] == row["scenarioId"] and h["round"] == row["round"]]
        assert row["chainAmplification"] == record["amplification"]
        assert row["chainWastedCpuSeconds"] == record["wastedCpuSeconds"]
    assert "chainRefusedCalls" in (out / "results.csv").read_text().splitlines()[0]
    done = run_rbl("diff", str(out), str(out), "--metric", "chainRefusedCalls", "--metric", "chainAmplification",
                   "-o", str(tmp_path / "diff"), cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    compared = json.loads((tmp_path / "diff" / "diff.json").read_text())
    text = json.dumps(compared)
    assert "chainRefusedCalls" in text and "chainAmplification" in text
    refused_at_back = [r for r in rows if r["config"].get("host") == "back"][0]["chainRefusedCalls"]
    assert refused_at_back > 0 and str(refused_at_back) in done.stdout


def test_a_fault_the_callers_sidecars_inject_is_one_their_retry_never_sees(tmp_path):
    # Istio injects a VirtualService's fault in the caller's sidecar, before its router: a retry in that
    # sidecar never sees the aborts, unlike the back service's own (the test above)
    (tmp_path / "deep.rbl").write_text(FAULT_AT_BACK.replace("fault.at = back", "fault.at = back\n  fault.by = sidecar"))
    done = run_rbl("run", "deep.rbl", "-o", "run", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    hops = {h["client"]: h for h in read_hops(tmp_path / "run")}
    for row in rows:
        assert 35 <= row["faultRateApplied"] <= 65, row["faultRateApplied"]    # 50% of the calls of the back
        assert row["oracleViolations"] == []
    for client in ("istio.retry", "istio.baseline"):
        edge, front, back = hops[client]["edges"][0], hops[client]["services"][0], hops[client]["services"][1]
        assert edge["sidecarRetries"] == 0                                      # the retry saw no 5xx
        assert back["requests"] == edge["sidecarUpstreamRequests"] < edge["calls"]   # aborted calls never left
        assert 0.35 <= front["answeredFailed"] / front["requests"] <= 0.65


ONE_EDGE = """space one_edge {
  users = 4
  successes = 20
  max_requests = 400
  fault.rate = 50%
  fault.at = back
  fault.by = sidecar
  fault.from = middle
  topology {
    entry = front
    service front {
      work = none()
      calls back
      calls middle
    }
    service middle {
      work = none()
      calls back
    }
    service back {
      work = none()
    }
  }
  client istio.baseline {}
}
"""


def test_a_fault_on_one_edge_is_injected_by_that_callers_sidecar_alone(tmp_path):
    (tmp_path / "edge.rbl").write_text(ONE_EDGE)
    done = run_rbl("run", "edge.rbl", "-o", "run", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = read_hops(tmp_path / "run")
    edges = {(e["caller"], e["callee"]): e for e in record["edges"]}
    assert edges[("front", "back")]["callsFailed"] == 0
    middle = edges[("middle", "back")]
    assert 0.35 <= middle["callsFailed"] / middle["calls"] <= 0.65
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert all(35 <= row["faultRateApplied"] <= 65 for row in rows)       # over the middle's calls of the back


def test_the_shards_of_a_topology_run_merge_with_each_rounds_hops(tmp_path):
    """A plan's shards run their scenarios' topologies apart (as a cluster's pods do); the merged run
    holds every round's record along the chain, in plan order, from the shard that ran it."""
    from .two_tier import SPEC as TWO_TIER
    (tmp_path / "two-tier.rbl").write_text(TWO_TIER.replace("successes = 15", "successes = 5"))
    for shard in ("0/2", "1/2"):
        done = run_rbl("run", "two-tier.rbl", "--shard", shard, "-o", f"shard-{shard[0]}", cwd=tmp_path, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
    shard_hops = {k: list(read_hops(tmp_path / f"shard-{k}")) for k in "01"}
    assert all(len(records) == 1 for records in shard_hops.values()), shard_hops
    with (tmp_path / "shard-1" / "hops.jsonl").open("a") as damaged:
        damaged.write("{not a record\n")
    done = run_rbl("merge", "shard-0", "shard-1", "-o", "merged", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hops.jsonl:2 is not a round's record; left out" in done.stdout + done.stderr
    merged = list(read_hops(tmp_path / "merged"))
    assert [h["scenarioIndex"] for h in merged] == [0, 1]
    assert sorted(map(json.dumps, merged)) == sorted(json.dumps(h) for records in shard_hops.values() for h in records)
