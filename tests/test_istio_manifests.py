"""`rbl compile --target istio`: every file is a DestinationRule and a VirtualService that Istio's
own reader and validation accept (tools/artifact-check istio), each rbl parameter lands in its Istio
field, what the spec leaves out stays out, and the validator rejects planted mistakes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rbl.targets.istio import translate
from rbl.libraries.composition import policies_of

from .artifact_check import check_istio

SPEC = """space mesh {
  rounds = 1
  users in [5]
  successes = 10
  max_requests = 100
  target = "/bytes/100"
  fault.kind = abort
  fault.status = 503
  fault.rate in [0%, 50%]

  client istio.baseline {}

  client istio.retry {
    attempts in [1, 3]
    perTryTimeout = 25ms
    retryOn = "5xx,503"
    backoff = 10ms
  }

  client istio.circuit_breaker {
    http2MaxRequests in [1, 20]
    maxConnections = 4
  }

  client istio.outlier_detection {
    consecutive5xxErrors = 2
    interval = 1s
    baseEjectionTime = 30s
    maxEjectionPercent = 10
    minHealthPercent = 0
  }

  client istio.timeout {
    timeout = 1500ms
  }

  client istio.retry + circuit_breaker {
    retry.attempts = 2
    circuit_breaker.http2MaxRequests in [1, 20]
  }

  client istio.timeout + outlier_detection as guarded {
    timeout.timeout = 2s
    outlier_detection.consecutive5xxErrors = 3
  }

  client istio.retry + retry_budget as budgeted {
    retry.attempts = 3
    retry_budget.percent in [0%, 12.5%]
    retry_budget.minRetryConcurrency = 5
    retry_budget.budgetInterval = 10s
  }

  client tenacity.baseline {}
}
"""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    from typer.testing import CliRunner

    from rbl.cli import app
    work = tmp_path_factory.mktemp("istio")
    (work / "mesh.rbl").write_text(SPEC)
    done = CliRunner().invoke(app, ["compile", str(work / "mesh.rbl"), "--target", "istio", "-o", str(work / "out")],
                              catch_exceptions=False, env={"NO_COLOR": "1", "COLUMNS": "100"})
    assert done.exit_code == 0, done.stderr
    assert "skips client tenacity.baseline" in done.stderr
    return work / "out"


def _index(out: Path) -> list[dict]:
    return json.loads((out / "istio" / "index.json").read_text())["files"]


def _resources(out: Path, client: str, configuration: int = 0) -> tuple[dict, dict]:
    """(DestinationRule spec, the VirtualService's HTTP route) of one configuration's file."""
    entry = next(e for e in _index(out) if e["client"] == client and e["configuration"] == configuration)
    rule, service = yaml.safe_load_all((out / "istio" / entry["file"]).read_text())
    assert (rule["kind"], service["kind"]) == ("DestinationRule", "VirtualService")
    assert rule["apiVersion"] == service["apiVersion"] == "networking.istio.io/v1"
    (route,) = service["spec"]["http"]
    return rule["spec"], route


def test_every_written_file_is_valid_for_istio(compiled):
    files = sorted((compiled / "istio").glob("*/*.yaml"))
    # one file per configuration of every istio client: 1 + 2 + 2 + 1 + 1 + 2 + 1 + 2
    assert len(files) == len(_index(compiled)) == 12
    done = check_istio(*files)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(": ok") == len(files)


def test_the_index_maps_each_file_to_a_configuration_of_the_plan(compiled):
    plan = json.loads((compiled / "plan.json").read_text())
    expected = []
    for scenario in plan["scenarios"]:
        pair = (scenario["client"], scenario["config"])
        if scenario["library"] == "istio" and pair not in expected:
            expected.append(pair)
    assert [(e["client"], e["config"]) for e in _index(compiled)] == expected
    for entry in _index(compiled):
        text = (compiled / "istio" / entry["file"]).read_text()
        assert f'rbl.dev/parameters: {json.dumps(json.dumps(entry["config"], separators=(",", ":")))}' in text


def test_each_parameter_lands_in_its_istio_field(compiled):
    rule, route = _resources(compiled, "istio.circuit_breaker", 1)
    assert rule["trafficPolicy"] == {"connectionPool": {"tcp": {"maxConnections": 4}, "http": {"http2MaxRequests": 20}}}
    assert "retries" not in route                      # no retry policy: Istio's default retry applies
    rule, route = _resources(compiled, "istio.retry", 1)
    assert route["retries"] == {"attempts": 3, "perTryTimeout": "25ms", "retryOn": "5xx,503", "backoff": "10ms"}
    assert "trafficPolicy" not in rule
    _, route = _resources(compiled, "istio.timeout")
    assert route["timeout"] == "1500ms" and "retries" not in route
    rule, _ = _resources(compiled, "istio.outlier_detection")
    assert rule["trafficPolicy"]["outlierDetection"] == {
        "consecutive5xxErrors": 2, "interval": "1000ms", "baseEjectionTime": "30000ms", "maxEjectionPercent": 10,
        "minHealthPercent": 0}                         # consecutiveGatewayErrors was not set: left out


def test_baseline_switches_the_default_retry_off(compiled):
    rule, route = _resources(compiled, "istio.baseline")
    assert route["retries"] == {"attempts": 0} and "timeout" not in route and "trafficPolicy" not in rule
    # attempts 0 is written alone: Istio refuses perTryTimeout and retryOn beside it
    alone = {"retries": {"attempts": 0}}
    assert translate("retry", {"attempts": 0, "retryOn": "5xx", "perTryTimeout": 25}) == ({}, alone)
    assert translate("retry+timeout", {"retry.attempts": 0, "timeout.timeout": 9}) == (
        {}, {"retries": {"attempts": 0}, "timeout": "9ms"})


def test_a_composed_client_writes_every_policy(compiled):
    rule, route = _resources(compiled, "istio.retry+circuit_breaker", 1)
    assert rule["trafficPolicy"]["connectionPool"]["http"]["http2MaxRequests"] == 20
    assert route["retries"]["attempts"] == 2
    rule, route = _resources(compiled, "guarded")
    assert route["timeout"] == "2000ms" and "retries" not in route
    assert rule["trafficPolicy"]["outlierDetection"]["consecutive5xxErrors"] == 3
    rule, route = _resources(compiled, "budgeted", 1)
    assert rule["trafficPolicy"] == {"retryBudget": {"percent": 12.5, "minRetryConcurrency": 5,
                                                     "budgetInterval": "10000ms"}}
    assert route["retries"]["attempts"] == 3


def test_every_file_names_the_same_rules_for_the_service(compiled):
    for entry in _index(compiled):
        for resource in yaml.safe_load_all((compiled / "istio" / entry["file"]).read_text()):
            assert resource["metadata"]["name"] == "rbl-target"
            assert resource["metadata"]["namespace"] == "default"
            assert resource["metadata"]["annotations"]["rbl.dev/client"] == entry["client"]
    assert "kubectl apply -f istio/" in (compiled / "istio" / "README.md").read_text()


def _plant(compiled: Path, tmp_path: Path, change) -> Path:
    entry = next(e for e in _index(compiled) if e["client"] == "istio.retry+circuit_breaker")
    docs = list(yaml.safe_load_all((compiled / "istio" / entry["file"]).read_text()))
    change(*docs)
    path = tmp_path / "planted.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def _retries(service: dict) -> dict:
    return service["spec"]["http"][0]["retries"]


@pytest.mark.parametrize("change, reason", [
    (lambda rule, service: service["spec"]["http"][0].update(retry={"attempts": 2}), 'unknown field "retry"'),
    (lambda rule, service: rule["spec"]["trafficPolicy"]["connectionPool"]["http"].update(http2MaxRequest=2),
     'unknown field "http2MaxRequest"'),
    (lambda rule, service: rule["metadata"].update(label={"a": "b"}), 'unknown field "label"'),
    (lambda rule, service: _retries(service).update(perTryTimeout="0.5ms"), "duration must be greater than 1ms"),
    (lambda rule, service: _retries(service).update(attempts=-1), "attempts cannot be negative"),
    (lambda rule, service: _retries(service).update(retryOn="5xx,sometimes"), '"sometimes" is not a valid retryOn'),
    (lambda rule, service: rule["spec"]["trafficPolicy"].update(outlierDetection={"maxEjectionPercent": 101}),
     "percentage 101 is not in range 0..100"),
    (lambda rule, service: rule["spec"]["trafficPolicy"]["connectionPool"]["http"].update(maxRetries=-1),
     "max retries must be non-negative"),
    (lambda rule, service: rule.update(apiVersion="networking.istio.io/v2"), "is not networking.istio.io/v1"),
    (lambda rule, service: rule["metadata"].update(name="RBL_target"), "metadata.name"),
])
def test_the_validator_rejects_planted_mistakes(compiled, tmp_path, change, reason):
    assert check_istio(_plant(compiled, tmp_path, lambda *docs: None)).returncode == 0     # as written: valid
    done = check_istio(_plant(compiled, tmp_path, change))
    assert done.returncode == 1 and reason in done.stdout, done.stdout + done.stderr


def test_policies_of_splits_a_composed_configuration():
    assert policies_of("retry+circuit_breaker", {"retry.attempts": 2, "circuit_breaker.http2MaxRequests": 20}) == {
        "retry": {"attempts": 2}, "circuit_breaker": {"http2MaxRequests": 20}}
    assert policies_of("retry", {"attempts": 2}) == {"retry": {"attempts": 2}}
    assert policies_of("baseline", {}) == {}
    assert policies_of("timeout+retry", {"timeout.timeout": 5}) == {"timeout": {"timeout": 5}, "retry": {}}
    for pattern, config in (("retry+timeout", {"attempts": 2}), ("retry+timeout", {"breaker.x": 1}),
                            ("retry+retry", {}), ("retry+", {}), ("baseline", {"attempts": 1})):
        with pytest.raises(ValueError):
            policies_of(pattern, config)


def test_every_parameter_of_the_catalogue_has_its_istio_field():
    from rbl.targets.istio import ENVOY_ONLY, FIELDS
    from rbl.libraries.catalogue import builtin_libraries
    from rbl.libraries.istio import CONTROLLED
    patterns = builtin_libraries()["istio"].patterns
    # a controller is written as the static policy it holds in force (tests/test_controllers.py); a
    # policy Istio has no API for is refused, saying so
    left_out = ("baseline", *CONTROLLED, *ENVOY_ONLY)
    assert {name: set(p.params) for name, p in patterns.items() if name not in left_out} == {
        name: set(fields) for name, fields in FIELDS.items()}
    assert set(CONTROLLED) <= set(patterns) and set(ENVOY_ONLY) <= set(patterns)
    with pytest.raises(ValueError, match="Istio has no field for 'adaptive_concurrency'.*EnvoyFilter"):
        translate("adaptive_concurrency", {})


def test_translate_leaves_out_what_the_configuration_lacks():
    rule, route = translate("circuit_breaker", {"maxRetries": 3, "maxRequestsPerConnection": 1,
                                                "http1MaxPendingRequests": 0})
    assert rule == {"connectionPool": {"http": {"maxRetries": 3, "maxRequestsPerConnection": 1,
                                                "http1MaxPendingRequests": 0}}} and route == {}
    assert translate("circuit_breaker", {}) == ({}, {})      # an empty connectionPool is refused by Istio
    with pytest.raises(ValueError, match="no Istio field"):
        translate("retry", {"attempts": 1, "jitter": 5})
    with pytest.raises(ValueError, match="whole number of milliseconds"):
        translate("timeout", {"timeout": 1.5})


def _write(tmp_path: Path, body: str) -> Path:
    spec = tmp_path / "s.rbl"
    spec.write_text('space s {\n  users in [1]\n  fault.rate in [0%]\n  target = "/get"\n' + body + "\n}\n")
    return spec


def test_a_plan_without_an_istio_client_is_a_usage_error(cli, tmp_path):
    code, out, err = cli("compile", _write(tmp_path, "  client tenacity.baseline {}"), "--target", "istio",
                         "-o", tmp_path / "out")
    assert code == 2 and "no istio client" in err and "client istio.retry" in err
    assert not (tmp_path / "out").exists()


def test_istio_writes_a_directory_for_the_named_service(cli, tmp_path):
    spec = _write(tmp_path, "  client istio.timeout { timeout = 1s }")
    code, _, err = cli("compile", spec, "--target", "istio", "-o", "-")
    assert code == 2 and "writes a directory" in err
    code, _, err = cli("compile", spec, "--target", "istio", "--service", "Bad_Name", "-o", tmp_path / "x")
    assert code == 2 and "--service" in err and not (tmp_path / "x").exists()
    code, _, err = cli("compile", spec, "--service", "httpbin", "-o", tmp_path / "y")
    assert code == 2 and "--target istio" in err
    code, _, err = cli("compile", spec, "--target", "istio", "--service", "httpbin", "--namespace", "mesh",
                       "-o", tmp_path / "out")
    assert code == 0, err
    rule, service = yaml.safe_load_all((tmp_path / "out" / "istio" / "istio-timeout" / "0.yaml").read_text())
    assert rule["spec"]["host"] == "httpbin" and service["spec"]["hosts"] == ["httpbin"]
    assert rule["metadata"] == {**rule["metadata"], "name": "rbl-httpbin", "namespace": "mesh"}
    assert check_istio(tmp_path / "out" / "istio" / "istio-timeout" / "0.yaml").returncode == 0
    # a recompile with fewer clients removes the files it no longer writes
    code, _, err = cli("compile", _write(tmp_path, "  client istio.baseline {}"), "--target", "istio",
                       "-o", tmp_path / "out")
    assert code == 0 and "replaced the previous compile" in err
    assert sorted(p.relative_to(tmp_path / "out" / "istio").as_posix()
                  for p in (tmp_path / "out" / "istio").rglob("*") if p.is_file()) == [
        "README.md", "index.json", "istio-baseline/0.yaml"]


def test_a_link_where_the_istio_files_go_is_refused(cli, tmp_path):
    spec = _write(tmp_path, "  client istio.baseline {}")
    assert cli("compile", spec, "--target", "istio", "-o", tmp_path / "out")[0] == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    for path in sorted((tmp_path / "out" / "istio").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (tmp_path / "out" / "istio").rmdir()
    (tmp_path / "out" / "istio").symlink_to(outside)
    code, _, err = cli("compile", spec, "--target", "istio", "-o", tmp_path / "out")
    assert code == 2 and "symbolic link" in err and list(outside.iterdir()) == []


def test_a_policy_istio_has_no_field_for_is_skipped_with_a_note_or_refused_alone(cli, tmp_path):
    both = ("space s {\n  users = 2\n  client istio.adaptive_concurrency {}\n"
            "  client istio.admission_control + retry {}\n  client istio.retry { attempts = 1 }\n}\n")
    (tmp_path / "both.rbl").write_text(both)
    code, _, err = cli("compile", tmp_path / "both.rbl", "--target", "istio", "-o", tmp_path / "out")
    assert code == 0, err
    assert err.count("note: --target istio skips client") == 2 and "EnvoyFilter" in err
    assert [entry["client"] for entry in _index(tmp_path / "out")] == ["istio.retry"]
    (tmp_path / "alone.rbl").write_text("space s {\n  users = 2\n  client istio.adaptive_concurrency {}\n}\n")
    code, _, err = cli("compile", tmp_path / "alone.rbl", "--target", "istio", "-o", tmp_path / "out2")
    assert code == 2 and "Istio has no field for 'adaptive_concurrency'" in err
    assert "note:" not in err and not (tmp_path / "out2").exists()
