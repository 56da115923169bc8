"""`rbl run PLAN` checks the whole plan (rbl/store/plan_file.py, the plan schema) before anything
is created or started (issue 15): every compiled example passes, every tampered plan is a usage
error (exit 2) with a clear message, never a run elsewhere or a traceback."""

from __future__ import annotations

import copy
import json
import os
import types
from pathlib import Path

import jsonschema
import pytest

from rbl.errors import UsageError
from rbl.store.plan_file import _shape_problem, load_plan_file, plan_schema

from .conftest import EXAMPLES

EXAMPLE_NAMES = sorted(p.name for p in EXAMPLES.glob("*.rbl"))


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """Each example compiled as JSON and as JSON Lines (once for the module)."""
    from typer.testing import CliRunner

    from rbl.cli import app
    root = tmp_path_factory.mktemp("plans")
    plans = {}
    for name in EXAMPLE_NAMES:
        for fmt in ("json", "jsonl"):
            out = root / f"{name}-{fmt}"
            # a topology has no compose deployment: its plan comes with its Istio policies
            target = ["--target", "istio"] if "topology {" in (EXAMPLES / name).read_text() else []
            result = CliRunner().invoke(app, ["compile", str(EXAMPLES / name), "-o", str(out), "--format", fmt, *target])
            assert result.exit_code == 0, result.stderr
            plans[name, fmt] = out
    return plans


@pytest.fixture
def plan(compiled, tmp_path):
    """A writable copy of the quickstart's plan: (header, scenarios, save(format))."""
    source = compiled["quickstart.rbl", "json"] / "plan.json"
    document = json.loads(source.read_text())
    scenarios = document.pop("scenarios")

    def save(fmt: str = "jsonl", lines: list[str] | None = None) -> Path:
        out = tmp_path / "plan"
        out.mkdir(exist_ok=True)
        if fmt == "json":
            (out / "plan.json").write_text(json.dumps({**document, "scenarios": scenarios}))
        else:
            (out / "plan.json").write_text(json.dumps({**document, "scenarios_file": "scenarios.jsonl"}))
            lines = lines if lines is not None else [json.dumps(s) for s in scenarios]
            (out / "scenarios.jsonl").write_text("".join(line + "\n" for line in lines))
        return out / "plan.json"

    return types.SimpleNamespace(header=document, scenarios=scenarios, save=save)


def refused(path: Path, *words: str) -> str:
    with pytest.raises(UsageError) as caught:
        _, lines = load_plan_file(path)
        list(lines)
    message = caught.value.message
    assert caught.value.exit_code == 2 and caught.value.hint
    for word in words:
        assert word in message, message
    return message


# -- every plan rbl compiles is valid -------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["json", "jsonl"])
@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_every_compiled_example_is_a_valid_plan(compiled, name, fmt):
    out = compiled[name, fmt]
    header, lines = load_plan_file(out)
    lines = list(lines)
    assert len(lines) == header["size"]
    document = json.loads((out / "plan.json").read_text())
    jsonschema.validate(document, plan_schema())
    for line in lines:
        assert _shape_problem(json.loads(line)) is None
        jsonschema.validate(json.loads(line), plan_schema()["$defs"]["scenario"])   # the same rule, both ways


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_the_docker_backend_accepts_every_checked_plan(compiled, name):
    from rbl.targets.compose.artifacts import plan_deployment
    header, _ = load_plan_file(compiled[name, "jsonl"])
    deployment, _ = plan_deployment(header, [])
    assert deployment.project.startswith("rbl-")


# -- the reproducers ----------------------------------------------------------------------------
def test_an_absolute_name_creates_nothing_elsewhere(cli, plan, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    elsewhere = tmp_path / "x" / "ABS"
    plan.header["name"] = str(elsewhere)
    code, _, err = cli("run", plan.save())
    assert code == 2 and "name" in err and "single path component" in err and "Traceback" not in err
    assert not (tmp_path / "x").exists() and not (tmp_path / "runs").exists()


def test_a_target_path_naming_another_host_is_refused_before_anything_starts(cli, plan, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan.header["target"]["path"] = "@127.0.0.2:47200/pwned"
    for fmt in ("json", "jsonl"):
        code, _, err = cli("run", plan.save(fmt))
        assert code == 2 and "target.path" in err and "URL path" in err, err
    assert not (tmp_path / "runs").exists()


def test_the_docker_backend_checks_the_plan_before_connecting(cli, plan, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    import rbl.backends.docker.driver as docker_backend
    monkeypatch.setattr(docker_backend, "connect", lambda: pytest.fail("connected to Docker"))
    plan.header["target"]["path"] = "@127.0.0.2:47200/pwned"
    code, _, err = cli("run", plan.save(), "--backend", "docker")
    assert code == 2 and "target.path" in err


# -- the header's siblings ------------------------------------------------------------------------
BAD_HEADERS = {
    "name": ["..", ".", "a/b", "a\\b", "", "x\x00y", "x\n", "runs/../../x", "x" * 201],
    "target.path": ["//evil.example/x", "/a b", "/a\\b", "/bytes/1\n", "http://x/", "/a@b", "/%zz", "", "bytes",
                    "/a\x00", "/a#frag", "/" + "a" * 3000, "/\u00e9"],
    "rounds": [0, -1, 2**31, 2**63, True, 1.5, "3", None],
    "successes": [0, 2**31], "max_requests": [0, 2**40],
    "users": [[0], [2**31], [], ["5"], {"from": 1, "to": 5}],
    "fault.status": [99999, 0, 99, "503"],
    "fault.kind": ["x", None],
    "fault.rates": [[101], [-1], [True]],
    "source.sha256": ["0" * 63, "g" * 64],
    "clients.0.library": ["../x", "a/b", "a b", "x\x01"],
    "clients.0.label": ["a/b", "../x", ""],
    "clients.0.service": ["x\x01", "x" * 300],
    "clients.0.parameters": [{"../x": {"value": 1}}, {"a": {"value": {"nested": 1}}}, {"a": {"value": "x\x7f"}}],
    "rbl_version": ["0.1\n"],
    "bogus": [1],
}


def _set(document: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        document = document[int(part)] if isinstance(document, list) else document[part]
    document[last] = value


@pytest.mark.parametrize("field,value", [(f, v) for f, values in BAD_HEADERS.items() for v in values],
                         ids=lambda v: repr(v)[:30])
def test_a_header_the_schema_forbids_is_refused(plan, field, value):
    _set(plan.header, field, value)
    message = refused(plan.save(), "is not a valid rbl plan")
    assert "\x00" not in message and "\n" not in message


@pytest.mark.parametrize("change,words", [
    (lambda h: h.update(size=h["size"] + 1), ["size"]),
    (lambda h: h.update(runs=h["runs"] * 2), ["runs"]),
    (lambda h: h["breakdown"].update(users=9), ["breakdown"]),
    (lambda h: h["breakdown"]["clients"].pop(), ["breakdown.clients"]),
    (lambda h: h["clients"].append(copy.deepcopy(h["clients"][0])), ["used twice"]),
    (lambda h: h["clients"][1].update(service="resilience4j"), ["two client services"]),
    (lambda h: h["fault"].update(kind="delay"), ["duration_ms"]),
])
def test_a_header_that_contradicts_itself_is_refused(plan, change, words):
    change(plan.header)
    refused(plan.save(), *words)


@pytest.mark.parametrize("text,words", [
    ('{"rbl_plan": 1, "rounds": NaN}', ["NaN"]),
    ('{"rbl_plan": 1, "rounds": Infinity}', ["Infinity"]),
    ('{"rbl_plan": 1, "rounds": ' + "9" * 5000 + "}", ["cannot read"]),
    ("[" * 100_000 + "]" * 100_000, ["cannot read"]),
    ("{\"rbl_plan\": 1, \"name\": \"\udcff\"}", ["cannot read"]),
    ('{"rbl_plan": true}', ["not an rbl plan"]),
    ("[]", ["not an rbl plan"]),
])
def test_a_plan_that_is_not_valid_json_is_a_usage_error(tmp_path, text, words):
    path = tmp_path / "plan.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    refused(path, *words)


def test_a_plan_rbl_compile_writes_as_1e999_is_refused(plan):
    plan.header["fault"]["rates"] = [0, 50]
    path = plan.save()
    path.write_text(path.read_text().replace('"rates": [0, 50]', '"rates": [0, 1e999]'))
    refused(path, "fault.rates")


def test_a_fifo_in_place_of_the_plan_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "plan.json")
    refused(tmp_path, "not a file")


def test_both_scenario_forms_or_a_csv_plan_are_refused(plan, compiled, tmp_path):
    path = plan.save()
    document = json.loads(path.read_text())
    path.write_text(json.dumps({**document, "scenarios": plan.scenarios}))
    refused(path, "both")
    code_csv = tmp_path / "csv"
    from typer.testing import CliRunner

    from rbl.cli import app
    assert CliRunner().invoke(app, ["compile", str(EXAMPLES / "quickstart.rbl"), "-o", str(code_csv),
                                    "--format", "csv"]).exit_code == 0
    refused(code_csv, "JSON Lines")


# -- the scenarios' siblings ----------------------------------------------------------------------
def _mutate(position: int, **changes):
    def apply(scenarios: list[dict]) -> list[str]:
        scenarios = copy.deepcopy(scenarios)
        scenarios[position].update(changes)
        return [json.dumps(s) for s in scenarios]
    return apply


SCENARIO_CASES = {
    "unknown client": (_mutate(3, client="nope.retry"), ["not one of the plan's clients"]),
    "client of another library": (_mutate(1, library="pybreaker"), ["not one of the plan's clients"]),
    "index gap": (_mutate(5, index=6), ["index 6"]),
    "fault rate not in the plan": (_mutate(2, fault={"kind": "abort", "rate": 30, "status": 503}), ["fault"]),
    "fault status changed": (_mutate(2, fault={"kind": "abort", "rate": 0, "status": 500}), ["fault"]),
    "users not in the plan": (_mutate(1, users=7), ["users 7"]),
    "successes changed": (_mutate(1, successes=1), ["successes"]),
    "control character in config": (_mutate(2, config={"stop_after_attempt": "4\x1b[2J"}), ["config"]),
    "nested config": (_mutate(2, config={"stop_after_attempt": {"a": 1}}), ["config"]),
    "config key not a name": (_mutate(2, config={"../x": 1}), ["config"]),
    "bad id": (_mutate(0, id="../../etc"), ["id"]),
    "boolean users": (_mutate(0, users=True), ["users"]),
    "huge users": (_mutate(0, users=10**12), ["users"]),
    "extra key": (_mutate(0, target="@evil"), ["target"]),
    "one missing": (lambda s: [json.dumps(x) for x in s[:-1]], ["19 scenarios", "size is 20"]),
    "one extra": (lambda s: [json.dumps(x) for x in s] + [json.dumps({**s[0], "index": 20})], ["21 scenarios"]),
    "not objects": (lambda s: ["[]", "42", "{}"], ["not"]),
    "NaN": (lambda s: [json.dumps(s[0]).replace('"rate": 0', '"rate": NaN')], ["NaN"]),
    "torn line": (lambda s: [json.dumps(x) for x in s][:-1] + [json.dumps(s[-1])[:40]], [":20:"]),
}


# a torn line exists only in a JSON Lines file; every other case is tried in both formats
TAMPERED = [(case, fmt) for fmt in ("json", "jsonl") for case in SCENARIO_CASES
            if not (fmt == "json" and case == "torn line")]


@pytest.mark.parametrize("case,fmt", TAMPERED, ids=lambda value: str(value))
def test_a_tampered_scenario_is_refused_with_its_place(plan, case, fmt):
    build, words = SCENARIO_CASES[case]
    lines = build(plan.scenarios)
    if fmt == "json":
        plan.scenarios[:] = [json.loads(line) for line in lines]
        refused(plan.save("json"))
    else:
        path = plan.save("jsonl", lines)
        message = refused(path, *words)
        assert "scenarios.jsonl" in message


def test_a_scenario_line_that_is_not_utf8_or_too_long_is_refused(plan):
    lines = [json.dumps(s) for s in plan.scenarios]
    path = plan.save("jsonl", lines)
    (path.parent / "scenarios.jsonl").write_bytes(b"\n".join(line.encode() for line in lines[:3]) + b"\n\xff\xfe\n")
    refused(path, "scenarios.jsonl:4")
    (path.parent / "scenarios.jsonl").write_bytes(b'{"id": "' + b"a" * (2 << 20) + b'"}\n')
    refused(path, "longer than")


def test_a_scenario_file_changed_after_the_check_is_checked_again(plan):
    path = plan.save("jsonl")
    _, lines = load_plan_file(path)
    scenarios = path.parent / "scenarios.jsonl"
    text = scenarios.read_text().replace('"tenacity.retry"', '"evil.retry"', 1)
    scenarios.write_text(text)
    with pytest.raises(UsageError, match="not one of the plan's clients"):
        list(lines)


def test_scenarios_are_streamed_not_loaded(plan):
    path = plan.save("jsonl")
    _, lines = load_plan_file(path)
    assert iter(lines) is lines                        # a generator, read as the run directory copies it


@pytest.mark.parametrize("case", [c for c in SCENARIO_CASES if not c.startswith(("one ", "torn", "NaN", "index"))
                                  and "plan" not in c and "changed" not in c and "client" not in c])
def test_the_fast_scenario_check_is_as_strict_as_the_schema(plan, case):
    build, _ = SCENARIO_CASES[case]
    validator = jsonschema.Draft202012Validator(plan_schema()["$defs"]["scenario"])
    for line in build(plan.scenarios):
        scenario = json.loads(line)
        assert (_shape_problem(scenario) is None) == validator.is_valid(scenario), line


# -- resuming ------------------------------------------------------------------------------------
def test_resume_refuses_a_run_directory_whose_plan_was_tampered_with(cli, plan, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "logs").mkdir()
    plan.header["target"]["path"] = "@127.0.0.2:47200/pwned"
    (run / "plan.json").write_text(json.dumps({**plan.header, "scenarios_file": "scenarios.jsonl"}))
    (run / "scenarios.jsonl").write_text("".join(json.dumps(s) + "\n" for s in plan.scenarios))
    (run / "results.jsonl").write_text("")
    code, _, err = cli("run", "--resume", run)
    assert code == 2 and "target.path" in err and "Traceback" not in err, err
