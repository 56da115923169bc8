"""The report's answer: per condition, which configuration to deploy under the objective, checked on
synthetic runs of known order (the plan of a real spec, rows drawn from known distributions): it names
the true best at its stated rate, says "cannot tell" when the configurations are equal, respects the
objective's bounds, and its "about N rounds" advice resolves the question when followed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from rbl.compiler.expand import iter_scenarios
from rbl.compiler.pipeline import compile_source
from rbl.compiler.plan import plan_header
from rbl.report.cells import Cell, estimate_metrics
from rbl.report.labels import Labeller
from rbl.report.noise import noise_check
from rbl.report.recommendation import objective_of, objective_metrics, recommend
from rbl.report.recommendation_view import sentence

from .conftest import run_rbl

SPEC = """
space choice {
  users = 5
  fault.rate in [0%%, 50%%]
  client tenacity.baseline {}
  client tenacity.retry {
    stop_after_attempt = 4
    multiplier in [5ms, 10ms]
  }
  client pybreaker.circuit_breaker {
    fail_max = 2
    reset_timeout = 20ms
  }
%s
}
"""
RESAMPLES = 300


def plan(objective: str = ""):
    result = compile_source(SPEC % objective, "choice.rbl")
    assert result.space is not None, [d.message for d in result.diagnostics]
    return plan_header(result.space), list(iter_scenarios(result.space))


def synthetic(header: dict, scenarios: list[dict], means, rounds: int, rng, spread: float = 0.1,
              users: int = 5) -> list[Cell]:
    """Cells whose rows draw each metric from a normal around `means(scenario)` ({metric: mean})."""
    cells = []
    for scenario in scenarios:
        cell = Cell(scenario)
        wanted = means(scenario)
        cell.rounds = {r: [{metric: max(0.0, rng.normal(mean, spread * mean)) for metric, mean in wanted.items()}
                           for _ in range(users)] for r in range(1, rounds + 1)}
        cells.append(cell)
    metrics = sorted({m for s in scenarios for m in means(s)})
    estimate_metrics(cells, metrics, RESAMPLES)
    return cells


def total_time(scenario: dict) -> dict:
    """At 50% aborts the 5 ms retry is best (40), the baseline worst (90); without faults all alike."""
    if scenario["fault"]["rate"] == 0:
        return {"totalExecutionTime": 20.0}
    by_config = {"baseline": 90.0, "circuit_breaker": 70.0}
    value = by_config.get(scenario["pattern"]) or (40.0 if scenario["config"].get("multiplier") == 0.005 else 55.0)
    return {"totalExecutionTime": value}


def answer(header, cells):
    check = noise_check(header, cells, objective_metrics(header), "auto", RESAMPLES)
    return recommend(header, cells, check, "auto", RESAMPLES)


def test_the_default_objective_is_the_total_time_and_names_the_true_best():
    header, scenarios = plan()
    assert objective_of(header) == {"metric": "totalExecutionTime", "direction": "lower", "bounds": [],
                                    "default": True}
    found = answer(header, synthetic(header, scenarios, total_time, 6, np.random.default_rng(1)))
    by_rate = {rec.group.fault["rate"]: rec for rec in found}
    assert set(by_rate) == {0, 50}
    faulted = by_rate[50]
    assert faulted.status == "deploy" and faulted.leader.scenario["config"].get("multiplier") == 0.005
    assert faulted.finding.worst.scenario["config"].get("multiplier") == 0.01        # the runner-up, 55
    text = sentence(faulted, Labeller(header))
    assert text.startswith("At 50% aborts and 5 users, deploy `tenacity.retry multiplier=5ms`: it finished 1.4x "
                           "faster than the runner-up `tenacity.retry multiplier=10ms` ["), text
    # without faults every configuration behaves alike: no winner, and no practical number of rounds makes one
    assert by_rate[0].status == "cannot tell"
    assert by_rate[0].more_rounds is None or by_rate[0].more_rounds > 100, by_rate[0].more_rounds


def test_it_names_the_true_best_at_its_stated_rate_and_never_a_wrong_one():
    """50 runs of 4 rounds with a 10% spread: the 5 ms retry (40) against the runner-up (55)."""
    header, scenarios = plan()
    right = wrong = 0
    for seed in range(50):
        found = answer(header, synthetic(header, scenarios, total_time, 4, np.random.default_rng(100 + seed)))
        (faulted,) = [rec for rec in found if rec.group.fault["rate"] == 50]
        if faulted.status == "deploy":
            right += faulted.leader.scenario["config"].get("multiplier") == 0.005
            wrong += faulted.leader.scenario["config"].get("multiplier") != 0.005
    assert wrong == 0 and right >= 45, (right, wrong)


def test_equal_configurations_are_never_a_recommendation():
    """Every configuration draws from one distribution: in 50 runs the answer is "cannot tell" at least
    95% of the time (the interval's own error rate), and each such answer says why."""
    header, scenarios = plan()
    same = lambda scenario: {"totalExecutionTime": 50.0}          # noqa: E731
    claimed = 0
    for seed in range(50):
        found = answer(header, synthetic(header, scenarios, same, 4, np.random.default_rng(900 + seed)))
        (faulted,) = [rec for rec in found if rec.group.fault["rate"] == 50]
        claimed += faulted.status == "deploy"
        if faulted.status == "cannot tell":
            assert "cannot tell" in sentence(faulted, Labeller(header))
    assert claimed <= 2, claimed


def test_a_bound_makes_the_leader_ineligible_and_the_next_one_the_answer():
    header, scenarios = plan("  objective = totalExecutionTime\n  objective.latencyP99 = 100ms")
    assert objective_of(header)["bounds"] == [{"metric": "latencyP99", "op": "<=", "limit": 100.0}]

    def with_tail(scenario):
        means = total_time(scenario)
        fast = scenario["config"].get("multiplier") == 0.005
        return {**means, "latencyP99": 300.0 if fast else 60.0}          # the fastest has a long tail
    found = answer(header, synthetic(header, scenarios, with_tail, 6, np.random.default_rng(7)))
    (faulted,) = [rec for rec in found if rec.group.fault["rate"] == 50]
    assert faulted.leader.scenario["config"].get("multiplier") == 0.01
    (why,) = [why for _, why in faulted.excluded]
    assert why.startswith("outside the bound (latencyP99 at most 100 ms; median 29"), why
    assert "not eligible: `tenacity.retry multiplier=5ms` outside the bound" in sentence(faulted, Labeller(header))


def test_none_eligible_says_why_for_each():
    header, scenarios = plan("  objective.latencyP99 = 10ms")
    found = answer(header, synthetic(header, scenarios, lambda s: {**total_time(s), "latencyP99": 60.0}, 3,
                                     np.random.default_rng(2)))
    assert {rec.status for rec in found} == {"none eligible"}
    assert "no configuration is eligible" in sentence(found[0], Labeller(header))


def test_the_rounds_it_advises_resolve_the_question_when_followed():
    """A small difference (50 against 56, 15% spread) mostly unresolved at 3 rounds: the advice names a
    number of rounds, and runs of that many resolve it (for the true best) at least half the time."""
    header, scenarios = plan()

    def close(scenario):
        if scenario["fault"]["rate"] == 0:
            return {"totalExecutionTime": 20.0}
        return {"totalExecutionTime": 50.0 if scenario["config"].get("multiplier") == 0.005 else
                56.0 if scenario["config"].get("multiplier") == 0.01 else 90.0}
    advised = []
    for seed in range(20):
        found = answer(header, synthetic(header, scenarios, close, 3, np.random.default_rng(300 + seed), 0.15))
        (faulted,) = [rec for rec in found if rec.group.fault["rate"] == 50]
        if faulted.status == "cannot tell" and faulted.more_rounds:
            advised.append(faulted.more_rounds)
    assert len(advised) >= 5, "a 12% difference at 3 rounds of 15% spread is mostly unresolved, with advice"
    rounds = int(np.median(advised))
    assert 4 <= rounds <= 100, advised
    resolved = 0
    for seed in range(20):
        found = answer(header, synthetic(header, scenarios, close, rounds, np.random.default_rng(500 + seed), 0.15))
        (faulted,) = [rec for rec in found if rec.group.fault["rate"] == 50]
        resolved += faulted.status == "deploy" and faulted.leader.scenario["config"].get("multiplier") == 0.005
    assert resolved >= 10, (rounds, resolved)


def test_the_advice_names_the_option_that_gives_more_rounds():
    """After a run of fixed rounds, more rounds are `--rounds N`; after a run until resolved, which
    stopped at its cap, they are `--until-resolved --max-rounds N`."""
    header, scenarios = plan()

    def close(scenario):
        if scenario["fault"]["rate"] == 0:
            return {"totalExecutionTime": 20.0}
        return {"totalExecutionTime": 50.0 if scenario["config"].get("multiplier") == 0.005 else 56.0}
    for seed in range(20):
        found = answer(header, synthetic(header, scenarios, close, 3, np.random.default_rng(300 + seed), 0.15))
        (faulted,) = [rec for rec in found if rec.group.fault["rate"] == 50]
        if faulted.status == "cannot tell" and faulted.more_rounds:
            break
    else:
        raise AssertionError("no seed left the question open with advice")
    n = faulted.more_rounds
    assert sentence(faulted, Labeller(header)).endswith(f"(`--rounds {n}`).")
    assert sentence(faulted, Labeller(header), until_resolved=True).endswith(f"(`--until-resolved --max-rounds {n}`).")


def test_the_report_says_what_to_deploy_first(tmp_path: Path):
    """A real run: the quickstart's shape, one user count, 2 rounds; the terminal's first line is the
    question, recommendations.json has one answer per fault rate, report.html puts it above the findings."""
    spec = (SPEC % "").replace("users = 5", "users = 3\n  rounds = 2\n  successes = 5\n  target = \"/bytes/10\"")
    (tmp_path / "spec.rbl").write_text(spec)
    done = run_rbl("run", "spec.rbl", "-o", "run", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = run_rbl("report", "run", cwd=tmp_path, timeout=300)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("Which configuration to deploy, for the least total execution time (ms)"), shown.stdout
    saved = json.loads((tmp_path / "run" / "report" / "recommendations.json").read_text())
    assert saved["objective"]["metric"] == "totalExecutionTime"
    assert sorted(r["fault"]["rate"] for r in saved["recommendations"]) == [0, 50]
    assert all(r["status"] in ("deploy", "deploy unchecked", "cannot tell") for r in saved["recommendations"])
    page = (tmp_path / "run" / "report" / "report.html").read_text()
    assert 0 < page.index('id="recommendation"') < page.index('id="findings"')


@pytest.mark.parametrize("setting, message", [
    ("objective = carriedThroughput", "is measured by open-loop rounds"),
    ("objective = sidecarRetries", "has no better end"),
    ("objective = totalTime", "did you mean"),
    ("objective.latencyP99 = 100", "expects a duration"),
    ("objective.successfulCalls = 90%", "expects a number"),
])
def test_an_objective_rbl_cannot_score_is_a_located_error(setting, message):
    result = compile_source(SPEC % f"  {setting}", "choice.rbl")
    errors = [d for d in result.diagnostics if d.severity == "error"]
    assert errors and result.space is None
    assert message in errors[0].message + " " + (errors[0].help or ""), (errors[0].message, errors[0].help)
    assert errors[0].primary.span.line == (SPEC % "").count("\n", 0, (SPEC % "<>").index("<>")) + 1


def until_resolved(means, seed: int, max_rounds: int = 20, spread: float = 0.15):
    """A run until resolved, simulated: 3 rounds, then one more for each cell the rule names."""
    from rbl.report.stopping_rule import next_rounds
    header, scenarios = plan()
    rng = np.random.default_rng(seed)
    cells = synthetic(header, scenarios, means, 3, rng, spread)
    while True:
        check = noise_check(header, cells, objective_metrics(header), "auto", RESAMPLES)
        found = recommend(header, cells, check, "auto", RESAMPLES)
        decided = next_rounds(found, cells, check, max_rounds)
        if not decided.cells:
            (faulted,) = [rec for rec in found if rec.group.fault["rate"] == 50]
            return faulted, decided.reason, cells
        for cell in decided.cells:
            wanted = means(cell.scenario)
            cell.rounds[max(cell.rounds) + 1] = [{m: max(0.0, rng.normal(v, spread * v)) for m, v in wanted.items()}
                                                 for _ in range(5)]
        estimate_metrics(decided.cells, ["totalExecutionTime"], RESAMPLES)


def test_running_until_resolved_finds_the_true_best_and_never_stops_on_noise():
    """The stopping rule on synthetic runs: a 12% difference (50 against 56 ms, 15% spread per user)
    is told, for the true best, in at least 18 of 20 runs within 20 rounds (the others end there
    saying they cannot tell) and never for another; with every configuration equal, none of 20 runs
    names a winner, each going on to the most rounds allowed."""
    def close(scenario):
        if scenario["fault"]["rate"] == 0:
            return {"totalExecutionTime": 20.0}
        return {"totalExecutionTime": 50.0 if scenario["config"].get("multiplier") == 0.005 else
                56.0 if scenario["config"].get("multiplier") == 0.01 else 90.0}
    told, far, near = 0, 0, 0
    for seed in range(20):
        faulted, reason, cells = until_resolved(close, 1000 + seed)
        assert faulted.status != "deploy" or faulted.leader.scenario["config"].get("multiplier") == 0.005
        told += faulted.status == "deploy"
        assert max(len(cell.rounds) for cell in cells) <= 20
        at_50 = {(c.pattern, c.scenario["config"].get("multiplier")): len(c.rounds) for c in cells if c.fault_rate == 50}
        far += at_50["baseline", None] - 3            # far behind (90): more rounds only while intervals overlap
        near += at_50["retry", 0.01] - 3              # the runner-up (56): as many as the answer needs
    assert told >= 18, told                       # the rest end at the most rounds, saying they cannot tell
    assert far < near / 3, (far, near)
    for seed in range(20):
        faulted, reason, cells = until_resolved(lambda s: {"totalExecutionTime": 50.0}, 2000 + seed)
        assert faulted.status == "cannot tell", (seed, faulted.status)
        assert reason == "the most rounds allowed (20) were run", reason


def test_a_run_until_resolved_adds_rounds_where_the_answer_needs_them(tmp_path: Path):
    spec = (SPEC % "").replace("users = 5", "users = 3\n  successes = 5\n  target = \"/bytes/10\"")
    (tmp_path / "spec.rbl").write_text(spec)
    done = run_rbl("run", "spec.rbl", "-o", "run", "--until-resolved", "--max-rounds", "6", cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "until resolved: stopped, " in done.stderr, done.stderr
    # without --report the run ends with its answer, the one `rbl report` gives first
    report = run_rbl("report", "run", cwd=tmp_path, timeout=300)
    answer = json.loads((tmp_path / "run" / "report" / "recommendations.json").read_text())["recommendations"]
    assert "Which configuration to deploy" in done.stdout and answer, done.stdout
    flat = " ".join(done.stdout.split())
    assert all(" ".join(item["text"].split()) in flat for item in answer), (flat, answer)
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "run" / "report" / "report.html").read_text()
    header = json.loads((tmp_path / "run" / "plan.json").read_text())
    assert header["rounds"] == 6 and header["until_resolved"] == {"rounds": 3}
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    rounds: dict[str, set[int]] = {}
    for row in rows:
        rounds.setdefault(row["scenarioId"], set()).add(row["round"])
    assert len(rounds) == header["size"]
    assert all(set(range(1, 4)) <= numbers <= set(range(1, 7)) for numbers in rounds.values()), rounds
    # the report says the rounds the cells took (which cells need a fourth depends on the machine's noise)
    low, high = min(map(len, rounds.values())), max(map(len, rounds.values()))
    took = f"{low}-{high}" if low < high else f"{low}"
    assert f"{took} rounds (until resolved, at most 6) x " in html, re.findall(r"[^>]{0,20}rounds \(until[^<]{0,40}", html)
    (session,) = json.loads((tmp_path / "run" / "manifest.json").read_text())["sessions"]
    added = sum(len(numbers) - 3 for numbers in rounds.values())
    assert session["untilResolved"]["moreRounds"] == added
    stopped = session["untilResolved"]["stopped"]
    assert stopped.startswith("resolved") or stopped == "the most rounds allowed (6) were run", stopped
    # resumed, it asks the rule again: nothing more is needed, so nothing starts
    resumed = run_rbl("run", "--resume", "run", cwd=tmp_path, timeout=300)
    assert resumed.returncode == 0 and "nothing to resume" in resumed.stderr, resumed.stderr


@pytest.mark.parametrize("args, message", [
    (["--max-rounds", "5"], "--max-rounds bounds --until-resolved"),
    (["--until-resolved", "--max-rounds", "2"], "--max-rounds 2 is fewer than the 3 rounds"),
    (["--until-resolved", "--shard", "1/2"], "a shard has only some of them"),
    (["--until-resolved", "--max-rounds", "100000"], "less than or equal to 1000"),
])
def test_running_until_resolved_refuses_what_it_cannot_do(tmp_path: Path, args, message):
    (tmp_path / "spec.rbl").write_text(SPEC % "")
    done = run_rbl("run", "spec.rbl", "-o", "run", *args, cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "run").exists()


def test_plan_estimates_a_run_until_resolved_and_refuses_as_run_does(tmp_path: Path):
    (tmp_path / "spec.rbl").write_text(SPEC % "")
    done = run_rbl("plan", "spec.rbl", "--until-resolved", "--max-rounds", "6", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("until resolved:"))
    first, most = re.findall(r"about ([\d.]+) (s|min)", line)
    assert "3 rounds of every scenario first" in line and "at most 6 " in line, line
    seconds = lambda value, unit: float(value) * (60 if unit == "min" else 1)  # noqa: E731
    assert seconds(*most) > 1.5 * seconds(*first), line                # twice the rounds, more than 1.5x the time
    as_json = run_rbl("plan", "spec.rbl", "--until-resolved", "--max-rounds", "6", "--json", cwd=tmp_path, timeout=120)
    estimate = json.loads(as_json.stdout)["until_resolved"]                  # the same figures for a program
    assert (estimate["first_rounds"], estimate["max_rounds"]) == (3, 6)
    assert estimate["at_most_seconds"] > 1.5 * estimate["first_seconds"] > 0
    for args, message in ((["--max-rounds", "5"], "--max-rounds bounds --until-resolved"),
                          (["--until-resolved", "--max-rounds", "2"], "--max-rounds 2 is fewer than the 3 rounds")):
        refused = run_rbl("plan", "spec.rbl", *args, cwd=tmp_path, timeout=120)
        assert refused.returncode == 2 and message in refused.stderr and not refused.stdout, refused.stderr
