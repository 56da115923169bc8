"""`rbl report` on an open-loop run: a run directory built here as the runner leaves one (the plan
compiled from an open-loop spec, one results row per round with the overload metrics, the rounds'
requests as Parquet) gets the response-class, CDF and overload-metric figures, referenced in
report.html; the figures draw what the requests hold; a closed-loop run's report has none."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from rbl.compiler.expand import iter_scenario_lines
from rbl.compiler.pipeline import compile_source
from rbl.compiler.plan import plan_header
from rbl.report.cells import load_cells
from rbl.report.labels import Labeller
from rbl.report.overload_figures import (cdf_figure, class_figures, geometric, load_text, metrics_figure,
                                         overload_section, percentile_figure_plans, varying_conditions, x_axis)
from rbl.store.open_metrics import open_loop_metrics
from rbl.store.requests import REQUEST_SCHEMA, read_requests, write_round_requests
from rbl.store.results import RunDirectory
from rbl.store.run_checks import BASE_ROW_KEYS

from .conftest import run_rbl as rbl

SPEC = """space overload {
  rounds = 2
  load = open
  load.rate in [80%, 120%]
  load.duration = 6s
  load.warmup = 2s
  load.window = 2s
  load.slo = 50ms
  target = "/bytes/64"
  fault.kind = abort
  fault.status = 503
  fault.rate = 0%
  client tenacity.baseline {}
  client tenacity.retry {
    stop_after_attempt = 3
    wait = fixed
    wait_fixed in [2ms, 8ms]
  }
}
"""
RATE = 20                   # requests per second of the synthetic rounds
FAST = ("--resamples", "100")
OVERLOAD_FILES = {f"{stem}.{ext}" for stem in ("overload-classes", "overload-cdf", "overload-percentiles",
                                                "overload-metrics", "overload-tradeoff") for ext in ("svg",)}


def round_requests(scenario: dict, round_number: int) -> pa.Table:
    """One round: RATE req/s for the load's duration; above capacity, slower and some time out or
    are rejected (the figures must show the classes apart)."""
    load = scenario["load"]
    rng = random.Random(f"{scenario['id']}-{round_number}")
    over = load["rate"]["share"] > 1
    rows = []
    for seq in range(RATE * load["duration_s"]):
        t = seq / RATE
        draw = rng.random()
        cls = ("success" if draw < (0.7 if over else 0.95) else "timed_out" if draw < 0.85 else
               "rejected" if draw < 0.95 else "failed") if over else ("success" if draw < 0.95 else "failed")
        response = None if cls == "timed_out" else rng.uniform(30, 90) if over else rng.uniform(5, 20)
        rows.append({"seq": seq, "scheduled_s": t, "lag_ms": rng.uniform(0, 2), "response_ms": response,
                     "status": {"success": 200, "failed": 503}.get(cls, 0), "cls": cls,
                     "requests": 0 if cls == "rejected" else 1, "flags": "", "warmup": t < load["warmup_s"]})
    return pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA)


def round_row(scenario: dict, round_number: int, requests: pa.Table) -> dict:
    """The round's results row as the runner writes it (rbl/store/run_checks.OPEN_LOOP_ROW_KEYS): the
    columns every row has and the round's overload metrics, none of Table 2's."""
    load = scenario["load"]
    row = dict.fromkeys(BASE_ROW_KEYS)
    row.update({"userId": 1, "users": 1, "round": round_number, "scenarioId": scenario["id"],
                "scenarioIndex": scenario["index"], "client": scenario["client"], "lib": scenario["library"],
                "strategy": scenario["pattern"], "config": scenario["config"], "faultPercentage": 0,
                "faultType": "abort", "startTime": "t0", "endTime": "t1"})
    row.update(open_loop_metrics(requests, load["window_s"], load["slo_ms"],
                                 load["duration_s"] - load["warmup_s"], load["warmup_s"]))
    return row


def make_open_run(path: Path, shard=None) -> Path:
    """The run directory of SPEC as the runner leaves it; of one shard (a Shard) of it when given."""
    space = compile_source(SPEC, "overload.rbl").space
    lines = list(iter_scenario_lines(space))
    header = plan_header(space)
    # each session measured its own capacity (a cluster's pods do; merge keeps each)
    manifest = {"versions": {"tenacity": "1"}, "sessions": [{"status": "finished", "capacity": {
        "capacity_rps": 100.0 + (shard.index if shard else 0), "slo_ms": 100.0}}]}
    scenarios = [json.loads(line) for line in lines]
    if shard is not None:
        from rbl.store.run_order import rounds_per_scenario
        from rbl.store.shards import select
        chosen = select(shard, header, lambda: iter(scenarios), rounds_per_scenario(header))
        manifest.update(host={"hostname": f"host{shard.index}"}, shard=chosen.record)
        scenarios = [s for s in scenarios if s["id"] in chosen.ids]
    run = RunDirectory.create(path, header, lines, manifest)
    for scenario in scenarios:
        for round_number in (1, 2):
            requests = round_requests(scenario, round_number)
            write_round_requests(path, scenario["id"], round_number, requests)
            run.append_round([round_row(scenario, round_number, requests)])
    run.close()
    return path


@pytest.fixture(scope="module")
def open_run(tmp_path_factory) -> Path:
    return make_open_run(tmp_path_factory.mktemp("open") / "run")


@pytest.fixture(scope="module")
def reported(open_run):
    done = rbl("report", str(open_run), *FAST, cwd=open_run.parent)
    assert done.returncode == 0, done.stderr
    return done


def test_the_report_of_an_open_loop_run_has_the_overload_figures(open_run, reported):
    names = {p.name for p in (open_run / "report").iterdir()}
    assert OVERLOAD_FILES <= names
    # the overload metrics are the default ones, drawn against the offered load; with one fault rate
    # they get no figure of their own against it (dots at one x)
    assert not {"carriedThroughput.svg", "successP99Ms.svg", "p95UnderSloShare.svg"} & names
    html = (open_run / "report" / "report.html").read_text()
    for title in ("Response classes over time", "Response time CDF: successful requests, and all requests",
                  "Response time percentiles over time",
                  "Overload metrics against offered load (% of capacity)"):
        assert f"<h2>{title}" in html
    assert html.count('<img alt="') >= 3
    # the cell table's headers say what the figures say, the column's name kept as its tooltip
    assert '<th title="carriedThroughput">carried throughput (successes / offered) median' in html
    assert "Traceback" not in reported.stderr


def test_the_table_says_which_metrics_an_open_loop_round_does_not_measure(open_run, tmp_path):
    done = rbl("report", str(open_run), *FAST, "--metric", "successTimePerRequest", "--metric", "carriedThroughput",
               "-o", str(tmp_path / "r"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    cells = json.loads((tmp_path / "r" / "cells.json").read_text())
    assert len(cells) == 6 and all(c["successTimePerRequest.median"] is None for c in cells)
    assert all(0.5 < c["carriedThroughput.median"] <= 1 for c in cells)
    table = [line for line in done.stdout.splitlines() if line.startswith("│")]
    assert len(table) == 6 and all("not measured" in line for line in table)
    assert sum("80% of capacity" in line for line in table) == 3 and cells[0]["load"] == "80% of capacity, constant"


def test_the_figures_draw_the_requests(open_run):
    header, cells = load_cells(open_run, ["carriedThroughput"], resamples=50)
    labeller = Labeller(header)
    requests = read_requests(open_run)
    per_cell = {c.scenario["id"]: requests.filter(pa.compute.equal(requests.column("scenario"), c.scenario["id"]))
                for c in cells}
    varying = varying_conditions(cells)
    assert varying == {"load"}
    # classes: a row per configuration, a column per load; the warm-up shaded in each panel
    ((_, stem, classes),) = list(class_figures(header, cells, per_cell, labeller, varying))
    panels = [ax for ax in classes.panels if ax.has_data()]
    assert stem == "overload-classes" and len(panels) == 6
    assert {ax.title.split("\n")[1] for ax in panels} == {"load 80% of capacity, constant",
                                                          "load 120% of capacity, constant"}
    for ax in panels:
        (shade,) = [span for span in ax.spans if span.label == "warm-up (not measured)"]
        assert (shade.start, shade.end) == (0, 2) and shade.front
    # stacked classes, mean per round: the top of the stack is the offered rate in every bin
    (stack,) = [s for s in panels[0].series if s.kind == "stack"]
    assert [name for _, _, name in stack.layers] == ["success", "failed", "circuit broken", "timed out", "rejected"]
    tops = [sum(values) for values in zip(*(layer for layer, _, _ in stack.layers))]
    assert max(tops) == pytest.approx(RATE) and stack.step
    # CDF: a column per load, successes above and all requests below, a line per configuration, log x
    cdf = cdf_figure(header, cells, per_cell, labeller, varying)
    assert [ax.xscale for ax in cdf.panels] == ["log"] * 4
    assert [len(ax.series) for ax in cdf.panels] == [3] * 4
    over = [ax for ax in cdf.panels if "120%" in ax.title][0]
    assert max(max(line.xs) for line in over.series) > 30     # the overloaded ones are slower
    successes, every = cdf.panels[0], cdf.panels[2]                            # the same load, both rows
    assert "successful" in successes.ylabel and "all requests" in every.ylabel
    for ours, all_of_them in zip(successes.series, every.series):
        assert ours.ys[-1] == pytest.approx(1.0)                  # every success answered
        assert 0 < all_of_them.ys[-1] <= 1.0
        assert len(all_of_them.xs) >= len(ours.xs)        # refusals answered too
    # percentiles per window: p50 <= p95 <= p99 in every window of every panel, log y
    (make,) = percentile_figure_plans(header, cells, per_cell, labeller, varying)
    _, stem, percentiles = make()
    assert stem == "overload-percentiles"
    drawn = [ax for ax in percentiles.panels if ax.has_data()]
    assert len(drawn) == 6 and all(ax.yscale == "log" for ax in drawn)
    for ax in drawn:
        by_name = {line.label: list(line.ys) for line in ax.series}
        assert set(by_name) == {"p50", "p95", "p99"}, by_name
        assert all(a <= b <= c for a, b, c in zip(by_name["p50"], by_name["p95"], by_name["p99"]))
    # metrics: the load on x, a line per configuration, medians of the rounds' rows
    title, _, parameter = x_axis(cells)
    assert (title, parameter) == ("offered load (% of capacity)", None)
    _, _, figure = metrics_figure(header, cells, per_cell, labeller, varying)
    throughput = figure.panels[0]
    assert throughput.ylabel.startswith("carried throughput")
    lines = {bars.label: bars for bars in throughput.series if bars.kind == "errorbar"}  # a line with its bars
    assert len(lines) == 3 and all(list(line.xs) == [80.0, 120.0] for line in lines.values())
    assert all(low <= median <= high for line in lines.values()
               for low, median, high in zip(line.lows, line.ys, line.highs))
    assert throughput.xscale == "linear"              # 80 and 120 are steps, not factors
    baseline = [c for c in cells if c.pattern == "baseline"]
    expected = [sorted(r[0]["carriedThroughput"] for r in c.rounds.values()) for c in
                sorted(baseline, key=lambda c: c.scenario["load"]["rate"]["share"])]
    assert list(lines["tenacity.baseline"].ys) == pytest.approx([sum(v) / 2 for v in expected])
    assert expected[1][1] < expected[0][0]                 # above capacity less is carried


def test_the_pareto_front_is_what_nothing_beats_on_both():
    from rbl.report.tradeoff_figure import pareto_front
    points = [(1.0, 500.0), (0.7, 100.0), (0.9, 600.0), (0.7, 50.0), (1.0, 500.0)]
    # (0.9, 600) is beaten by (1.0, 500) on both; (0.7, 100) by (0.7, 50) on p99 at the same throughput;
    # two equal points do not beat each other
    assert pareto_front(points) == [3, 0, 4]
    assert pareto_front([]) == [] and pareto_front([(0.5, 10.0)]) == [0]


def test_the_trade_off_figure_marks_the_front_per_load(open_run):
    from rbl.report.overload_figures import _tradeoff, varying_conditions
    from rbl.report.tradeoff_figure import pareto_front
    header, cells = load_cells(open_run, ["carriedThroughput"], resamples=50)
    table = read_requests(open_run, [c.scenario["id"] for c in cells])
    per_cell = {c.scenario["id"]: table.filter(pc.equal(table.column("scenario"), c.scenario["id"])) for c in cells}
    _, stem, figure = _tradeoff(header, cells, per_cell, Labeller(header), varying_conditions(cells))
    assert stem == "overload-tradeoff"
    panels = [ax for ax in figure.panels if ax.has_data()]
    assert len(panels) == 2 and all(ax.yscale == "log" for ax in panels)      # one panel per load
    for ax in panels:
        drawn = [s for s in ax.series if s.kind == "points"]
        points = [(s.xs[0], s.ys[0]) for s in drawn]
        assert len(points) == 3                                                        # one per configuration
        filled = [i for i, s in enumerate(drawn) if not s.hollow]
        assert sorted(filled) == sorted(pareto_front(points))


def test_only_the_counted_rounds_are_drawn(open_run, tmp_path):
    header, cells = load_cells(open_run, ["carriedThroughput"], resamples=50)
    for cell in cells:
        cell.rounds.pop(2)                                 # as if round 2 had failed everywhere
    figures, files = overload_section(open_run, header, cells, tmp_path)
    assert len(figures) == 5 and {p.name for p in files} == OVERLOAD_FILES


@pytest.mark.parametrize("values, log", [([1, 20, 1024], True), ([10, 100], True), ([80, 120], False),
                                         ([0, 10, 100], False), ([5], False), (list(range(1, 11)), False)])
def test_a_sweep_spaced_by_factors_gets_a_log_axis(values, log):
    assert geometric(sorted(values)) is log


def test_load_text_tolerates_absent_keys():
    assert load_text({}) == ""
    assert load_text({"load": {}}) == "load ?"
    assert load_text({"load": {"rate": {"rps": 200}, "profile": {"kind": "spikes", "peak": {"share": 1.4}}}}) == \
        "load 200 req/s, spikes to 140% of capacity"


def test_a_closed_loop_run_has_no_overload_figures(tmp_path):
    from .test_run_dir_hostile import make_run
    run = make_run(tmp_path / "closed")
    done = rbl("report", str(run), *FAST, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    names = {p.name for p in (run / "report").iterdir()}
    assert not any(name.startswith("overload-") for name in names)
    assert {"successTimePerRequest.svg", "totalExecutionTime.svg"} <= names
    html = (run / "report" / "report.html").read_text()
    assert "Response classes over time" not in html
    table = [line for line in done.stdout.splitlines() if line.startswith(("┃", "│"))]
    assert table and not any("not measured" in line or "load" in line for line in table)
    assert all("load" not in record for record in json.loads((run / "report" / "cells.json").read_text()))


def test_diff_compares_open_loop_runs_on_the_overload_metrics_cell_by_load(open_run, tmp_path):
    done = rbl("diff", str(open_run), str(open_run), "--format", "json", "-o", str(tmp_path / "d"), *FAST,
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    cells = json.loads(done.stdout)["cells"]
    assert {c["metric"] for c in cells} == {"carriedThroughput", "successP99Ms", "p95UnderSloShare"}
    # 6 scenarios (two loads x three configurations), each its own cell: the loads are not merged
    assert len(cells) == 6 * 3 and all(c["difference"] in (0, None) for c in cells)


def test_merged_open_loop_shards_keep_their_requests_and_report_them(open_run, tmp_path):
    """Before: `rbl merge` of open-loop shards exited 0 with no requests/ in the merged run, whose
    report then fell back to the closed-loop metrics, all "not measured"."""
    from rbl.store.shards import Shard
    shards = [make_open_run(tmp_path / f"S{k}", Shard(k, 2)) for k in range(2)]
    done = rbl("merge", *map(str, shards), "-o", str(tmp_path / "M"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "M" / "manifest.json").read_text())
    assert [session["capacity"]["capacity_rps"] for shard in manifest["shards"] for session in shard["sessions"]] == \
        [100.0, 101.0]                                            # each shard's own measurement, kept
    merged, whole = read_requests(tmp_path / "M"), read_requests(open_run)
    assert merged.num_rows == whole.num_rows > 0
    assert merged.sort_by([("scenario", "ascending"), ("round", "ascending"), ("seq", "ascending")]).equals(
        whole.sort_by([("scenario", "ascending"), ("round", "ascending"), ("seq", "ascending")]))
    done = rbl("report", str(tmp_path / "M"), *FAST, "-o", str(tmp_path / "r"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert OVERLOAD_FILES <= {p.name for p in (tmp_path / "r").iterdir()}
    cells = json.loads((tmp_path / "r" / "cells.json").read_text())
    assert len(cells) == 6 and all(0.5 < c["carriedThroughput.median"] <= 1 for c in cells)


def test_a_merged_open_loop_round_without_its_requests_is_a_gap(tmp_path):
    from rbl.store.requests import round_path
    from rbl.store.shards import Shard
    shards = [make_open_run(tmp_path / f"S{k}", Shard(k, 2)) for k in range(2)]
    scenario_id = next(p.name for p in (shards[0] / "requests").iterdir())
    round_path(shards[0], scenario_id, 2).unlink()
    done = rbl("merge", *map(str, shards), "-o", str(tmp_path / "M"), cwd=tmp_path)
    assert done.returncode == 3 and not (tmp_path / "M").exists(), done.stderr
    assert f"requests/{scenario_id}/round-2.parquet is missing" in done.stderr
    assert f"({scenario_id}," in done.stderr and "round 2 missing" in done.stderr
    done = rbl("merge", *map(str, shards), "-o", str(tmp_path / "M"), "--allow-gaps", cwd=tmp_path)
    assert done.returncode == 3 and not round_path(tmp_path / "M", scenario_id, 2).exists()
    assert round_path(tmp_path / "M", scenario_id, 1).is_file()
