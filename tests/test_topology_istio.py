"""`rbl compile --target istio` of a space with a topology: per configuration, a DestinationRule and a
VirtualService for every service, each policy on the service its `host` names (every service for
`all`, the entry when unset), and every file accepted by Istio's own validation (tools/artifact-check)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rbl.cli import app

from .artifact_check import check_istio

SPEC = """space cart {
  users = 4
  topology {
    entry = frontend
    service frontend {
      work = factorial(300)
      calls recommendation
      calls product_catalog * 4 parallel
    }
    service recommendation {
      work = sleep(2ms)
      calls product_catalog
    }
    service product_catalog {
      work = factorial(1000)
      replicas = 3
    }
  }
  client istio.circuit_breaker {
    http2MaxRequests = 20
    host in [frontend, product_catalog, all]
  }
  client istio.retry + circuit_breaker as storm {
    retry.attempts = 1
    retry.host = product_catalog
    circuit_breaker.http2MaxRequests = 1
  }
  client istio.baseline {}
}
"""
SERVICES = ["frontend", "recommendation", "product-catalog"]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    from typer.testing import CliRunner
    root = tmp_path_factory.mktemp("istio")
    (root / "cart.rbl").write_text(SPEC)
    done = CliRunner().invoke(app, ["compile", str(root / "cart.rbl"), "--target", "istio", "-o", str(root / "out")])
    assert done.exit_code == 0, done.output
    return root / "out"


def rules(path: Path) -> dict[str, tuple[dict, dict]]:
    """{host: (DestinationRule spec, VirtualService http route)} of one file."""
    documents = list(yaml.safe_load_all(path.read_text()))
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in documents}
    found = {}
    for host in SERVICES:
        rule = by_kind[("DestinationRule", f"rbl-{host}")]["spec"]
        service = by_kind[("VirtualService", f"rbl-{host}")]["spec"]
        assert rule["host"] == host and service["hosts"] == [host]
        found[host] = (rule.get("trafficPolicy", {}), {k: v for k, v in service["http"][0].items()
                                                        if k not in ("name", "route")})
    assert len(documents) == 2 * len(SERVICES)
    return found


def test_every_file_passes_istios_validation(compiled):
    files = sorted((compiled / "istio").rglob("*.yaml"))
    assert len(files) == 3 + 1 + 1
    done = check_istio(*files)
    assert done.returncode == 0, done.stdout + done.stderr


POOL = {"connectionPool": {"http": {"http2MaxRequests": 20}}}


@pytest.mark.parametrize("index, placed", [(0, ["frontend"]), (1, ["product-catalog"]), (2, SERVICES)])
def test_a_policy_is_on_the_service_its_host_names(compiled, index, placed):
    found = rules(compiled / "istio" / "istio-circuit-breaker" / f"{index}.yaml")
    for host, (rule, route) in found.items():
        assert rule == (POOL if host in placed else {}), host
        assert route == {}, host                  # no retry written: Istio's default retry everywhere


def test_each_policy_of_a_composed_client_has_its_own_placement(compiled):
    found = rules(compiled / "istio" / "storm" / "0.yaml")
    # the retry where its host says; the pool, with no host, on the entry
    assert found["product-catalog"] == ({}, {"retries": {"attempts": 1}})
    assert found["frontend"] == ({"connectionPool": {"http": {"http2MaxRequests": 1}}}, {})
    assert found["recommendation"] == ({}, {})


def test_the_baseline_switches_retries_off_on_every_service(compiled):
    found = rules(compiled / "istio" / "istio-baseline" / "0.yaml")
    assert all(route == {"retries": {"attempts": 0}} and rule == {} for rule, route in found.values())


def test_the_index_names_each_services_kubernetes_name(compiled):
    index = json.loads((compiled / "istio" / "index.json").read_text())
    assert index["services"] == {"frontend": "frontend", "recommendation": "recommendation",
                                 "product_catalog": "product-catalog"}
    assert "product-catalog" in (compiled / "istio" / "README.md").read_text()


@pytest.mark.parametrize("target", ["istio", "compose"])
def test_services_whose_kubernetes_names_collide_are_refused(tmp_path, target):
    from typer.testing import CliRunner
    spec = SPEC.replace("    service recommendation {", "    service Recommendation {\n      work = none()\n    }\n"
                        "    service recommendation {")
    (tmp_path / "cart.rbl").write_text(spec)
    done = CliRunner().invoke(app, ["compile", str(tmp_path / "cart.rbl"), "--target", target, "-o",
                                    str(tmp_path / "out")])
    assert done.exit_code == 2 and "no Kubernetes name of its own ('recommendation')" in done.output
    assert f"--target {target} names each service's" in done.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("arguments, message", [
    (("--target", "kubernetes"), "--target kubernetes writes a Job whose shards run on their own"),
    (("--target", "istio", "--service", "cart"), "--service names the one target of a space without a topology"),
])
def test_what_compile_cannot_write_for_a_topology_is_refused_before_anything_is_written(tmp_path, arguments, message):
    from typer.testing import CliRunner
    (tmp_path / "cart.rbl").write_text(SPEC)
    done = CliRunner().invoke(app, ["compile", str(tmp_path / "cart.rbl"), *arguments, "-o", str(tmp_path / "out")])
    assert done.exit_code == 2 and message in done.output
    assert not (tmp_path / "out").exists()
