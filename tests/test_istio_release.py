"""`istio.version`: the Istio release whose defaults the istio clients follow. Before 1.24 Istio's
default retry (and a `retries` without retryOn) also retried a 503 answer; the compiler writes that
into the plan, the sidecars and `rbl compile --target istio` run it, and a real Envoy retries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rbl.compiler.expand import iter_scenarios
from rbl.compiler.pipeline import compile_source
from rbl.compiler.plan import plan_header
from rbl.libraries.istio import DEFAULT_RETRY_ON, OLD_DEFAULT_RETRY_ON, default_retry_on, parse_release
from rbl.mesh.sidecar_config import route_configuration, route_for
from rbl.mesh.topology_sidecars import caller_resources
from rbl.targets.istio import translate

from .conftest import run_rbl


def _space(version: str | None, clients: str, settings: str = "") -> str:
    release = f'  istio.version = "{version}"\n' if version else ""
    return f"space papers {{\n  users = 2\n{settings}{release}{clients}}}\n"


CLIENTS = """  client istio.retry { attempts = 2 }
  client istio.retry {
    attempts = 3
    retryOn = "5xx"
  }
  client istio.circuit_breaker { http2MaxRequests = 20 }
  client istio.retry + timeout {
    retry.attempts = 3
    timeout.timeout = 1s
  }
  client istio.baseline {}
"""


def _configs(text: str) -> list[dict]:
    result = compile_source(text)
    assert result.ok, [d.message for d in result.diagnostics]
    return [scenario["config"] for scenario in iter_scenarios(result.space)]


@pytest.mark.parametrize("text, expected", [("1.14", (1, 14)), ("1.8.1", (1, 8)), ("1.30", (1, 30)),
                                            ("1.014", None), ("2.0", None), ("1.", None), ("1.1x", None),
                                            ("1.²", None), ("1.14.6.1", None), (" 1.14", None)])
def test_a_release_is_one_minor_and_perhaps_a_patch(text, expected):
    assert parse_release(text) == expected


def test_the_default_retry_retried_a_503_until_1_24():
    assert [default_retry_on(r) for r in ("1.8.1", "1.14", "1.23.6")] == [OLD_DEFAULT_RETRY_ON] * 3
    assert [default_retry_on(r) for r in ("1.24", "1.26.8", "1.31", None)] == [DEFAULT_RETRY_ON] * 4


def test_an_old_release_writes_its_default_conditions_into_every_retry_that_leaves_them_out():
    old, today = _configs(_space("1.14", CLIENTS)), _configs(_space(None, CLIENTS))
    assert old[0] == {"attempts": 2, "retryOn": OLD_DEFAULT_RETRY_ON}
    assert old[1] == today[1] == {"attempts": 3, "retryOn": "5xx"}        # written by the user: as written
    assert old[2] == today[2] == {"http2MaxRequests": 20}                 # no retry policy: the sidecar's default
    assert old[3] == {"retry.attempts": 3, "timeout.timeout": 1000, "retry.retryOn": OLD_DEFAULT_RETRY_ON}
    assert old[4] == today[4] == {}
    assert today[0] == {"attempts": 2} and "retry.retryOn" not in today[3]
    assert _configs(_space("1.24", CLIENTS)) == today


def test_the_plan_header_records_the_release():
    space = compile_source(_space("1.11.2", CLIENTS)).space
    assert plan_header(space)["istio"] == {"version": "1.11.2"}
    assert "istio" not in plan_header(compile_source(_space(None, CLIENTS)).space)


def test_the_sidecar_runs_the_release_s_default_retry_where_no_retry_is_given():
    old = route_for({"circuit_breaker": {"http2MaxRequests": 20}}, "upstream", release="1.14")["retry_policy"]
    today = route_for({"circuit_breaker": {"http2MaxRequests": 20}}, "upstream")["retry_policy"]
    assert old["retriable_status_codes"] == [503] and old["num_retries"] == 2
    assert "retriable_status_codes" not in today
    assert "retry_policy" not in route_for({}, "upstream", baseline=True, release="1.14")
    route = route_configuration("timeout", {"timeout": 100}, "1.8")["virtual_hosts"][0]["routes"][0]["route"]
    assert route["retry_policy"]["retriable_status_codes"] == [503]
    topology_route, _ = caller_resources({}, {"cart": [("127.0.0.1", 1)]}, release="1.14")
    assert topology_route["virtual_hosts"][0]["routes"][0]["route"]["retry_policy"]["retriable_status_codes"] == [503]


def test_the_istio_resources_write_the_old_default_retry_out():
    _, route = translate("circuit_breaker", {"http2MaxRequests": 20}, "1.14")
    assert route["retries"] == {"attempts": 2, "retryOn": OLD_DEFAULT_RETRY_ON}
    assert translate("circuit_breaker", {"http2MaxRequests": 20})[1] == {}
    assert translate("baseline", {}, "1.14")[1] == {"retries": {"attempts": 0}}
    assert translate("retry", {"attempts": 0}, "1.14")[1] == {"retries": {"attempts": 0}}


@pytest.mark.parametrize("settings, clients, code, message", [
    ('  istio.version = "1.7"\n', CLIENTS, "E0229", "1.8 or later"),
    ('  istio.version = "one.fourteen"\n', CLIENTS, "E0229", "must be an Istio release"),
    ("  istio.version = 1.14\n", CLIENTS, "E0202", "expects a string"),
    ('  istio.version = "1.14"\n', "  client tenacity.retry { stop_after_attempt = 2 }\n", "E0219",
     "applies to istio clients"),
    ('  istio.version = "1.25"\n', "  client istio.retry {\n    backoff = 25ms\n  }\n", "E0229", "has no"),
    ('  istio.version = "1.14"\n  istio.version = "1.20"\n', CLIENTS, "E0208", "set twice"),
])
def test_a_wrong_release_is_a_located_error(settings, clients, code, message):
    result = compile_source(f"space papers {{\n  users = 2\n{settings}{clients}}}\n")
    errors = [d for d in result.diagnostics if d.severity == "error"]
    assert [d.code for d in errors] == [code], [d.message for d in errors]
    assert message is None or message in errors[0].message
    assert errors[0].primary is not None


def test_a_field_of_a_newer_release_is_accepted_from_that_release():
    configs = _configs(_space("1.26", "  client istio.retry {\n    backoff = 25ms\n  }\n"))
    assert configs == [{"attempts": 2, "backoff": 25}]


SPEC = """
space istio_1_14 {
  users = 2
  successes = 6
  max_requests = 60
  target = "/bytes/64"
  fault.rate = 50%
  istio.version = "1.14"
  client istio.retry { attempts = 2 }
  client istio.circuit_breaker { http2MaxRequests = 100 }
}
"""


def _rows(tmp_path: Path, out: str, *args: str) -> list[dict]:
    done = run_rbl("run", "spec.rbl", "-o", out, *args, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in (tmp_path / out / "results.jsonl").read_text().splitlines()]


def test_a_real_sidecar_of_istio_1_14_retries_the_503s_today_s_leaves_alone(tmp_path: Path):
    (tmp_path / "spec.rbl").write_text(SPEC)
    old, today = _rows(tmp_path, "old"), _rows(tmp_path, "today", "--set", 'istio.version="1.24"')
    assert {r["client"] for r in old} == {"istio.retry", "istio.circuit_breaker"}
    # at 50% aborts each of 2 users meets 503s within its first requests: retried before 1.24, not since
    for client in ("istio.retry", "istio.circuit_breaker"):
        assert sum(r["sidecarRetries"] for r in old if r["client"] == client) > 0, client
    assert sum(r["sidecarRetries"] for r in today) == 0
    assert not any(r["oracleViolations"] for r in old + today)
    assert json.loads((tmp_path / "old" / "plan.json").read_text())["istio"] == {"version": "1.14"}


def test_plan_says_whose_defaults_the_istio_clients_follow(tmp_path: Path):
    (tmp_path / "spec.rbl").write_text(SPEC)
    done = run_rbl("plan", "spec.rbl", cwd=tmp_path, timeout=60)
    assert done.returncode == 0 and "follow Istio 1.14's defaults" in done.stdout, done.stdout + done.stderr
