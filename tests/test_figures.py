"""The report's figures read by their matplotlib artists, on a real run of the quickstart: each
configuration has its own colour (the same in every panel of its row), panels of a row share their
y axis, the baseline is in every panel, legends carry units, and every point has a marker."""

from __future__ import annotations

from pathlib import Path

import matplotlib.colors as mcolors
import pytest

from rbl.report.cells import load_cells
from rbl.report.figures import PALETTE, build_figure

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


def panels(figure):
    """rows of axes: tenacity (5, 10 users), pybreaker (5, 10 users)"""
    axes = figure.axes
    return [axes[0:2], axes[2:4]]


def data_lines(ax):
    return [line for line in ax.get_lines() if not line.get_label().startswith("_")]


def test_every_configuration_has_its_own_colour_the_same_across_its_row(figure):
    for row in panels(figure):
        colours_by_label = {}
        for ax in row:
            own = [line for line in data_lines(ax) if "baseline" not in line.get_label()]
            colours = [mcolors.to_hex(line.get_color()) for line in own]
            assert len(colours) == len(set(colours)) == 2, colours      # two configurations, two colours
            assert set(colours) <= {c.lower() for c in PALETTE}
            for line in own:
                colours_by_label.setdefault(line.get_label(), set()).add(mcolors.to_hex(line.get_color()))
        assert all(len(colours) == 1 for colours in colours_by_label.values()), colours_by_label


def test_panels_of_a_row_share_their_y_axis(figure):
    for left, right in panels(figure):
        assert left.get_shared_y_axes().joined(left, right)
        assert left.get_ylim() == right.get_ylim()
    top, bottom = panels(figure)
    assert not top[0].get_shared_y_axes().joined(top[0], bottom[0])     # rows scale on their own


def test_the_baseline_is_in_every_panel(figure):
    for row in panels(figure):
        for ax in row:
            baselines = [line for line in data_lines(ax) if "tenacity.baseline" in line.get_label()]
            assert len(baselines) == 1
            assert baselines[0].get_linestyle() == "--"
            assert list(baselines[0].get_xdata()) == [0, 50]
    pybreaker = panels(figure)[1][0]
    assert [line.get_label() for line in data_lines(pybreaker) if "baseline" in line.get_label()] == [
        "tenacity.baseline (reference)"]


def test_legends_name_configurations_with_units(figure):
    legends = [ax.get_legend() for ax in figure.axes if ax.get_legend() is not None]
    assert len(legends) == 2                                             # one per row
    texts = [t.get_text() for legend in legends for t in legend.get_texts()]
    assert "tenacity.retry multiplier=5ms" in texts and "tenacity.retry multiplier=10ms" in texts
    assert "pybreaker.circuit_breaker reset_timeout=20ms" in texts
    assert not any("0.005" in t or "0.02" in t for t in texts)
    assert figure.axes[0].get_ylabel() == "total execution time (ms)"


def test_every_point_has_a_marker(figure):
    for ax in figure.axes:
        for line in data_lines(ax):
            assert line.get_marker() not in (None, "", "None", " ")
            assert line.get_markersize() >= 4
    markers = {line.get_marker() for line in data_lines(figure.axes[0]) if "retry" in line.get_label()}
    assert len(markers) == 2                                             # told apart in greyscale too
    assert list(figure.axes[0].get_xticks()) == [0, 50]                 # ticks at the rates that ran
