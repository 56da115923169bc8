"""The Envoy bootstrap (templates/envoy.yaml.j2) carries what the runner's fault control needs,
and Envoy's own API definitions accept it: tools/artifact-check unmarshals it strictly into the v3
Bootstrap and runs the protoc-gen-validate rules on it and on every typed_config, as Envoy does at
start-up. No Envoy binary exists on these machines to run it."""

from __future__ import annotations

import pytest
import yaml

from rbl.targets.envoy import EnvoyAddresses, render_envoy_config, write_envoy_config

from .artifact_check import check_envoy

LOOPBACK = EnvoyAddresses(listen_port=10000, admin_port=9901, upstream_host="127.0.0.1", upstream_port=8000)


def _fault_filter(config: dict) -> dict:
    (listener,) = config["static_resources"]["listeners"]
    manager = listener["filter_chains"][0]["filters"][0]["typed_config"]
    return manager


def test_bootstrap_has_admin_layer_fault_blocks_before_the_router_and_loopback_addresses():
    config = yaml.safe_load(render_envoy_config(LOOPBACK))
    assert config["admin"]["address"]["socket_address"] == {"address": "127.0.0.1", "port_value": 9901}
    assert any("admin_layer" in layer for layer in config["layered_runtime"]["layers"])
    (listener,) = config["static_resources"]["listeners"]
    assert listener["address"]["socket_address"] == {"address": "127.0.0.1", "port_value": 10000}
    manager = _fault_filter(config)
    assert manager["stat_prefix"] == "ingress_http"
    assert manager["route_config"]["virtual_hosts"][0]["routes"][0]["route"]["timeout"] == "0s"
    assert [f["name"] for f in manager["http_filters"]] == ["envoy.filters.http.fault", "envoy.filters.http.router"]
    fault = manager["http_filters"][0]["typed_config"]
    assert fault["abort"] == {"http_status": 503, "percentage": {"numerator": 0, "denominator": "HUNDRED"}}
    assert fault["delay"]["percentage"] == {"numerator": 0, "denominator": "HUNDRED"}
    endpoint = config["static_resources"]["clusters"][0]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]
    assert endpoint["endpoint"]["address"]["socket_address"] == {"address": "127.0.0.1", "port_value": 8000}


def test_the_plan_fault_sets_the_configured_status_and_delay():
    config = yaml.safe_load(render_envoy_config(LOOPBACK, fault={"kind": "abort", "status": 429, "duration_ms": 250}))
    fault = _fault_filter(config)["http_filters"][0]["typed_config"]
    assert fault["abort"]["http_status"] == 429
    assert fault["delay"]["fixed_delay"] == "0.250s"


def test_envoy_api_definitions_accept_the_loopback_and_the_container_configs(tmp_path):
    from rbl.targets.compose.artifacts import CONTAINER_ENVOY
    local = write_envoy_config(tmp_path / "local.yaml", LOOPBACK)
    container = write_envoy_config(tmp_path / "container.yaml", CONTAINER_ENVOY, node_id="rbl-x",
                                   fault={"status": 599, "duration_ms": 1})
    done = check_envoy(local, container)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(": ok") == 2


@pytest.mark.parametrize("breakage, expected", [
    (("stat_prefix:", "stats_prefix:"), 'unknown field "stats_prefix"'),
    (('denominator: "HUNDRED"', 'denominator: "HUNDERD"'), 'invalid value for enum field denominator: "HUNDERD"'),
    (("http_status: 503", "http_status: 99"), "value must be inside range [200, 600)"),
    (('fixed_delay: "0.001s"', 'fixed_delay: "-1s"'), "FixedDelay"),
    (("admin_layer: {}", "admin_layer: {unknown: 1}"), 'unknown field "unknown"'),
    (("envoy.extensions.filters.http.router.v3.Router", "envoy.extensions.filters.http.router.v3.Routr"),
     "Routr"),
])
def test_the_validator_rejects_a_deliberately_broken_config(tmp_path, breakage, expected):
    text = render_envoy_config(LOOPBACK)
    old, new = breakage
    assert old in text
    broken = tmp_path / "broken.yaml"
    broken.write_text(text.replace(old, new, 1), encoding="utf-8")
    done = check_envoy(broken)
    assert done.returncode == 1
    assert expected in done.stdout
