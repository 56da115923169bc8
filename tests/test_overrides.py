"""Command-line overrides (`--rounds`, `--users`, `--set`): applied before the checks, located in
their option when wrong, recorded in the plan, and a size assertion they break is a warning that
names them, not a spec error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rbl.compiler.overrides import from_options
from rbl.compiler.pipeline import compile_source
from rbl.compiler.plan import plan_header

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
QUICKSTART = EXAMPLES / "quickstart.rbl"


def compiled(text: str, rounds=None, users=None, sets=()):
    return compile_source(text, "spec.rbl", from_options(rounds, users, list(sets)))


def quickstart(**options):
    return compiled(QUICKSTART.read_text(), **options)


def test_rounds_and_users_override_the_spec_and_are_recorded_in_the_plan():
    result = quickstart(rounds=1, users="5")
    assert result.ok
    space = result.space
    assert (space.rounds, [u.v for u in space.users], space.size) == (1, [5], 10)
    assert plan_header(space)["source"]["overrides"] == ["--rounds 1", "--users 5"]


def test_a_size_assertion_broken_by_an_override_is_a_warning_naming_the_overrides():
    result = quickstart(users="5")
    assert result.ok
    (warning,) = [d for d in result.diagnostics if d.code == "W0303"]
    assert warning.severity == "warning"
    assert "command-line overrides" in warning.message and "size is 10" in warning.message
    assert not [d for d in result.diagnostics if d.code == "E0304"]


def test_an_override_that_keeps_the_size_leaves_a_wrong_assertion_an_error():
    text = QUICKSTART.read_text().replace("assert size == 2 * 2 * (1 + 2 + 2)", "assert size == 21")
    result = compiled(text, rounds=1)
    assert not result.ok
    assert [d.code for d in result.diagnostics if d.severity == "error"] == ["E0304"]


@pytest.mark.parametrize("setting,check", [
    ("fault.rate in [0%, 50%, 100%]", lambda s: [r.v for r in s.fault.rates] == [0, 50, 100]),
    ("successes=3", lambda s: s.successes == 3),
    ("users in 1..3", lambda s: [u.v for u in s.users] == [1, 2, 3]),
    ("tenacity.retry.multiplier in [20ms]", lambda s: s.clients[1].configurations == 1),
    ("pybreaker.circuit_breaker.fail_max = 5",
     lambda s: next(p for p in s.clients[2].params if p.name == "fail_max").values[0].v == 5),
])
def test_set_overrides_space_settings_and_client_parameters(setting, check):
    result = quickstart(sets=[setting])
    assert result.ok, result.diagnostics
    assert check(result.space)


COMPOSED = """space composed {
  users = 2
  client failsafe.retry + circuit_breaker as static_retry {
    retry.maxAttempts = 3
  }
  client istio.retry + circuit_breaker {
    retry.attempts = 2
    circuit_breaker.http2MaxRequests = 4
  }
  client istio.retry {
    attempts = 1
  }
}
"""


def _param(space, label: str, name: str) -> list:
    client = next(c for c in space.clients if c.label == label)
    return [v.v for v in next(p for p in client.params if p.name == name).values]


@pytest.mark.parametrize("setting, label, name, values", [
    # a composed client's pattern parameter, by its label or by library.pattern
    ("static_retry.retry.maxAttempts in [2, 4]", "static_retry", "retry.maxAttempts", [2, 4]),
    ("static_retry.circuit_breaker.failureThreshold = 7", "static_retry", "circuit_breaker.failureThreshold", [7]),
    ("istio.circuit_breaker.http2MaxRequests in [1, 20]", "istio.retry+circuit_breaker",
     "circuit_breaker.http2MaxRequests", [1, 20]),
])
def test_set_reaches_a_composed_client_s_parameters(setting, label, name, values):
    result = compiled(COMPOSED, sets=[setting])
    assert result.ok, [d.message for d in result.diagnostics]
    assert _param(result.space, label, name) == values


def test_library_pattern_names_every_client_with_that_pattern_composed_or_not():
    result = compiled(COMPOSED, sets=["istio.retry.attempts in [3, 5]"])
    assert result.ok, [d.message for d in result.diagnostics]
    assert _param(result.space, "istio.retry+circuit_breaker", "retry.attempts") == [3, 5]
    assert _param(result.space, "istio.retry", "attempts") == [3, 5]
    assert _param(result.space, "static_retry", "retry.maxAttempts") == [3]     # another library


def test_an_unknown_key_s_help_is_whole_and_suggests_the_closest_parameter():
    result = compiled(COMPOSED, sets=["static_retry.retyr.maxAttempts = 2"])
    (error,) = [d for d in result.diagnostics if d.severity == "error"]
    assert error.code == "E0209" and error.help.startswith("did you mean `static_retry.retry.maxAttempts`?")
    assert "more characters" not in error.help and error.help.endswith("load.*")
    assert "LABEL.pattern.param in a composed client" in error.help


def test_users_accepts_a_comma_list_and_a_range():
    assert [u.v for u in quickstart(users="1, 5").space.users] == [1, 5]
    assert [u.v for u in quickstart(users="2..4").space.users] == [2, 3, 4]


@pytest.mark.parametrize("setting,code,column", [
    ("users in [0]", "E0203", 11),          # type-checked like the spec: located in the option's text
    ("fault.rate in [0%, 150%]", "E0203", 20),
    ("rounds = fast", None, 10),
    ("successes in [1", "E0102", 14),
    ("nonsense = 3", "E0209", 1),
    ("resilience4j.retry.maxAttempts = 3", "E0209", 1),     # no such client in the quickstart
])
def test_a_bad_override_is_located_in_its_option(setting, code, column):
    result = quickstart(sets=[setting])
    assert not result.ok
    error = next(d for d in result.diagnostics if d.severity == "error")
    if code:
        assert error.code == code
    assert error.primary.span.file.name == "--set"
    assert error.primary.span.file.text == setting
    assert error.primary.span.line == 1 and error.primary.span.col == column


def test_a_use_client_cannot_have_native_parameters_overridden():
    result = compiled((EXAMPLES / "equivalent-retry.rbl").read_text(),
                      sets=["resilience4j.retry.maxAttempts = 3"])
    assert not result.ok
    assert any(d.code == "E0503" and "`use`" in d.message for d in result.diagnostics)


def test_cli_run_of_a_compiled_plan_refuses_overrides(cli, tmp_path):
    code, _, _ = cli("compile", QUICKSTART, "-o", tmp_path / "c")
    assert code == 0
    code, _, err = cli("run", tmp_path / "c" / "plan.json", "--rounds", "1")
    assert code == 2
    assert "apply to a spec (.rbl)" in err


def test_cli_check_and_plan_show_the_overrides(cli):
    code, out, err = cli("check", QUICKSTART, "--rounds", "1", "--users", "5")
    assert code == 0
    assert "warning[W0303]" in err and "--> " in err
    assert "ok: quickstart: 10 scenarios x 1 round = 10 runs" in out
    code, out, _ = cli("plan", QUICKSTART, "--set", "fault.rate in [0%]", "--json")
    assert code == 0
    assert json.loads(out)["overrides"] == ["--set fault.rate in [0%]"]
    code, out, _ = cli("plan", QUICKSTART, "--users", "5")
    assert "overrides: --users 5" in out and "Size(S) = 2 x 1 x 5 = 10 scenarios" in out


def test_cli_bad_override_is_exit_1_with_its_location(cli):
    code, _, err = cli("check", QUICKSTART, "--set", "users in [0]")
    assert code == 1
    assert "--> --set:1:11" in err and "users in [0]" in err
    assert "Traceback" not in err


def test_compiled_plan_with_overrides_matches_the_schema(cli, tmp_path):
    import jsonschema
    code, _, _ = cli("compile", QUICKSTART, "-o", tmp_path / "c", "--users", "5", "--rounds", "1")
    assert code == 0
    plan = json.loads((tmp_path / "c" / "plan.json").read_text())
    schema = json.loads((Path(__file__).resolve().parent.parent / "rbl" / "schemas" / "plan-v1.schema.json").read_text())
    jsonschema.validate(plan, schema)
    assert plan["source"]["overrides"] == ["--rounds 1", "--users 5"] and plan["size"] == 10


def test_recorded_overrides_stay_valid_plan_strings(cli, tmp_path):
    import jsonschema
    code, _, err = cli("compile", QUICKSTART, "-o", tmp_path / "c", "--set", "successes\t= 3",
                       "--set", "max_requests =" + " " * 5000 + "50")
    assert code == 0, err
    plan = json.loads((tmp_path / "c" / "plan.json").read_text())
    schema = json.loads((Path(__file__).resolve().parent.parent / "rbl" / "schemas" / "plan-v1.schema.json").read_text())
    jsonschema.validate(plan, schema)
    assert plan["source"]["overrides"][0] == "--set successes\\t= 3"
    assert len(plan["source"]["overrides"][1]) <= 4000


def test_the_longest_parameter_list_in_the_catalogue_is_given_whole():
    """A composed client of every resilience4j pattern has the catalogue's longest parameter list: an
    unknown parameter's help lists all of it, not cut mid-list."""
    spec = ("space whole {\n  client resilience4j.retry + circuit_breaker + timeout + bulkhead + rate_limiter + "
            "fallback {\n    retry.bogus = 1\n  }\n}\n")
    result = compile_source(spec, "whole.rbl")
    (error,) = [d for d in result.diagnostics if d.code == "E0206"]
    assert "more characters" not in error.help and error.help.rstrip().endswith(tuple("abcdefghijklmnopqrstuvwxyz"))
    assert len(error.help) > 800 and error.help.endswith("rate_limiter.timeoutDuration")


def test_an_override_of_a_load_axis_makes_a_broken_size_assertion_a_warning():
    spec = ("space loads {\n  load = open\n  load.capacity = 50\n  load.rate in [80%, 120%]\n"
            "  client istio.circuit_breaker { http2MaxRequests = 4 }\n  assert size == 2\n}\n")
    result = compiled(spec, sets=["load.rate in [50%, 80%, 120%]"])
    assert result.ok and result.space.size == 3
    (warning,) = [d for d in result.diagnostics if d.code == "W0303"]
    assert "size is 3" in warning.message
