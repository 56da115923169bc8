"""The report's figures read by their matplotlib artists, on a real run of the quickstart: every
client of the run is in the same panel (one per user count) with one y scale, each configuration
has its own colour (the same in every panel), the baseline is dashed, one legend carries units,
every point has a marker; with one fault rate the x axis is what the run sweeps instead."""

from __future__ import annotations

from pathlib import Path

import matplotlib.colors as mcolors
import pytest

from rbl.report.cells import load_cells
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
    return [line for line in ax.get_lines() if not line.get_label().startswith("_")]


def test_every_client_is_in_each_panel_with_its_own_colour_the_same_in_every_panel(figure):
    assert [ax.get_title() for ax in figure.axes] == ["5 users", "10 users"]
    colours_by_label = {}
    for ax in figure.axes:
        labels = [line.get_label() for line in data_lines(ax)]
        assert any(label.startswith("tenacity.retry") for label in labels)
        assert any(label.startswith("pybreaker.circuit_breaker") for label in labels)
        own = [line for line in data_lines(ax) if "baseline" not in line.get_label()]
        colours = [mcolors.to_hex(line.get_color()) for line in own]
        assert len(colours) == len(set(colours)) == 4, colours      # two retries and two breakers
        assert set(colours) <= {c.lower() for c in PALETTE}
        for line in own:
            colours_by_label.setdefault(line.get_label(), set()).add(mcolors.to_hex(line.get_color()))
    assert all(len(colours) == 1 for colours in colours_by_label.values()), colours_by_label


def test_all_panels_share_one_y_axis(figure):
    left, right = figure.axes
    assert left.get_shared_y_axes().joined(left, right)
    assert left.get_ylim() == right.get_ylim()


def test_the_baseline_is_dashed_in_every_panel(figure):
    for ax in figure.axes:
        baselines = [line for line in data_lines(ax) if "tenacity.baseline" in line.get_label()]
        assert len(baselines) == 1
        assert baselines[0].get_linestyle() == "--"
        assert list(baselines[0].get_xdata()) == [0, 50]


def test_one_legend_names_configurations_with_units(figure):
    legends = [ax.get_legend() for ax in figure.axes if ax.get_legend() is not None]
    assert len(legends) == 1
    texts = [t.get_text() for t in legends[0].get_texts()]
    assert "tenacity.retry multiplier=5ms" in texts and "tenacity.retry multiplier=10ms" in texts
    assert "pybreaker.circuit_breaker reset_timeout=20ms" in texts and "tenacity.baseline" in texts
    assert not any("0.005" in t or "0.02" in t for t in texts)
    assert figure.axes[0].get_ylabel() == "total execution time (ms)"


@pytest.mark.parametrize("fault, users, against", [("50%", "5", "virtual users"), ("50%", None, None)])
def test_with_one_fault_rate_the_x_axis_is_what_the_run_sweeps(tmp_path, fault, users, against):
    """One fault rate and two user counts: users on x; one of each: a row per configuration, the
    metric on x. Never an axis with one value."""
    overrides = ["--set", f"fault.rate={fault}"] + (["--users", "5,10"] if users else ["--users", "5"])
    done = rbl("run", QUICKSTART, "--rounds", "2", "--set", "successes=3", *overrides, "-o", "run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    header, cells = load_cells(tmp_path / "run", METRICS, resamples=100)
    figure = build_figure(header, cells, "totalExecutionTime")
    (ax,) = figure.axes
    facts = figure_facts(figure)
    if against:
        assert ax.get_xlabel() == against and sorted({x for line in data_lines(ax) for x in line.get_xdata()}) == [5, 10]
    else:
        assert ax.get_xlabel() == "total execution time (ms)"
        assert [t.get_text() for t in ax.get_yticklabels()][0] == "tenacity.baseline"
        assert len(ax.get_yticks()) == len(cells) == 5                 # baseline, 2 retries, 2 breakers
    assert all(panel["x_values"] > 1 for panel in facts["panels"]), facts


def test_every_point_has_a_marker(figure):
    for ax in figure.axes:
        for line in data_lines(ax):
            assert line.get_marker() not in (None, "", "None", " ")
            assert line.get_markersize() >= 4
    markers = {line.get_marker() for line in data_lines(figure.axes[0]) if "retry" in line.get_label()}
    assert len(markers) == 2                                             # told apart in greyscale too
    assert list(figure.axes[0].get_xticks()) == [0, 50]                 # ticks at the rates that ran
