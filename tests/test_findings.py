"""The report's findings (rbl/report/findings.py, findings_view.py): on a real run whose ordering is
known by construction (a retry that waits 100 ms after each failed attempt against one that waits
1 ms, at 50% aborts) the finding names the right winner above the noise floor; configurations that
cannot differ (two clients with one configuration, cells without faults, the same measurements
twice) are unresolved; the numbers are the tables' and the statistics' own; the terminal prints
the findings first and the A/A check in a few lines; a 1-round run says what more rounds add."""

from __future__ import annotations

import csv
import json
import re
import shutil
import statistics
from pathlib import Path

import pytest

from rbl.report.cells import Cell
from rbl.report.findings import EFFECT, UNCHECKED, UNRESOLVED, Finding, Group, direction
from rbl.report.findings_view import fault_phrase, sentence, times
from rbl.report.labels import Labeller
from rbl.report.stats import Difference, Estimate, difference, t_quantile

from .conftest import run_rbl as rbl

# At 50% aborts a user needs about as many failed attempts as successes (15), each followed by the
# retry's wait: about 15 x 100 ms against 15 x 1 ms, on top of the same requests. The two breaker
# clients are one configuration under two names: the same setup measured twice. A randomized order
# spreads the machine's drift over every cell, so it does not inflate the noise floor.
SPEC = """
space findings {
  rounds = 4
  order = randomized
  users = 4
  successes = 15
  max_requests = 200
  target = "/bytes/64"
  fault.kind = abort
  fault.status = 503
  fault.rate in [0%, 50%]
  client tenacity.baseline {}
  client tenacity.retry {
    stop_after_attempt = 50
    wait = fixed
    wait_fixed in [1ms, 100ms]
  }
  client pybreaker.circuit_breaker as breaker_a {
    fail_max = 3
    reset_timeout = 20ms
  }
  client pybreaker.circuit_breaker as breaker_b {
    fail_max = 3
    reset_timeout = 20ms
  }
}
"""
WIDE = {"COLUMNS": "1000"}                # one terminal line per sentence
FAST, SLOW = "tenacity.retry wait_fixed=1ms", "tenacity.retry wait_fixed=100ms"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("findings")
    (work / "findings.rbl").write_text(SPEC)
    done = rbl("run", "findings.rbl", "-o", "run", cwd=work)
    assert done.returncode == 0, done.stderr
    return work / "run"


@pytest.fixture(scope="module")
def report(run):
    done = rbl("report", run, cwd=run.parent, env=WIDE)
    assert done.returncode == 0, done.stderr
    return done


def findings_of(report_dir: Path) -> list[dict]:
    return json.loads((report_dir / "findings.json").read_text())


def one(findings: list[dict], metric: str, rate: float, pattern: str) -> dict:
    (found,) = [f for f in findings if f["metric"] == metric and f["fault"]["rate"] == rate
                and f["pattern"] == pattern]
    return found


def crowded(run: Path) -> bool:
    """Whether a core or more of other work beside the run failed its A/A check: the floor it measured
    can then lie above any difference (a relative difference stops at 200% of the pair's mean)."""
    noise = json.loads((run / "report" / "noise.json").read_text())
    return (noise["otherWork"] or {}).get("otherCores", 0) >= 1.0 and noise["verdict"]["level"] == "warning"


def test_the_retry_that_waits_longer_loses_above_the_noise_floor(run, report):
    found = one(findings_of(run / "report"), "totalExecutionTime", 50, "retry")
    assert (found["best"], found["worst"]) == (FAST, SLOW)
    assert found["ratioLow"] > 1                                     # the interval says which, whatever the floor
    noise = json.loads((run / "report" / "noise.json").read_text())
    if crowded(run) and found["status"] == UNRESOLVED:
        # a machine busy enough to fail the A/A check (1 core or more of other work) can measure a floor
        # above any difference its cells could show: the report must then say so, not claim the effect
        assert found["relative"] <= found["floor"] and "within the noise floor" in found["text"], found
        return
    assert found["status"] == EFFECT and found["relative"] > found["floor"] > 0, (found, noise["summary"])
    assert found["text"].startswith(f"At 50% aborts and 4 users, `{FAST}` finished {times(found['ratio'])} faster "
                                    f"than `wait_fixed=100ms` [{times(found['ratioLow'])}, "
                                    f"{times(found['ratioHigh'])}]")
    assert found["text"].endswith(f"; above the noise floor of {found['floor'] * 100:.3g}%.")
    # the same sentence in report.html, with the labels as code, in the findings' list of effects
    html = (run / "report" / "report.html").read_text()
    start = html.index('<section id="findings">')
    effects = html[start:html.index("</section>", start)]
    assert f"<code>{FAST}</code> finished {times(found['ratio'])} faster than <code>wait_fixed=100ms</code>" in effects
    assert effects.index("<li>") < effects.index("unresolved")


def test_the_findings_are_the_tables_numbers(run, report, tmp_path):
    found = one(findings_of(run / "report"), "totalExecutionTime", 50, "retry")
    cells = {c["scenarioId"]: c for c in json.loads((run / "report" / "cells.json").read_text())}
    best, worst = cells[found["bestScenarioId"]], cells[found["worstScenarioId"]]
    assert (best["configuration"], worst["configuration"]) == (FAST, SLOW)
    assert (found["medianBest"], found["medianWorst"]) == (best["totalExecutionTime.median"],
                                                           worst["totalExecutionTime.median"])
    assert found["ratio"] == pytest.approx(found["medianWorst"] / found["medianBest"])
    # the ratio's interval is the difference's, over the better median
    assert found["ratioLow"] == pytest.approx(1 + found["ci95Low"] / found["medianBest"])
    assert found["ratioHigh"] == pytest.approx(1 + found["ci95High"] / found["medianBest"])
    # 4 rounds: the bootstrap difference the A/A pairs and `rbl diff` use, with the report's seed
    rounds = rounds_of(run, "totalExecutionTime")
    groups = lambda scenario: [values for _, values in sorted(rounds[scenario].items())]
    expected = difference(groups(found["bestScenarioId"]), groups(found["worstScenarioId"]), 2000, 0)
    assert found["interval"] == "bootstrap"
    assert (found["difference"], found["ci95Low"], found["ci95High"]) == pytest.approx(
        (expected.difference, expected.low, expected.high))
    # with --intervals rounds-t: Welch's interval on the round medians, computed here by hand
    done = rbl("report", run, "--intervals", "rounds-t", "-o", tmp_path / "t", cwd=tmp_path, env=WIDE)
    assert done.returncode == 0, done.stderr
    welch = one(findings_of(tmp_path / "t"), "totalExecutionTime", 50, "retry")
    medians = [[statistics.median(v) for v in rounds[s].values()] for s in (welch["bestScenarioId"],
                                                                            welch["worstScenarioId"])]
    va, vb = (statistics.variance(m) / len(m) for m in medians)
    df = (va + vb) ** 2 / (va ** 2 / (len(medians[0]) - 1) + vb ** 2 / (len(medians[1]) - 1))
    half = t_quantile(0.975, df) * (va + vb) ** 0.5
    assert welch["interval"] == "rounds-t"
    assert welch["ci95Low"] == pytest.approx(welch["difference"] - half)
    assert welch["ci95High"] == pytest.approx(welch["difference"] + half)


def rounds_of(run: Path, metric: str) -> dict[str, dict[str, list[float]]]:
    """scenario id -> round -> the metric's values, from results.csv."""
    out: dict[str, dict[str, list[float]]] = {}
    with (run / "results.csv").open() as source:
        for row in csv.DictReader(source):
            if row[metric] != "":
                out.setdefault(row["scenarioId"], {}).setdefault(row["round"], []).append(float(row[metric]))
    return out


def test_clients_with_one_configuration_are_unresolved(run, report):
    findings = findings_of(run / "report")
    breakers = [f for f in findings if f["pattern"] == "circuit_breaker"]
    assert len(breakers) == 2 * 2                              # two fault rates, two metrics
    for found in breakers:
        assert {found["best"], found["worst"]} == {"breaker_a", "breaker_b"}
        assert found["identical"] and found["status"] == UNRESOLVED and found["reason"] == "identical"
        assert "unresolved, noise between clients with the same configuration" in found["text"]


def test_cells_without_faults_are_unresolved_whatever_they_measured(run, report):
    for metric in ("totalExecutionTime", "successTimePerRequest"):
        found = one(findings_of(run / "report"), metric, 0, "retry")
        assert found["alike"] and not found["identical"]
        assert found["status"] == UNRESOLVED and found["reason"] == "alike"
        assert found["text"].startswith("With no faults and 4 users, ")
        assert "cannot differ in behaviour without faults (A/A cells)" in found["text"]


def test_the_same_measurements_twice_are_unresolved_by_the_statistics(run, report, tmp_path):
    """The slow retry's cell at 50% given the fast one's rows: two configurations measured identically.
    Nothing marks them alike: the interval of their difference must say unresolved."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("report", "logs"))
    found = one(findings_of(run / "report"), "totalExecutionTime", 50, "retry")
    fast, slow = found["bestScenarioId"], found["worstScenarioId"]
    rows = [json.loads(line) for line in (copy / "results.jsonl").read_text().splitlines()]
    slow_index = next(r["scenarioIndex"] for r in rows if r["scenarioId"] == slow)
    kept = [r for r in rows if r["scenarioId"] != slow]
    twins = [{**r, "scenarioId": slow, "scenarioIndex": slow_index, "config": next(
        x["config"] for x in rows if x["scenarioId"] == slow)} for r in rows if r["scenarioId"] == fast]
    (copy / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept + twins))
    done = rbl("report", copy, cwd=tmp_path, env=WIDE)
    assert done.returncode == 0, done.stderr
    for metric in ("totalExecutionTime", "successTimePerRequest"):
        same = one(findings_of(copy / "report"), metric, 50, "retry")
        assert not same["alike"] and not same["identical"]
        assert same["ratio"] == 1 and same["difference"] == 0
        assert same["status"] == UNRESOLVED and same["reason"] == "includes none"
        assert same["ci95Low"] < 0 < same["ci95High"]
        assert "are 1.00x apart in" in same["text"] and "unresolved, the interval includes no difference" in same["text"]
    assert "No difference between configurations clears the noise floor" in done.stdout


def test_the_terminal_prints_the_findings_first_and_the_check_in_a_few_lines(run, report):
    # the answer (which configuration to deploy) comes first, one line per condition; the findings next
    answers = json.loads((run / "report" / "recommendations.json").read_text())["recommendations"]
    head = report.stdout.splitlines()
    assert head[0].startswith("Which configuration to deploy") and head[1:1 + len(answers)] == \
        [f"  - {answer['text']}" for answer in answers]
    lines = head[1 + len(answers):]
    findings = findings_of(run / "report")
    # the slow retry's, and maybe its success time; by metric in the report's order, as printed
    effects = sorted((f for f in findings if f["status"] == EFFECT),
                     key=lambda f: ("successTimePerRequest", "totalExecutionTime").index(f["metric"]))
    many = len(effects) != 1
    if not effects and crowded(run):             # the floor above every difference: said in one line
        assert lines[0] == "Findings: No difference between configurations clears the noise floor: all 8 " \
                           "comparisons are unresolved.", lines[0]
    else:
        assert lines[0].startswith(f"Findings: {len(effects)} difference{'s' if many else ''} between "
                                   f"configurations clear{'' if many else 's'} the noise floor, out of 8 comparisons")
        assert lines[1:1 + len(effects)] == [f"  - {f['text']}" for f in effects]
        assert f"  - {one(findings, 'totalExecutionTime', 50, 'retry')['text']}" in lines[1:1 + len(effects)]
        assert re.match(rf"  {8 - len(effects)} comparisons unresolved \(.*\): listed with `--explain` and in "
                        r"report\.html\.$", lines[1 + len(effects)])
    verdict = next(i for i, line in enumerate(lines) if line.startswith("A/A check: "))
    table = next(i for i, line in enumerate(lines) if line.startswith("median [95% CI] per cell"))
    assert 0 < verdict < table
    block = lines[verdict:table]
    noise = json.loads((run / "report" / "noise.json").read_text())
    if noise["summary"]["status"] == "fail":          # the reason, what to do and where to read more
        assert 3 <= len(block) <= 5 and block[-1].startswith("  Details: `rbl report --explain ")
    else:
        assert len(block) == 1
    assert noise["verdict"]["headline"] not in report.stdout          # the full verdict: with --explain
    explained = rbl("report", run, "--explain", "-o", run.parent / "explained", cwd=run.parent, env=WIDE)
    assert explained.returncode == 0, explained.stderr
    assert noise["verdict"]["headline"] in explained.stdout
    assert "A/A pairs, resolvable difference" in explained.stdout
    for item in findings_of(run / "report"):
        assert f"  - {item['text']}" in explained.stdout              # every comparison, unresolved ones too


def test_the_run_table_names_the_host_by_fields(run, report):
    html = (run / "report" / "report.html").read_text()
    manifest = json.loads((run / "manifest.json").read_text())
    run_table = html[html.index("<h2>Run</h2>"):]
    assert f"host name <strong>{manifest['host']['hostname']}</strong>" in run_table
    assert f"CPUs <strong>{manifest['host']['cpus']}</strong>" in run_table
    assert f"Python <strong>{manifest['host']['python']}</strong>" in run_table
    assert "{&#34;" not in run_table and '{"' not in run_table and "hostname&#34;" not in run_table
    session = manifest["sessions"][-1]
    assert f"(proxy {session['proxy']} {session['proxyVersion']}" in run_table      # named, with its version


def test_a_one_round_run_says_what_more_rounds_would_add(tmp_path):
    (tmp_path / "findings.rbl").write_text(SPEC)
    done = rbl("run", "findings.rbl", "--rounds", "1", "--set", "successes=5", "-o", "run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = rbl("report", "run", cwd=tmp_path, env=WIDE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Which configuration to deploy")        # the answer first: not yet
    assert "\nFindings: With one round per cell, none of the 8 comparisons can be resolved." in done.stdout
    assert "Run it again with `--rounds 3` or more" in done.stdout
    assert "A/A check: not measured" in done.stdout and "A/A check: fail" not in done.stdout   # busy or not
    findings = findings_of(tmp_path / "run" / "report")
    assert len(findings) == 8 and {f["status"] for f in findings} == {UNRESOLVED}
    assert {f["reason"] for f in findings} == {"no interval", "alike", "identical"}
    assert all(f["ci95Low"] is None for f in findings)
    slow = one(findings, "totalExecutionTime", 50, "retry")
    assert slow["best"] == FAST and "unresolved, one round gives no interval" in slow["text"]
    html = (tmp_path / "run" / "report" / "report.html").read_text()
    # no empty section: no list or table without items, no A/A pairs' table of dashes, the comparisons shown
    assert "<ul></ul>" not in html and not re.search(r"<table>\s*<tr><th[^\n]*</tr>\s*</table>", html)
    assert 'id="aa-pairs"' not in html and "no noise floor" in html
    assert '<details id="unresolved" open>' in html and "one round per cell" in html


# ---- the wording, on made-up numbers ----------------------------------------------------------

HEADER = {"clients": [{"label": "tenacity.retry", "axes": ["multiplier"],
                       "parameters": {"multiplier": {"values": [0.005, 0.01],
                                                     "labels": ["multiplier=5ms", "multiplier=10ms"]}}},
                      {"label": "failsafe.retry", "axes": []}]}


def cell(client: str, config: dict, rounds: int = 3, rate: float = 50) -> Cell:
    made = Cell({"id": f"{client}{config}", "client": client, "library": client.split(".")[0], "pattern": "retry",
                 "config": config, "fault": {"kind": "abort", "rate": rate, "status": 503}, "users": 10})
    made.rounds = {r: [{}] * 5 for r in range(1, rounds + 1)}
    return made


def finding(metric: str, a: float, b: float, low: float | None, high: float | None, floor: float | None,
            best=None, worst=None, **flags) -> Finding:
    best = best or cell("tenacity.retry", {"multiplier": 0.005})
    worst = worst or cell("tenacity.retry", {"multiplier": 0.01})
    result = Difference(Estimate(a, a * 0.9, a * 1.1, 15, 3), Estimate(b, b * 0.9, b * 1.1, 15, 3), b - a, low, high)
    return Finding(metric, Group(best.scenario["fault"], 10, "retry", None, None), best, worst, 2, 0, result,
                   "rounds-t", floor, flags.get("alike", False), flags.get("identical", False))


def test_an_effect_is_a_quotable_sentence_and_its_interval_a_ratio():
    found = finding("totalExecutionTime", 40.0, 92.0, 24.0, 84.0, 0.4)
    assert found.status == EFFECT and found.ratio == pytest.approx(2.3)
    assert found.ratio_interval == pytest.approx((1.6, 3.1))
    assert sentence(found, Labeller(HEADER)) == (
        "At 50% aborts and 10 users, `tenacity.retry multiplier=5ms` finished 2.3x faster than `multiplier=10ms` "
        "[1.6x, 3.1x] (medians 40 and 92 ms); above the noise floor of 40%.")


@pytest.mark.parametrize("low, high, floor, status, reason, ending", [
    (1.0, 20.0, 0.5, UNRESOLVED, "within the floor", "1.3x apart in total execution time [1.02x, 1.5x]: unresolved, "
                                                     "within the noise floor of 50%."),
    (-5.0, 20.0, 0.1, UNRESOLVED, "includes none", "[0.9x, 1.5x]: unresolved, the interval includes no difference."),
    (None, None, 0.1, UNRESOLVED, "no interval", "unresolved, too few observations for an interval."),
    (1.0, 20.0, None, UNCHECKED, "", "but this run measured no noise floor to check it against (it has no cells "
                                     "that must behave alike, such as a 0% fault rate)."),
])
def test_what_is_not_an_effect_says_why(low, high, floor, status, reason, ending):
    found = finding("totalExecutionTime", 40.0, 52.0, low, high, floor)
    assert (found.status, found.reason) == (status, reason)
    assert sentence(found, Labeller(HEADER)).endswith(ending)


def test_alike_cells_stay_unresolved_even_when_their_interval_excludes_no_difference():
    found = finding("totalExecutionTime", 40.0, 92.0, 24.0, 84.0, 0.1, alike=True)
    assert found.result.significant and found.status == UNRESOLVED and found.reason == "alike"


def test_higher_is_better_and_other_clients_and_fault_wording():
    assert direction("throughput") == "higher" and direction("totalExecutionTime") == "lower"
    assert direction("openTransitions") == "none"
    # the overload metrics: what is carried is better high; retries and refusals are facts, not scores
    assert {direction(m) for m in ("carriedThroughput", "successShare", "p95UnderSloShare", "carriedRate")} == {"higher"}
    assert {direction(m) for m in ("sidecarRetries", "circuitBrokenRequests", "sidecarPoolOverflows")} == {"none"}
    assert {direction(m) for m in ("successP99Ms", "failedShare", "chainWastedCpuSeconds")} == {"lower"}
    # throughput: the better end has the higher median; the difference (worst - best) is negative
    fast, slow = cell("failsafe.retry", {}), cell("tenacity.retry", {"multiplier": 0.01})
    found = finding("throughput", 300.0, 100.0, -260.0, -140.0, 0.2, best=fast, worst=slow)
    assert found.status == EFFECT and found.ratio == pytest.approx(3.0)
    # the difference's interval over the smaller median: 1 + [140, 260] / 100
    assert found.ratio_interval == pytest.approx((2.4, 3.6))
    assert sentence(found, Labeller(HEADER)).startswith(
        "At 50% aborts and 10 users, `failsafe.retry` had a 3.0x higher throughput than "
        "`tenacity.retry multiplier=10ms` [2.4x, 3.6x] (medians 300 and 100)")
    assert fault_phrase({"kind": "delay", "rate": 20, "duration_ms": 200}, 1) == "At 20% delays of 200 ms and 1 user"
    assert fault_phrase({"kind": "abort", "rate": 0, "status": 503}, 5) == "With no faults and 5 users"
    assert [times(v) for v in (2.34, 1.0, 1.04, 0.93, 12.4, 0.01)] == ["2.3x", "1.00x", "1.04x", "0.93x", "12x", "0x"]


def test_find_groups_the_plan_and_uses_each_metrics_floor():
    """The quickstart's plan with made-up rows: at 50% aborts the 10 ms retry is 3 times slower, the
    breakers are alike; without faults every cell measures the same."""
    import numpy as np

    from rbl.compiler.expand import iter_scenarios
    from rbl.compiler.pipeline import compile_file
    from rbl.compiler.plan import plan_header
    from rbl.report.findings import find
    from rbl.report.noise import noise_check
    from rbl.report.stats import estimate

    space = compile_file(str(Path(__file__).parent.parent / "examples" / "quickstart.rbl")).space
    header, scenarios = plan_header(space), list(iter_scenarios(space))
    rng = np.random.default_rng(3)
    slow = lambda s: s["fault"]["rate"] == 50 and s["config"].get("multiplier") == 0.01
    metric = "totalExecutionTime"
    cells = []
    for s in scenarios:
        made = Cell(s)
        made.rounds = {r: [{metric: (30.0 if slow(s) else 10.0) + rng.normal(0, 0.5)} for _ in range(10)]
                       for r in range(1, 7)}
        made.estimates[metric] = estimate([[row[metric] for row in rows] for rows in made.rounds.values()], 500)
        cells.append(made)
    check = noise_check(header, cells, [metric], "auto", 500)
    found = find(header, cells, [metric], check, "auto", 500)
    # per fault rate and user count, the retries and the breakers (a lone baseline compares nothing)
    assert sorted((f.group.fault["rate"], f.group.users, f.group.pattern) for f in found) == sorted(
        (rate, users, pattern) for rate in (0, 50) for users in (5, 10) for pattern in ("retry", "circuit_breaker"))
    labeller = Labeller(header)
    for f in found:
        assert f.floor == check.metrics[metric].floor and f.method == "bootstrap"     # 6 rounds
        assert f.result.a.median == f.best.estimates[metric].median                     # the table's medians
        assert f.alike == (f.group.fault["rate"] == 0)
        if f.group.fault["rate"] == 50 and f.group.pattern == "retry":
            assert labeller.label(f.best.scenario) == "tenacity.retry multiplier=5ms"
            assert labeller.label(f.worst.scenario) == "tenacity.retry multiplier=10ms"
            assert f.status == EFFECT and f.ratio == pytest.approx(3, rel=0.05)
        else:
            assert f.status == UNRESOLVED and f.ratio == pytest.approx(1, abs=0.05)


def test_a_pool_sweep_ranks_carried_throughput_high_and_never_ranks_zero_against_zero():
    """overload-pool's question: pool 1 carried 84%, pool 1024 100% (the better one), and no
    configuration's sidecar retried (0 against 0 is no finding)."""
    from rbl.report.findings import find
    from rbl.report.noise import noise_check
    from rbl.report.stats import estimate

    header = {"clients": [{"label": "istio.circuit_breaker", "axes": ["http2MaxRequests"],
                           "parameters": {"http2MaxRequests": {"values": [1, 1024],
                                                               "labels": ["http2MaxRequests=1",
                                                                          "http2MaxRequests=1024"]}}}]}
    cells = []
    for pool, carried in ((1, 0.84), (1024, 1.0)):
        made = Cell({"id": f"pool{pool}", "client": "istio.circuit_breaker", "library": "istio",
                     "pattern": "circuit_breaker", "config": {"http2MaxRequests": pool},
                     "fault": {"kind": "abort", "rate": 0, "status": 503}, "users": 1})
        made.rounds = {r: [{"carriedThroughput": carried + 0.001 * r, "sidecarRetries": 0}] for r in range(1, 4)}
        for metric in ("carriedThroughput", "sidecarRetries"):
            made.estimates[metric] = estimate([[row[metric] for row in rows] for rows in made.rounds.values()], 200)
        cells.append(made)
    metrics = ["carriedThroughput", "sidecarRetries"]
    found = find(header, cells, metrics, noise_check(header, cells, metrics, "auto", 200), "auto", 200)
    assert [f.metric for f in found] == ["carriedThroughput"]
    assert found[0].best.scenario["id"] == "pool1024" and found[0].worst.scenario["id"] == "pool1"


def test_configurations_left_out_are_counted_in_the_sentence():
    found = finding("totalExecutionTime", 40.0, 92.0, 24.0, 84.0, 0.4)
    left = Finding(**{**found.__dict__, "left_out": 1})
    assert sentence(left, Labeller(HEADER)).endswith(
        "above the noise floor of 40% (1 other configuration left out: failed rounds or no data).")


def test_cells_under_another_load_or_target_are_compared_apart_and_never_alike():
    """Two loads x two pools: each load is a group of its own (a pool at 80% is not ranked against
    the other at 120%), the A/A check never pairs cells of different loads, and the sentence says
    the load, not "1 user". The same for the points of a varying target."""
    from rbl.compiler.expand import iter_scenarios
    from rbl.compiler.pipeline import compile_source
    from rbl.compiler.plan import plan_header
    from rbl.report.aa_groups import aa_groups
    from rbl.report.findings import find
    from rbl.report.noise import noise_check
    from rbl.report.stats import estimate

    spec = ("space s {\n  load = open\n  load.rps in [40, 60]\n  target in [\"/a\", \"/b\"]\n"
            "  client istio.circuit_breaker { http2MaxRequests in [1, 1024] }\n  client istio.baseline {}\n}\n")
    space = compile_source(spec, "s.rbl").space
    header, scenarios = plan_header(space), list(iter_scenarios(space))
    metric = "carriedThroughput"
    cells = []
    for s in scenarios:
        made = Cell(s)
        # the load decides what is carried; the pool does only at the higher rate
        carried = 1.0 if s["load"]["rate"]["rps"] == 40 else (0.5 if s["config"].get("http2MaxRequests") == 1 else 0.9)
        made.rounds = {r: [{metric: carried + 0.001 * r}] for r in range(1, 4)}
        made.estimates[metric] = estimate([[row[metric] for row in rows] for rows in made.rounds.values()], 200)
        cells.append(made)
    by_id = {s["id"]: s for s in scenarios}
    for group in aa_groups(header, scenarios).groups:
        members = [by_id[i] for i in group.scenario_ids]
        assert len({json.dumps((m["load"], m["target"]), sort_keys=True) for m in members}) == 1, members
    found = find(header, cells, [metric], noise_check(header, cells, [metric], "auto", 200), "auto", 200)
    assert len(found) == 4            # per load and path: the two pools (and the baseline) compared
    for f in found:
        assert f.best.scenario["load"] == f.worst.scenario["load"] == f.group.load
        assert f.best.scenario["target"] == f.worst.scenario["target"] == f.group.target
    text = sentence(found[-1], Labeller(header))
    assert text.startswith("With no faults and load 60 req/s, constant, on /b, "), text
