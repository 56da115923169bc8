"""`target` and `target.cpus` as axes (|T|): the plan's order and records, the plan file's checks,
and a real run in which each scenario meets its own path under its own CPU budget (the second
budget restarts the target's replicas, under the new cgroup quota)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rbl.compiler.expand import iter_scenario_lines, iter_scenarios
from rbl.compiler.pipeline import compile_source
from rbl.compiler.plan import plan_header
from rbl.plan_records import target_of
from rbl.store.plan_file import PlanProblem, header_problem, scenario_check

from .conftest import run_rbl

SPACE = """
space cpus_by_work {
  load = users
  load.users = 4
  load.think = 20ms
  load.duration = 3s
  target in ["/factorial/2000", "/factorial/8000"]
  target.cpus in [0.25, 1]
  client istio.circuit_breaker { http2MaxRequests in [4, 1024] }
  assert size == 8
}
"""


def _space(text: str = SPACE):
    result = compile_source(text, "s.rbl")
    assert result.space is not None, [d.message for d in result.diagnostics]
    return result.space


def test_each_scenario_names_its_point_and_the_budget_varies_slowest():
    space = _space()
    points = [s["target"] for s in iter_scenarios(space)][::2]
    assert points == [{"path": "/factorial/2000", "cpus": 0.25}, {"path": "/factorial/8000", "cpus": 0.25},
                      {"path": "/factorial/2000", "cpus": 1.0}, {"path": "/factorial/8000", "cpus": 1.0}]
    # the fast path (plan files) and the dict path (the runner) agree, ids included
    assert [json.loads(line) for line in iter_scenario_lines(space)] == list(iter_scenarios(space))
    header = plan_header(space)
    assert header["target"] == {"path": "/factorial/2000", "cpus": 0.25,
                                "axes": {"path": ["/factorial/2000", "/factorial/8000"], "cpus": [0.25, 1.0]}}
    assert header["breakdown"]["targets"] == 4 and header["breakdown"]["text"].startswith("|T| 4 x ")
    assert target_of(header, {"target": points[3]}) == {"path": "/factorial/8000", "cpus": 1.0}


def test_a_target_that_does_not_vary_leaves_the_plan_as_it_was():
    """One value written as an axis is the same space as one bound: no |T|, no scenario record, same ids."""
    bound = _space(SPACE.replace('target in ["/factorial/2000", "/factorial/8000"]', 'target = "/factorial/2000"')
                   .replace("target.cpus in [0.25, 1]", "target.cpus = 0.5").replace("== 8", "== 2"))
    listed = _space(SPACE.replace('target in ["/factorial/2000", "/factorial/8000"]', 'target in ["/factorial/2000"]')
                    .replace("target.cpus in [0.25, 1]", "target.cpus in [0.5]").replace("== 8", "== 2"))
    assert list(iter_scenarios(bound)) == list(iter_scenarios(listed))
    assert not any("target" in scenario for scenario in iter_scenarios(bound))
    header = plan_header(bound)
    assert "targets" not in header["breakdown"] and header["target"] == {"path": "/factorial/2000", "cpus": 0.5}


def _check(header: dict, scenarios: list[dict]) -> None:
    assert header_problem(header) is None
    check = scenario_check(header)
    for scenario in scenarios:
        check(scenario)
    check.finish()


def test_the_plan_file_refuses_a_point_the_plan_does_not_have():
    space = _space()
    header, scenarios = plan_header(space), list(iter_scenarios(space))
    _check(header, scenarios)                                  # as compiled: accepted
    wrong = [dict(s) for s in scenarios]
    wrong[1] = {**wrong[1], "target": {"path": "/factorial/8000", "cpus": 3.0}}
    with pytest.raises(PlanProblem, match="target.cpus 3.0 is not one of the plan's"):
        _check(header, wrong)
    missing = [dict(s) for s in scenarios]
    del missing[0]["target"]
    with pytest.raises(PlanProblem, match="names its point"):
        _check(header, missing)
    assert "breakdown.targets: 3, but the target's axes make 4 points" in \
        header_problem({**header, "breakdown": {**header["breakdown"], "targets": 3}})
    assert "a plan whose target varies has both" in header_problem({**header, "target": {"path": "/factorial/2000"}})


@pytest.mark.parametrize("settings, code, message", [
    ('  users = 2\n  target in ["/a", "/b"]\n', "E0210", "`target` can vary only under open-loop load"),
    ("  users = 2\n  target.cpus in [0.5, 1]\n", "E0210", "`target.cpus` can vary only"),
    ("  load = open\n  load.rate = 80%\n  target.cpus in [0.5, 1]\n", "E0231", "share of one calibrated capacity"),
    ('  load = open\n  load.rate = 50%\n  load.peak = 120%\n  load.profile = ramp\n  target in ["/a", "/b"]\n',
     "E0231", "share of one calibrated capacity"),
    ('  load = users\n  load.users = 2\n  target in ["/a", "b"]\n', "E0218", "must be a URL path"),
    ("  users = 2\n  target.drop_abandoned in [true, false]\n", "E0210", "`target.drop_abandoned` cannot vary"),
    ("  users = 2\n  target.drop_abandoned = 1\n", "E0202", "`target.drop_abandoned` expects `true` or `false`"),
])
def test_a_target_axis_where_it_cannot_be_run_is_a_located_error(settings, code, message):
    diagnostics = compile_source(f"space s {{\n{settings}  client istio.baseline {{}}\n}}\n", "s.rbl").diagnostics
    errors = [(d.code, d.message) for d in diagnostics if d.severity == "error"]
    assert errors and errors[0][0] == code and message in errors[0][1], errors


def test_shares_of_a_capacity_given_in_the_spec_may_meet_a_varying_target():
    _space("space s {\n  load = open\n  load.rate = 50%\n  load.capacity = 40\n  target.cpus in [0.5, 1]\n"
           "  client istio.baseline {}\n  assert size == 2\n}\n")


def test_each_scenario_meets_its_own_path_under_its_own_budget(tmp_path: Path):
    (tmp_path / "spec.rbl").write_text(SPACE)
    done = run_rbl("run", "spec.rbl", "-o", "run", "--report", cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    run = tmp_path / "run"
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and not any(row["oracleViolations"] for row in rows)
    median = {}          # per point, over its two configurations (a pool of 4 never fills with 4 users)
    for row in rows:
        median.setdefault((row["targetPath"], row["targetCpus"]), []).append(row["successP50Ms"])
    median = {point: sum(values) / len(values) for point, values in median.items()}
    assert len(median) == 4
    # more work per request takes longer on either budget, and a quarter core serves the heavy path
    # far slower than a whole one (about 4x: the quota, not the machine, sets its pace)
    for cpus in (0.25, 1.0):
        assert median["/factorial/8000", cpus] > 1.5 * median["/factorial/2000", cpus], median
    assert median["/factorial/8000", 0.25] > 1.8 * median["/factorial/8000", 1.0], median
    # one restart, for the second budget, under a cgroup quota of its own; none left behind
    log = (run / "logs" / "target.log").read_text()
    assert log.count("starting:") == 2, log
    (session,) = json.loads((run / "manifest.json").read_text())["sessions"]
    assert "0.25 CPU (cgroup" in session["target"], session
    budget = Path(session["target"].split(", ")[-1].rstrip(")"))
    assert budget.is_absolute() and not budget.exists(), f"a target budget was left behind: {budget}"
    csv_header = (run / "results.csv").read_text().splitlines()[0].split(",")
    assert "targetPath" in csv_header and "targetCpus" in csv_header
    # the report compares configurations on one point at a time, and says which
    findings = json.loads((run / "report" / "findings.json").read_text())
    assert findings and {json.dumps(f["target"], sort_keys=True) for f in findings} <= \
        {json.dumps(p, sort_keys=True) for p in [s["target"] for s in iter_scenarios(_space())]}
    assert len({json.dumps(f["target"]) for f in findings}) >= 2
    assert all(", on /factorial/" in f["text"] for f in findings), findings[0]["text"]
    assert "/factorial/8000" in done.stdout and "0.25 CPU" in done.stdout, done.stdout
