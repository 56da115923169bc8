"""A topology whose replicas run in pods of their own, as a shard's runner holds it (rbl/backends/
pod_topology.py), tried here with what a pod runs: real rbl-chain replicas started as the Deployments
start them (their configuration and the sidecar's first files from topology_pods.seed_files), a real
sidecar Envoy watching a directory only the front replica writes into, and the runner switching its
configuration through the replica (PUT /rbl/sidecar/NAME). Only the addresses differ from a cluster:
loopback ports here, pod addresses there."""

from __future__ import annotations

import http.client
import json
import subprocess
from pathlib import Path

import pytest

from rbl.backends.net import HOST, free_port
from rbl.backends.pod_topology import PodTopology, read_pods_document
from rbl.dataplane.target_token import TOKEN_HEADER
from rbl.errors import UsageError
from rbl.mesh.sidecar import SidecarError
from rbl.runner.liveness import ServicesLost
from rbl.targets import client_builds
from rbl.targets.envoy_binary import envoy_binary
from rbl.targets.kubernetes.topology_pods import (CHAIN_CONFIG, SIDECAR_DIR, pod_replicas, pods_document, seed_files,
                                                  topology_objects)
from rbl.topology import topology_from_record

from .test_chain_service import read_line

TOKEN = "pod-topology-token"
SPEC = """space pods {
  users = 1
  topology {
    service front {
      work = none()
      calls back
    }
    service back {
      work = none()
      replicas = 2
      cpus = 0.5
    }
  }
  client istio.circuit_breaker {
    http2MaxRequests = 1
    host = back
  }
}
"""


def _header() -> dict:
    from rbl.compiler.pipeline import compile_source
    from rbl.compiler.plan import plan_header
    return plan_header(compile_source(SPEC, "pods.rbl").space)


TOPOLOGY = _header()["topology"]


def _topology():
    return topology_from_record(TOPOLOGY)


def test_each_replica_is_a_deployment_with_its_cpu_limit_and_a_caller_has_its_sidecar_beside_it():
    header = {"topology": TOPOLOGY}
    objects = topology_objects(header, "rbl-t-1234", "ns", 0, TOKEN, "rbl/runner:x", "Never")
    deployments = {d["metadata"]["name"]: d for d in objects if d["kind"] == "Deployment"}
    assert sorted(deployments) == ["rbl-t-1234-0-back-0", "rbl-t-1234-0-back-1", "rbl-t-1234-0-front-0"]
    front = deployments["rbl-t-1234-0-front-0"]["spec"]["template"]["spec"]
    assert [c["name"] for c in front["containers"]] == ["service", "sidecar"]
    assert "--sidecar-dir" in front["containers"][0]["command"] and "resources" not in front["containers"][0]
    assert front["initContainers"][0]["name"] == "seed"
    back = deployments["rbl-t-1234-0-back-1"]["spec"]["template"]["spec"]
    assert [c["name"] for c in back["containers"]] == ["service"]
    assert back["containers"][0]["resources"] == {"requests": {"cpu": "500m"}, "limits": {"cpu": "500m"}}
    assert "--sidecar-dir" not in back["containers"][0]["command"]
    # the shards' anti-affinity selects rbl.dev/run: the topology's pods must not carry it
    for document in objects:
        assert "rbl.dev/run" not in document["metadata"]["labels"]
    seeded = next(d for d in objects if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("front-0"))
    assert {"config.json", "envoy.json", "rds.json", "cds.json"} <= set(seeded["data"])


def test_a_pods_document_that_is_not_one_is_a_usage_error(tmp_path):
    path = tmp_path / "pods.json"
    for text in ("not json", '{"token": "t"}', '{"token": "t", "replicas": [{"service": "front"}]}'):
        path.write_text(text)
        with pytest.raises(UsageError, match="not the topology's pods"):
            read_pods_document(path)
    path.write_text(json.dumps({"token": "t", "replicas": []}))
    with pytest.raises(UsageError, match="no replica of front, back"):
        PodTopology(_topology(), read_pods_document(path))
    placed = [(replica, f"pod-{replica.label}", "10.0.0.1", None) for replica in pod_replicas(_topology())]
    document = json.loads(pods_document(TOKEN, placed))
    document["replicas"][-1]["service"] = "elsewhere"         # back keeps one replica
    path.write_text(json.dumps(document))
    with pytest.raises(UsageError, match="replicas of elsewhere, which the plan's topology does not have"):
        PodTopology(_topology(), read_pods_document(path))


class _Pods:
    """The replicas and the front's sidecar as their pods run them, on loopback ports."""

    def __init__(self, root: Path):
        self.root = root
        self.processes: list[subprocess.Popen] = []
        self.ports: dict[str, int] = {}

    def start(self) -> dict:
        chain, envoy = client_builds.chain_binary(), envoy_binary()
        topology = _topology()
        sidecar_port, admin_port = free_port(), free_port()
        placed = []
        for replica in pod_replicas(topology):
            files = seed_files(topology, replica, None)
            config = json.loads(files.pop(CHAIN_CONFIG))
            pod = self.root / replica.label
            (pod / "sidecar").mkdir(parents=True)
            if replica.calls:           # the init container's copy, with this machine's paths and ports
                text = json.dumps(files)
                text = text.replace(f"{SIDECAR_DIR}/", f"{pod / 'sidecar'}/")
                for name, body in json.loads(text).items():
                    document = json.loads(body)
                    if name == "envoy.json":
                        _retarget_bootstrap(document, sidecar_port, admin_port)
                    (pod / "sidecar" / name).write_text(json.dumps(document))
                config["outbound"] = f"{HOST}:{sidecar_port}"
                self._spawn([str(envoy), "-c", str(pod / "sidecar" / "envoy.json"), "--concurrency", "1",
                             "--use-dynamic-base-id", "--log-level", "warning"], pod / "envoy.log")
            (pod / "config.json").write_text(json.dumps(config))
            port = free_port()
            argv = [str(chain), "--listen", f"{HOST}:{port}", "--config", str(pod / "config.json"), "--token", TOKEN]
            process = self._spawn(argv + (["--sidecar-dir", str(pod / "sidecar")] if replica.calls else []),
                                  stdout=subprocess.PIPE)
            assert read_line(process) == "ready\n"
            self.ports[replica.label] = port
            placed.append((replica, f"pod-{replica.label}", HOST, "500m" if replica.cpus else None))
        document = json.loads(pods_document(TOKEN, placed))
        for entry in document["replicas"]:             # loopback ports, not each pod's own 8080 and 15000
            entry["port"] = self.ports[f"{entry['service']}-{entry['index']}"]
            entry["admin_port"] = admin_port if entry["calls"] else None
        _wait_ready(admin_port)
        return document

    def _spawn(self, argv, log: Path | None = None, stdout=None) -> subprocess.Popen:
        out = open(log, "wb") if log else stdout
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT if log else subprocess.DEVNULL,
                                   text=log is None)
        self.processes.append(process)
        return process

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _retarget_bootstrap(bootstrap: dict, listen_port: int, admin_port: int) -> None:
    bootstrap["admin"]["address"]["socket_address"].update(address=HOST, port_value=admin_port)
    listener = bootstrap["static_resources"]["listeners"][0]["address"]["socket_address"]
    listener.update(address=HOST, port_value=listen_port)


def _wait_ready(admin_port: int) -> None:
    import time
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection(HOST, admin_port, timeout=2)
            connection.request("GET", "/ready")
            if connection.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("the sidecar Envoy did not become ready")


def _get(port: int) -> int:
    connection = http.client.HTTPConnection(HOST, port, timeout=10)
    try:
        connection.request("GET", "/", headers={TOKEN_HEADER: TOKEN})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


@pytest.fixture
def pods(tmp_path):
    running = _Pods(tmp_path)
    try:
        yield running, running.start()
    finally:
        running.stop()


def test_the_runner_configures_a_pods_sidecar_through_its_replica_and_reads_the_chain(pods):
    running, document = pods
    topology = PodTopology(_topology(), document)
    front = running.ports["front-0"]
    # seeded with Istio's defaults and no endpoints: the front's calls of back find no replica
    assert _get(front) != 200
    (job, argument), = topology.start_jobs()    # what the backend runs before the proxy and clients start
    job(argument)                   # the callees' addresses and Istio's defaults, through the front replica
    assert [_get(front) for _ in range(10)] == [200] * 10
    counters = topology.counters()
    edge = counters["edges"]["front>back"]
    assert edge["calls"] >= 10 and edge["sidecarUpstreamRequests"] >= 10, edge
    assert counters["services"]["back"]["requests"] >= 10
    # started here without --cgroup-cpu: each replica's own CPU time
    assert {s["cpuAccounting"] for s in counters["services"].values()} == {"process"}
    # a pool of 1 placed on back is a new cluster the sidecar takes (its counters go on)
    placed = topology.configure("circuit_breaker", {"http1MaxPendingRequests": 1, "http2MaxRequests": 1,
                                                    "host": "back"})
    assert placed["back"], placed
    assert topology.description().startswith("topology, entry front, one pod per replica: pod-front-0")
    assert "pod-back-1 (127.0.0.1): CPU limit 500m (0.5 CPU), enforced by the kubelet" in topology.description()


def test_a_replica_that_refuses_the_sidecars_files_loses_the_run(pods):
    running, document = pods
    document = {**document, "token": "not-the-runs-token"}
    topology = PodTopology(_topology(), document)
    with pytest.raises(ServicesLost, match="did not take the configuration") as raised:
        topology.configure(None, {})
    assert isinstance(raised.value.__cause__, SidecarError)


def test_topology_pods_are_refused_where_they_cannot_apply(tmp_path):
    from .conftest import run_rbl
    (tmp_path / "pods.json").write_text(json.dumps({"token": TOKEN, "replicas": []}))
    (tmp_path / "one-hop.rbl").write_text("space one_hop {\n  users = 1\n  client tenacity.baseline {}\n}\n")
    (tmp_path / "pods.rbl").write_text(SPEC)
    for spec, args, refusal in (
            ("one-hop.rbl", [], "--topology-pods places a topology's replicas, and the plan has no topology"),
            ("pods.rbl", ["--backend", "docker"], "--topology-pods is for a shard's pod on a cluster"),
            ("pods.rbl", [], "no replica of front, back")):
        done = run_rbl("run", spec, "--topology-pods", "pods.json", *args, "-o", "run", cwd=tmp_path, timeout=120)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert refusal in done.stderr, done.stderr
        assert not (tmp_path / "run").exists()
