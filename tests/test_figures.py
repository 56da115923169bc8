"""The report's figures read from what they hold (rbl/report/chart/model.py), on a real run of the quickstart: every
client of the run is in the same panel (one per user count) with one y scale, each configuration
has its own colour (the same in every panel), the baseline is dashed, one legend carries units,
every point has a marker; with one fault rate the x axis is what the run sweeps instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from rbl.report.cells import load_cells
from rbl.report.chart.axes import panel_axes
from rbl.report.chart.svg import render
from rbl.report.figures import PALETTE, build_figure, figure_facts

from .conftest import run_rbl as rbl

QUICKSTART = Path(__file__).resolve().parent.parent / "examples" / "quickstart.rbl"
METRICS = ["totalExecutionTime", "successTimePerRequest"]


@pytest.fixture(scope="module")
def figure(tmp_path_factory):
    work = tmp_path_factory.mktemp("figures")
    done = rbl("run", QUICKSTART, "--rounds", "2", "--set", "successes=4", "-o", "run", cwd=work)
    assert done.returncode == 0, done.stderr
    header, cells = load_cells(work / "run", METRICS, resamples=200)
    return build_figure(header, cells, "totalExecutionTime")


def data_lines(ax):
    return [s for s in ax.series if s.kind == "line" and s.label and not s.label.startswith("_")]


def test_every_client_is_in_each_panel_with_its_own_colour_the_same_in_every_panel(figure):
    assert [ax.title for ax in figure.panels] == ["5 users", "10 users"]
    colours_by_label = {}
    for ax in figure.panels:
        labels = [line.label for line in data_lines(ax)]
        assert any(label.startswith("tenacity.retry") for label in labels)
        assert any(label.startswith("pybreaker.circuit_breaker") for label in labels)
        own = [line for line in data_lines(ax) if "baseline" not in line.label]
        colours = [line.colour.lower() for line in own]
        assert len(colours) == len(set(colours)) == 4, colours      # two retries and two breakers
        assert set(colours) <= {c.lower() for c in PALETTE}
        for line in own:
            colours_by_label.setdefault(line.label, set()).add(line.colour.lower())
    assert all(len(colours) == 1 for colours in colours_by_label.values()), colours_by_label


def test_all_panels_share_one_y_axis(figure):
    assert figure.sharey
    (_, left), (_, right) = panel_axes(figure)
    assert (left.low, left.high) == (right.low, right.high)
    shown = [y for ax in figure.panels for s in ax.series for y in [*s.ys, *(s.highs or [])]]
    assert left.low <= min(shown) and max(shown) <= left.high          # each panel's data, on the one scale


def test_the_baseline_is_dashed_in_every_panel(figure):
    for ax in figure.panels:
        baselines = [line for line in data_lines(ax) if "tenacity.baseline" in line.label]
        assert len(baselines) == 1
        assert baselines[0].dash == "--"
        assert list(baselines[0].xs) == [0, 50]


def test_one_legend_names_configurations_with_units(figure):
    assert figure.legend is not None and figure.legend.title == "configurations"
    texts = [name for name, _ in figure.legend_entries()]
    assert len(texts) == len(set(texts))                               # each configuration once
    assert "tenacity.retry multiplier=5ms" in texts and "tenacity.retry multiplier=10ms" in texts
    assert "pybreaker.circuit_breaker reset_timeout=20ms" in texts and "tenacity.baseline" in texts
    assert not any("0.005" in t or "0.02" in t for t in texts)
    assert figure.panels[0].ylabel == "total execution time (ms)"
    svg = render(figure).text
    assert svg.count(">tenacity.retry multiplier=5ms<") == 1 and ">total execution time (ms)<" in svg


@pytest.mark.parametrize("fault, users, against", [("50%", "5", "virtual users"), ("50%", None, None)])
def test_with_one_fault_rate_the_x_axis_is_what_the_run_sweeps(tmp_path, fault, users, against):
    """One fault rate and two user counts: users on x; one of each: a row per configuration, the
    metric on x. Never an axis with one value."""
    overrides = ["--set", f"fault.rate={fault}"] + (["--users", "5,10"] if users else ["--users", "5"])
    done = rbl("run", QUICKSTART, "--rounds", "2", "--set", "successes=3", *overrides, "-o", "run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    header, cells = load_cells(tmp_path / "run", METRICS, resamples=100)
    figure = build_figure(header, cells, "totalExecutionTime")
    (ax,) = figure.panels
    facts = figure_facts(figure)
    if against:
        assert ax.xlabel == against and sorted({x for line in data_lines(ax) for x in line.xs}) == [5, 10]
    else:
        assert ax.xlabel == "total execution time (ms)"
        assert ax.yticks.labels[0] == "tenacity.baseline"
        assert len(ax.yticks.values) == len(cells) == 5                 # baseline, 2 retries, 2 breakers
    assert all(panel["x_values"] > 1 for panel in facts["panels"]), facts


def test_every_point_has_a_marker(figure):
    for ax in figure.panels:
        for line in data_lines(ax):
            assert line.marker
            assert line.size >= 4
    markers = {line.marker for line in data_lines(figure.panels[0]) if "retry" in line.label}
    assert len(markers) == 2                                             # told apart in greyscale too
    assert list(figure.panels[0].xticks.values) == [0, 50]              # ticks at the rates that ran
