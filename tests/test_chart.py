"""rbl's own figures (rbl/report/chart/): ticks at round values and
plain numbers on log axes, shared scales, every text inside the figure and legible, legends that fit,
markers told apart, and an SVG that parses with its text kept as text."""

from __future__ import annotations

import re
from xml.etree import ElementTree

import pytest

from rbl.report.chart.model import Chart, Ticks
from rbl.report.chart.axes import panel_axes
from rbl.report.chart.marks import marker
from rbl.report.chart.svg import chart_facts, render
from rbl.report.chart.text import text_width
from rbl.report.chart.ticks import data_range, linear_ticks, log_ticks, tick_text

SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize("low, high, expected", [
    (0, 1, [0, 0.2, 0.4, 0.6, 0.8, 1.0]), (0, 100, [0, 20, 40, 60, 80, 100]), (-3, 3, [-2, 0, 2]),
    (0.79, 1.01, [0.8, 0.85, 0.9, 0.95, 1.0]), (0, 24, [0, 5, 10, 15, 20]), (97, 103, [98, 100, 102])])
def test_linear_ticks_are_round_values_inside_the_range(low, high, expected):
    assert linear_ticks(low, high) == pytest.approx(expected)


def test_log_ticks_are_powers_of_ten_with_2s_and_5s_when_narrow():
    major, minor = log_ticks(15, 600)                   # under three decades: 20, 50, 100, 200, 500 labelled
    assert major == [20, 50, 100, 200, 500] and 30 in minor and 300 in minor
    major, minor = log_ticks(0.4, 1000)                 # wider: only the powers of ten, the rest unlabelled
    assert major == [1, 10, 100, 1000] and 2 in minor and 500 in minor
    major, _ = log_ticks(3, 8)                           # under a decade: every step labelled, never one tick
    assert major == [3, 4, 5, 6, 7, 8]


@pytest.mark.parametrize("value, text", [(0, "0"), (20, "20"), (0.25, "0.25"), (1024, "1024"), (1e6, "1000000"),
                                         (2.5e-5, "0.000025"), (-3, "-3")])
def test_tick_labels_are_plain_numbers(value, text):
    assert tick_text(value) == text


def test_ranges_have_margins_and_never_collapse():
    assert data_range([10, 20], log=False) == pytest.approx((9.5, 20.5))
    assert data_range([0, 5], log=False, from_zero=True)[0] == 0                  # stacks grow from 0, no margin below
    low, high = data_range([7, 7], log=False)
    assert low < 7 < high
    low, high = data_range([100, 100], log=True)
    assert low < 100 < high and low > 0
    assert data_range([0, -1, float("nan")], log=True) == (1.0, 10.0)            # nothing a log axis can show


def two_panels(sharey: bool) -> Chart:
    chart = Chart(6, 3, title="two panels")
    left, right = chart.grid(1, 2, sharey=sharey)[0]
    left.line([0, 1, 2], [1, 2, 3], "#4477AA", marker="o", label="a")
    right.line([0, 1, 2], [10, 20, 30], "#EE6677", marker="s", label="b")
    return chart


def test_a_shared_y_axis_is_one_scale_and_an_unshared_one_is_each_panels_own():
    (_, left), (_, right) = panel_axes(two_panels(sharey=True))
    assert (left.low, left.high) == (right.low, right.high) and left.low < 1 and right.high > 30
    (_, left), (_, right) = panel_axes(two_panels(sharey=False))
    assert left.high < right.low                                  # each its own: apart


def texts(svg: str) -> list[ElementTree.Element]:
    return list(ElementTree.fromstring(svg).iter(f"{SVG}text"))


@pytest.mark.parametrize("where", ["right", "top", "bottom"])
def test_every_text_is_inside_the_figure_and_the_legend_fits(where):
    chart = Chart(5, 3, title="a figure with a long legend")
    (panel,) = chart.grid(1, 1)[0]
    names = [f"configuration number {i} with a long name" for i in range(6)]
    for i, name in enumerate(names):
        panel.line([1, 10, 100], [i, i + 1, i + 2], "#333333", label=name)
    panel.xscale, panel.xlabel, panel.ylabel = "log", "offered load (log)", "two\nlines"
    chart.add_legend(where, columns=6)
    svg = render(chart).text
    width_pt = 5 * 72
    for text in texts(svg):
        for span in text.iter(f"{SVG}tspan"):
            x, size = float(span.get("x")), float(text.get("font-size"))
            extent = text_width(span.text, size)
            anchor = text.get("text-anchor")
            left = x - (extent if anchor == "end" else extent / 2 if anchor == "middle" else 0)
            if text.get("transform") is None:
                assert -1 <= left and left + extent <= width_pt + 1, (span.text, left, extent)
    shown = ["".join(t.itertext()) for t in texts(svg)]
    assert all(name in shown for name in names)                 # every entry drawn, wrapped into rows if needed


def test_facts_count_x_values_and_the_smallest_text():
    chart = two_panels(sharey=True)
    facts = chart_facts(chart)
    assert facts["panels"] == [{"x_label": "", "x_scale": "linear", "x_values": 3}] * 2
    assert facts["width_in"] == 6 and facts["smallest_text_pt"] == 8
    chart.panels[1].visible = False
    assert len(chart_facts(chart)["panels"]) == 1                 # a hidden panel is not shown


def test_the_svg_parses_keeps_text_as_text_and_escapes_it():
    chart = two_panels(sharey=True)
    chart.panels[0].title = "p99 < 100 ms & more"
    chart.panels[0].note(0.5, 0.5, "1 hollow: too few rounds", colour="#aa0000")
    chart.add_legend("right", title="configurations")
    root = ElementTree.fromstring(render(chart).text)
    assert root.tag == f"{SVG}svg" and root.get("viewBox") == "0 0 432.0 216.0"
    shown = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    assert "p99 < 100 ms & more" in shown and "configurations" in shown and "1 hollow: too few rounds" in shown
    assert "two panels" in shown and {"a", "b"} <= set(shown)


def test_log_axes_draw_values_at_or_below_zero_at_the_floor_not_outside():
    chart = Chart(4, 3)
    (panel,) = chart.grid(1, 1)[0]
    panel.yscale = "log"
    panel.line([0, 1, 2], [0.0, 10, 100], "#000000")
    svg = render(chart).text
    (path,) = [p for p in ElementTree.fromstring(svg).iter(f"{SVG}path") if p.get("stroke") == "#000000"]
    ys = [float(y) for y in re.findall(r"[\d.]+,([\d.]+)", path.get("d"))]
    ((_, y_axis),) = panel_axes(chart)
    assert max(ys) <= 3 * 72 and y_axis.low > 0


def test_explicit_ticks_and_categorical_rows():
    chart = Chart(5, 2)
    (panel,) = chart.grid(1, 1)[0]
    panel.interval([1, 2], [3, 4], [0, 1], "#4477AA")
    panel.points([2, 3], [0, 1], "#4477AA", marker="D")
    panel.yticks = Ticks([0, 1], ["first configuration", "second"])
    panel.invert_y = True
    panel.xticks = Ticks([1, 2, 4])
    ((x_axis, y_axis),) = panel_axes(chart)
    assert x_axis.labels == ["1", "2", "4"] and y_axis.labels == ["first configuration", "second"]
    shown = ["".join(t.itertext()) for t in texts(render(chart).text)]
    assert "first configuration" in shown and "4" in shown
    assert chart_facts(chart)["panels"][0]["x_values"] == 4            # 1, 2, 3, 4 from the intervals and points


@pytest.mark.parametrize("kind", ["o", "s", "^", "v", "<", ">", "D", "P", "X", "h"])
def test_markers_differ_in_shape_and_hollow_ones_are_white_inside(kind):
    drawn = marker(kind, 10, 10, 6, "#4477AA")
    others = {marker(k, 10, 10, 6, "#4477AA") for k in ["o", "s", "^", "v", "<", ">", "D", "P", "X", "h"] if k != kind}
    assert drawn not in others
    assert 'fill="#ffffff"' in marker(kind, 10, 10, 6, "#4477AA", hollow=True) and 'fill="#4477AA"' in drawn


def test_a_short_log_panel_labels_only_its_powers_of_ten():
    def labels(height_in: float) -> list[str]:
        chart = Chart(6, height_in)
        (panel,) = chart.grid(1, 1)[0]
        panel.yscale = "log"
        panel.line([0, 1, 2], [1000, 40, 5], "#000000")
        svg = render(chart).text
        return re.findall(r'text-anchor="end"><tspan[^>]*>([^<]*)</tspan>', svg)
    assert labels(4) == ["5", "10", "20", "50", "100", "200", "500", "1000"]     # room for every one
    assert labels(1.4) == ["10", "100", "1000"]                                   # else the decades only
