"""The A/A check, its verdict and its rendering (rbl/report/noise.py, noise_view.py), on cells of a
compiled plan with observations made up to be alike or not."""

from __future__ import annotations

import numpy as np
import pytest

from rbl.compiler.expand import iter_scenarios
from rbl.compiler.pipeline import compile_file
from rbl.compiler.plan import plan_header
from rbl.report.aa_groups import AAGroup
from rbl.report.cell_effects import alike_sets, f_survival
from rbl.report.cells import Cell
from rbl.report.noise import noise_check
from rbl.report.noise_view import build_noise_figure, rows, summary, verdict
from rbl.report.stats import rounds_t_difference, t_quantile

METRIC = "successTimePerRequest"


def quickstart():
    space = compile_file("examples/quickstart.rbl").space
    return plan_header(space), list(iter_scenarios(space))


def cells_with(scenarios, rounds: int, value, users: int = 10) -> list[Cell]:
    """value(scenario, round, user) -> the metric's value for that user."""
    cells = []
    for s in scenarios:
        cell = Cell(s)
        cell.rounds = {r: [{METRIC: value(s, r, u)} for u in range(users)] for r in range(1, rounds + 1)}
        cells.append(cell)
    return cells


def test_t_quantiles_match_the_printed_table():
    for df, t in ((1, 12.706), (2, 4.303), (3, 3.182), (9, 2.262), (30, 2.042)):
        assert abs(t_quantile(0.975, df) - t) < 1e-3
    assert abs(t_quantile(0.995, 5) - 4.032) < 1e-3 and t_quantile(0.025, 3) < 0


def test_alike_cells_pass_and_the_floor_is_the_resolvable_difference():
    header, scenarios = quickstart()
    rng = np.random.default_rng(1)
    round_level = {r: rng.normal(0, 0.3) for r in range(1, 7)}          # a round's conditions, shared by all cells
    cells = cells_with(scenarios, 6, lambda s, r, u: 10 + round_level[r] + rng.normal(0, 1))
    check = noise_check(header, cells, [METRIC], "rounds-t")
    floor = check.metrics[METRIC]
    assert len(floor.judged) == 12 and check.measurable
    assert check.passed, [(p.a, p.b, p.result) for p in floor.significant]
    assert check.floor == floor.resolvable and 0 < check.floor < 0.5      # the intervals hold: their width
    text = verdict(check)
    assert text["level"] == "ok" and text["headline"].startswith("A/A check passed. Noise floor: ")
    assert f"{check.floor * 100:.3g}%" in text["headline"]
    # in one line for the top of the report and the terminal
    short = summary(check)
    assert short["status"] == "pass" and short["why"] == [] and short["advice"] == ""
    assert short["line"].startswith(f"A/A check: pass, noise floor {check.floor * 100:.3g}% (average success time, ")


def shifts(scenarios):
    """The retry cells at 0% measured 5 and 10 ms slower in every round (as if their neighbours
    were busy): every pair of the tenacity groups differs, 6 of the 12 A/A pairs."""
    return {s["id"]: 5.0 * (1 + (s["config"]["multiplier"] > 0.005))
            for s in scenarios if s["client"] == "tenacity.retry" and s["fault"]["rate"] == 0}


def test_cells_shifted_in_every_round_fail_and_the_verdict_gives_the_advice():
    header, scenarios = quickstart()
    shifted = shifts(scenarios)
    rng = np.random.default_rng(2)
    cells = cells_with(scenarios, 6, lambda s, r, u: 10 + shifted.get(s["id"], 0) + rng.normal(0, 0.5))
    check = noise_check(header, cells, [METRIC], "auto")
    floor = check.metrics[METRIC]
    assert not check.passed and floor.excess
    assert len(floor.significant) == 6 and all(p.a in shifted or p.b in shifted for p in floor.significant)
    assert floor.largest.relative > 0.6 and check.floor >= floor.largest.relative
    text = verdict(check)
    assert text["level"] == "warning" and text["headline"].startswith("A/A check failed: ")
    assert "understate" in text["headline"] and "order = randomized" in text["details"][-1]
    short = summary(check)
    assert short["status"] == "fail" and short["line"].startswith("A/A check: fail, noise floor ")
    assert len(short["why"]) == 2 and short["why"][0].startswith("cells that cannot differ in behaviour differ ")
    assert short["why"][1] == "6 of 12 A/A pairs differ significantly (average success time; chance gives at most 3)"
    assert "order = randomized" in short["advice"]
    table = rows(check, {i: "a shifted one" for i in shifted})
    assert sum(r["significant"] for r in table) == 6
    assert all("a shifted one" in (r["a"], r["b"]) for r in table if r["significant"])
    assert all(r["method"] == "bootstrap" for r in table)                # 6 rounds: auto takes the bootstrap


def drifting(scenarios):
    """Each round of each cell meets its own conditions (the machine's load when it ran): an offset
    per cell and round, larger than the spread of the users within a round."""
    rng = np.random.default_rng(5)
    offsets = {(s["id"], r): rng.normal(0, 2) for s in scenarios for r in (1, 2)}
    return lambda s, r, u: 10 + offsets[s["id"], r] + rng.normal(0, 0.3)


def test_two_rounds_bootstrap_claims_differences_the_t_interval_does_not():
    header, scenarios = quickstart()
    cells = cells_with(scenarios, 2, drifting(scenarios))
    bootstrap = noise_check(header, cells, [METRIC], "bootstrap", resamples=500)
    honest = noise_check(header, cells, [METRIC], "auto")
    assert not bootstrap.passed
    assert len(honest.metrics[METRIC].significant) < len(bootstrap.metrics[METRIC].significant)
    assert honest.few_rounds == 10 and {p.method for p in honest.metrics[METRIC].pairs} == {"rounds-t"}
    # the honest floor is wide (t with one degree of freedom); the verdict says why
    assert honest.floor > bootstrap.metrics[METRIC].resolvable
    assert honest.too_noisy and verdict(honest)["headline"].startswith("A/A check passed, but too noisy to compare")
    assert summary(honest)["status"] == "noisy" and summary(honest)["line"].startswith("A/A check: noisy, noise floor")
    # the bootstrap's floor is not its narrow intervals but the largest A/A difference
    assert bootstrap.floor == bootstrap.metrics[METRIC].largest.relative > bootstrap.metrics[METRIC].resolvable
    assert any("t-intervals on the round medians" in line for line in verdict(honest)["details"])
    assert any("bootstrap ones" in line for line in verdict(bootstrap)["details"])


def test_welch_interval_of_identical_cells_is_centred_on_zero():
    a = [[1.0, 2.0, 3.0], [2.0, 3.0, 4.0], [3.0, 4.0, 5.0]]
    d = rounds_t_difference(a, a)
    assert d.difference == 0 and d.low < 0 < d.high and not d.significant
    # round medians 2, 3, 4 on both sides: se = sqrt(2/3), Welch df = 4, t = 2.776
    assert abs(d.high - 2.7764 * (2 / 3) ** 0.5) < 1e-3


def test_no_groups_and_no_rounds_are_unknown_not_passed():
    header, scenarios = quickstart()
    at_50 = [s for s in scenarios if s["fault"]["rate"] == 50]
    check = noise_check(header, cells_with(at_50, 3, lambda s, r, u: 10.0), [METRIC])
    assert verdict(check)["level"] == "unknown" and "no cells that must behave alike" in verdict(check)["headline"]
    one_round = noise_check(header, cells_with(scenarios, 1, lambda s, r, u: 10.0 + u), [METRIC])
    assert not one_round.measurable and one_round.floor is None
    assert "too few rounds" in verdict(one_round)["headline"]
    assert summary(check)["line"] == "A/A check: not measured, no noise floor (the plan has no cells that must behave alike)."
    assert summary(one_round)["line"] == ("A/A check: not measured, no noise floor (its cells have too few rounds for an "
                                          "interval).")
    # beside other work: still "not measured" (the plan's gap is not the machine's), the machine said apart
    busy = {"sessions": [{"otherWork": {"cores": 2, "otherCores": 1.1, "otherCoresPeak": 1.9, "seconds": 60}}]}
    shared = summary(noise_check(header, cells_with(at_50, 3, lambda s, r, u: 10.0), [METRIC], manifest=busy))
    assert shared["status"] == "shared" and "fail" not in shared["line"]
    assert shared["line"] == ("A/A check: not measured, no noise floor (the plan has no cells that must behave "
                              "alike); and this run shared its machine.")
    assert shared["why"] and "1.1" in shared["why"][0] and shared["advice"] == "give the run a machine of its own"


def test_the_figure_draws_one_interval_per_pair_and_colours_the_significant_ones():
    header, scenarios = quickstart()
    shifted = shifts(scenarios)
    rng = np.random.default_rng(5)
    cells = cells_with(scenarios, 6, lambda s, r, u: 10 + shifted.get(s["id"], 0) + rng.normal(0, 0.5))
    check = noise_check(header, cells, [METRIC, "totalExecutionTime"], "auto")
    figure = build_noise_figure(check)
    shown = [panel for panel in figure.panels if panel.visible and panel.has_data()]
    assert len(shown) == 1                      # totalExecutionTime has no values: no panel
    (ax,) = shown
    intervals = [s for s in ax.series if s.kind == "interval"]
    assert len(intervals) == 12 and all(len(s.xs) == 1 for s in intervals)        # one segment per pair
    red = [s for s in intervals if s.colour == "#d55e00"]
    assert len(red) == len(check.metrics[METRIC].significant) > 0
    assert "significant" in ax.title
    (floor,) = ax.spans                                                              # the band: +- the floor
    assert floor.end == -floor.start == pytest.approx(check.metrics[METRIC].floor * 100)


def test_a_few_significant_pairs_are_what_honest_intervals_give_by_chance():
    from rbl.report.noise import allowed_significant
    # P(X > k) <= 1% for X ~ Binomial(n, 5%)
    assert [allowed_significant(n) for n in (1, 12, 42, 84)] == [1, 3, 6, 9]
    header, scenarios = quickstart()
    one = next(iter(shifts(scenarios)))                   # one cell shifted: 2 of 12 pairs significant
    rng = np.random.default_rng(6)
    cells = cells_with(scenarios, 6, lambda s, r, u: 10 + (10 if s["id"] == one else 0) + rng.normal(0, 0.5))
    check = noise_check(header, cells, [METRIC], "auto")
    floor = check.metrics[METRIC]
    assert len(floor.significant) == 2 and not floor.excess
    text = verdict(check)
    assert "2 significant (within the 3 that 95% intervals give by chance)" in " ".join(text["details"])
    # the pair count alone lets it pass; the between-cell analysis sees the one cell apart in every round
    assert floor.drifted and not check.passed and text["level"] == "warning"


# ---- the between-cell analysis (rbl/report/cell_effects.py): alike cells against their own rounds ----

def test_f_survival_matches_the_printed_table():
    # upper 1% and 5% points of F
    for f, df1, df2, p in ((3.564, 8, 20, 0.01), (4.103, 2, 10, 0.05), (2.447, 8, 20, 0.05), (7.559, 2, 10, 0.01)):
        assert abs(f_survival(f, df1, df2) - p) < 2e-4
    assert f_survival(0.0, 3, 3) == 1.0 and f_survival(float("inf"), 3, 3) == 0.0


def test_groups_sharing_a_baseline_join_into_one_set():
    group = lambda library, ids: AAGroup(library, "svc", 5, "abort 0%", ids)
    sets = alike_sets([group("tenacity", ("base", "r1", "r2")), group("pybreaker", ("base", "b1")),
                       group("other", ("x", "y"))])
    assert sorted(sets) == [["b1", "base", "r1", "r2"], ["x", "y"]]


def cells_apart(scenarios, rounds: int, drift: float, seed: int) -> list[Cell]:
    """Each cell's rounds share a condition of its own (a neighbour busy while that cell ran, of
    typical size `drift` as a fraction), plus round-to-round variation of 5% and users' noise."""
    rng = np.random.default_rng(seed)
    cell_level = {s["id"]: rng.normal(0, drift) for s in scenarios}
    round_level = {(s["id"], r): rng.normal(0, 0.05) for s in scenarios for r in range(1, rounds + 1)}
    return cells_with(scenarios, rounds, lambda s, r, u: 10 * np.exp(cell_level[s["id"]] + round_level[(s["id"], r)]
                                                                     + rng.normal(0, 0.02)))


def test_alike_cells_that_only_vary_by_round_pass_at_about_the_nominal_rate():
    header, scenarios = quickstart()
    failed = 0
    for seed in range(200):
        check = noise_check(header, cells_apart(scenarios, 2, 0.0, seed), [METRIC], "auto", resamples=50)
        effects = check.metrics[METRIC].cell_effects
        assert effects.cells == 10 and (effects.df_between, effects.df_within) == (8, 10)
        failed += effects.significant
    assert failed <= 8                          # 1% nominal: 2 of 200 expected; 8 is P < 0.001


def test_two_rounds_of_cells_apart_fail_where_the_pairs_cannot():
    header, scenarios = quickstart()
    check = noise_check(header, cells_apart(scenarios, 2, 0.3, 7), [METRIC], "auto", resamples=50)
    floor = check.metrics[METRIC]
    assert not floor.excess                     # t with 1 degree of freedom: no pair is significant
    assert floor.drifted and not check.passed
    assert floor.cell_effects.ratio > 10 and floor.cell_effects.p_value < 0.01
    assert check.floor >= floor.largest.relative
    text = verdict(check)
    assert text["level"] == "warning" and text["headline"].startswith("A/A check failed: cells that cannot differ")
    assert "times more than their own rounds vary" in text["headline"]
    assert "order = sequential" in text["headline"] and "order = randomized" in text["details"][-1]


def test_the_verdict_names_the_order_the_run_went_in():
    header, scenarios = quickstart()
    check = noise_check(header, cells_apart(scenarios, 3, 0.3, 8), [METRIC], "auto", resamples=50,
                        manifest={"order": {"kind": "randomized", "seed": 1}})
    assert not check.passed and "even in order = randomized" in verdict(check)["headline"]


def test_a_cell_without_positive_values_is_left_out_of_the_log_scale():
    header, scenarios = quickstart()
    cells = cells_apart(scenarios, 3, 0.0, 9)
    zero = next(c for c in cells if c.scenario["fault"]["rate"] == 0 and c.client == "tenacity.retry")
    for round_rows in zero.rounds.values():
        for row in round_rows:
            row[METRIC] = 0.0
    effects = noise_check(header, cells, [METRIC], "auto", resamples=50).metrics[METRIC].cell_effects
    assert effects.cells == 9


def test_one_round_gives_nothing_to_compare():
    header, scenarios = quickstart()
    check = noise_check(header, cells_apart(scenarios, 1, 0.3, 10), [METRIC], "auto", resamples=50)
    assert check.metrics[METRIC].cell_effects is None and not check.measurable
