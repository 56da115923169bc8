"""The CLI: exit codes, stdout vs stderr, overwrite protection, formats, the plan schema."""

from __future__ import annotations

import csv
import io
import json
import re
from importlib import resources

import jsonschema
import pytest

from rbl.lang.codes import CODES

from .conftest import EXAMPLES, REPO, run_rbl

QUICKSTART = EXAMPLES / "quickstart.rbl"


def schema():
    return json.loads(resources.files("rbl").joinpath("schemas/plan-v1.schema.json").read_text())


def test_check_ok(cli):
    code, out, err = cli("check", QUICKSTART)
    assert code == 0 and err == ""                      # the verdict is the command's output
    assert out.startswith("ok: quickstart: 20 scenarios")


def test_check_json_reports_diagnostics(cli):
    code, out, _ = cli("check", "--json", REPO / "tests/errors/type-out-of-range.rbl")
    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False
    assert report["diagnostics"][0]["code"] == "E0203"
    assert report["diagnostics"][0]["line"] == 4


def test_missing_file_is_a_usage_error(cli, tmp_path):
    code, out, err = cli("check", tmp_path / "nope.rbl")
    assert code == 2 and out == "" and "no such file" in err


def test_unknown_subcommand_is_a_usage_error(cli):
    code, _, _ = cli("frobnicate")
    assert code == 2


def test_plan_json(cli):
    code, out, _ = cli("plan", "--json", EXAMPLES / "ccpe-listing4.rbl")
    assert code == 0
    data = json.loads(out)
    assert data["size"] == 210 and data["runs"] == 2100
    assert data["breakdown"]["faults"] == 5 and data["breakdown"]["users"] == 3
    assert [c["configurations"] for c in data["breakdown"]["clients"]] == [1, 3, 3, 1, 3, 3]


def test_plan_of_a_huge_space_is_instant(cli, tmp_path):
    spec = tmp_path / "huge.rbl"
    spec.write_text("space huge {\n users in 1..1000000\n fault.rate in 0%..100% step 0.01%\n"
                    " client tenacity.retry { stop_after_attempt in 1..1000000 }\n}\n")
    code, out, _ = cli("plan", spec)
    assert code == 0
    assert "Size(S) = 10001 x 1000000 x 1000000 = 10001000000000000 scenarios" in out


@pytest.mark.parametrize("name,size", [("ccpe-listing4.rbl", 210), ("equivalent-retry.rbl", 12)])
def test_compile_writes_a_plan_that_matches_the_schema(cli, tmp_path, name, size):
    code, _, err = cli("compile", EXAMPLES / name, "-o", tmp_path)
    assert code == 0, err
    plan = json.loads((tmp_path / "plan.json").read_text())
    jsonschema.validate(plan, schema())
    assert plan["size"] == size and len(plan["scenarios"]) == size


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_compile_formats(cli, tmp_path, fmt):
    code, _, err = cli("compile", EXAMPLES / "ccpe-listing3.rbl", "-o", tmp_path, "--format", fmt)
    assert code == 0, err
    plan = json.loads((tmp_path / "plan.json").read_text())
    jsonschema.validate(plan, schema())
    listing = (tmp_path / plan["scenarios_file"]).read_text()
    if fmt == "jsonl":
        rows = [json.loads(line) for line in listing.splitlines()]
        for row in rows:
            jsonschema.validate(row, schema()["$defs"]["scenario"])
    else:
        rows = list(csv.DictReader(io.StringIO(listing)))
        assert rows[0]["initialIntervalMillis"] == "20" and rows[0]["durationOfBreaking"] == ""
    assert len(rows) == 90


def test_compile_replaces_its_own_output_and_says_so(cli, tmp_path):
    assert cli("compile", QUICKSTART, "-o", tmp_path)[0] == 0
    code, _, err = cli("compile", EXAMPLES / "ccpe-listing4.rbl", "-o", tmp_path)
    assert code == 0 and "replaced the previous compile of" in err and "quickstart.rbl" in err
    assert json.loads((tmp_path / "plan.json").read_text())["size"] == 210


def test_compile_refuses_a_plan_it_did_not_write(cli, tmp_path):
    (tmp_path / "plan.json").write_text("{}")
    code, _, err = cli("compile", EXAMPLES / "ccpe-listing4.rbl", "-o", tmp_path)
    assert code == 2 and "not written by `rbl compile`" in err and "--force" in err
    assert (tmp_path / "plan.json").read_text() == "{}"
    assert cli("compile", EXAMPLES / "ccpe-listing4.rbl", "-o", tmp_path, "--force")[0] == 0
    assert json.loads((tmp_path / "plan.json").read_text())["size"] == 210


def test_compile_rejects_unknown_format(cli, tmp_path):
    code, _, err = cli("compile", QUICKSTART, "-o", tmp_path, "--format", "xml")
    assert code == 2 and "unknown format" in err


def test_compile_to_stdout_streams_jsonl(cli):
    code, out, _ = cli("compile", QUICKSTART, "-o", "-", "--format", "jsonl")
    assert code == 0
    assert len(out.splitlines()) == 20


def test_compile_with_errors_writes_nothing(cli, tmp_path):
    code, _, _ = cli("compile", REPO / "tests/errors/type-out-of-range.rbl", "-o", tmp_path / "out")
    assert code == 1 and not (tmp_path / "out").exists()


def test_explain(cli):
    code, out, _ = cli("explain", "e0203")
    assert code == 0 and out.startswith("E0203: value out of range")
    code, _, err = cli("explain", "E9999")
    assert code == 2 and "unknown code" in err


def test_every_code_in_the_source_is_registered():
    used = set()
    for path in (REPO / "rbl").rglob("*.py"):
        used |= set(re.findall(r'"([EW]\d{4})"', path.read_text()))
    assert used, "found no codes"
    assert used <= set(CODES), used - set(CODES)


def test_spec_from_stdin(cli):
    code, _, err = cli("check", "-", input=QUICKSTART.read_text())
    assert code == 0, err


def test_version(cli):
    code, out, _ = cli("--version")
    assert code == 0 and out.startswith("rbl ")


def test_warnings_do_not_fail_check(cli, tmp_path):
    spec = tmp_path / "w.rbl"
    spec.write_text("space w {\n users in [1, 1]\n fault.rate in 0%..90% step 20%\n client tenacity.baseline {}\n}\n")
    code, _, err = cli("check", spec)
    assert code == 0
    assert "warning[W0301]" in err and "warning[W0302]" in err


def test_user_declared_library(cli, tmp_path):
    spec = tmp_path / "lib.rbl"
    spec.write_text('library gofail {\n platform = "go"\n pattern retry {\n  attempts: int & >= 1 = 3\n'
                    '  backoff: duration & >= 0ms = 10ms as ms\n }\n}\n'
                    'space s {\n users in [1]\n client gofail.retry { attempts in [2, 3] }\n assert size == 2\n}\n')
    code, out, err = cli("compile", spec, "-o", "-", "--format", "jsonl")
    assert code == 0, err
    first = json.loads(out.splitlines()[0])
    assert first["library"] == "gofail" and first["config"] == {"attempts": 2, "backoff": 10}


def _readme_command(marker: str) -> str:
    readme = (REPO / "README.md").read_text()
    block = readme.split(f"<!-- {marker} -->")[1].split(f"<!-- /{marker} -->")[0]
    (command,) = [line for line in block.splitlines() if line and not line.startswith("```")]
    return command


def test_readme_commands_are_real():
    """.ci/run runs both on a fresh clone; here, that they are the newcomer's whole set-up."""
    run, test = _readme_command("run-command"), _readme_command("test-command")
    assert run.startswith("python3 -m venv .venv && . .venv/bin/activate && ")
    assert "pip install -e '.[envoy]'" in run and run.endswith("rbl run examples/quickstart.rbl")
    assert test.startswith(". .venv/bin/activate && ") and "pip install -e '.[test]'" in test
    assert test.endswith("python3 -m pytest -q")
    assert (REPO / "examples" / "quickstart.rbl").is_file()
    assert "$(readme_command run-command)" in (REPO / ".ci" / "run").read_text()


DURATION_CLAIM = re.compile(r"\b(?:in|takes) (?:well )?(?:about |under |a )?(?:a|an|one|two|three|few|[0-9.]+) "
                            r"(?:s|min|minutes?|hours?)\b", re.I)


def test_each_example_has_one_duration_the_plan_s():
    """No example states a time of its own beside `rbl plan`'s estimate; the quickstart's, which
    its comment and the README repeat, is the estimate."""
    claims = {path.name: DURATION_CLAIM.findall(path.read_text()) for path in sorted((REPO / "examples").glob("*.rbl"))}
    assert {name: found for name, found in claims.items() if found and name != "quickstart.rbl"} == {}
    planned = run_rbl("plan", "examples/quickstart.rbl", cwd=REPO)
    estimate = re.search(r"^time +=[^(]*?(about [0-9.]+ (?:s|min))", planned.stdout, re.M).group(1)
    assert f"in {estimate} as `rbl plan` estimates it" in (EXAMPLES / "quickstart.rbl").read_text()
    readme = (REPO / "README.md").read_text()
    assert f"takes {estimate} (`rbl plan`'s estimate)" in readme and f"# {estimate}: runs/quickstart" in readme


def test_a_full_disk_is_exit_5_with_a_message_not_a_traceback(cli, monkeypatch, tmp_path):
    import errno

    import rbl.compiler.plan

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(rbl.compiler.plan, "write_plan", full)      # the CLI imports it when compiling
    code, _, err = cli("compile", QUICKSTART, "-o", tmp_path / "out")
    assert code == 5 and "No space left on device" in err and "Traceback" not in err
