"""A metric's figure, after the seed paper's Figures 4 and 5: the metric against the axis the run
sweeps, one line per client configuration with its 95% band. Every client of the run, library or
mesh, is in the same panel with one y scale, so they compare by eye; one panel per user count.
The x axis is the fault rate when the run sweeps it; else the user count; else (one fault rate,
one user count) the configurations themselves, one row each. Each configuration has its own
colour and marker (a colour-blind-safe palette), the same in every panel, explained in one legend
with units. Cells that failed are left out and counted in the panel; cells with too few rounds for
an interval (a quick `--rounds 1` run) are drawn hollow, without a band, and counted too: never
drawn as if they were measurements to compare."""

from __future__ import annotations

import math
from pathlib import Path

from .chart.model import Chart, Panel, Ticks
from .chart.svg import chart_facts, write_chart
from .cells import METRIC_TITLES, Cell
from .labels import Labeller, plural

THIN = "too few observations"             # Cell.status of a cell with a median but no interval

# Paul Tol's "bright" and "muted" qualitative schemes: distinguishable with the common colour
# vision deficiencies; the markers differ too, so lines stay apart in greyscale print.
# Ordered so that the first ten are far apart (the muted greens and yellows come last).
PALETTE = ("#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE", "#AA3377",
           "#332288", "#882255", "#44AA99", "#999933", "#117733", "#DDCC77", "#CC6677", "#88CCEE")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
BASELINE_COLOUR = "#333333"
# The report shows a figure at most this wide (its page's width at 1280 px), so a figure's smallest
# text, in points, must be at least 0.6 x its width in inches to stay 10 px on screen (rbl/report
# tests check every figure): 8-pt text allows 13.3 inches. SMALLEST_TEXT_PT is rbl/report/chart/model.py's.
PANEL_COLUMNS = 3


def _configuration_styles(cells: list[Cell], labeller: Labeller) -> dict[str, tuple[str, str]]:
    """label -> (colour, marker), in plan order; baselines dashed and dark, told apart by marker."""
    styles: dict[str, tuple[str, str]] = {}
    baselines = 0
    for cell in cells:
        label = labeller.label(cell.scenario)
        if label in styles:
            continue
        if cell.pattern == "baseline":
            styles[label] = (BASELINE_COLOUR, MARKERS[baselines % len(MARKERS)])
            baselines += 1
        else:
            n = len(styles) - baselines
            styles[label] = (PALETTE[n % len(PALETTE)], MARKERS[(n + n // len(PALETTE)) % len(MARKERS)])
    return styles


def swept_axis(cells: list[Cell]) -> str:
    """What a metric is drawn against: "fault" (the run sweeps fault rates), "users" (one fault
    rate, several user counts) or "configuration" (neither varies)."""
    if len({c.fault_rate for c in cells}) > 1:
        return "fault"
    return "users" if len({c.users for c in cells}) > 1 else "configuration"


def build_figure(header: dict, cells: list[Cell], metric: str) -> Chart:
    labeller = Labeller(header)
    # a metric only some clients have (a mesh client's sidecar counters): the others are left out
    measured = {c.library for c in cells if c.estimates.get(metric) and c.estimates[metric].median is not None}
    cells = [c for c in cells if c.library in measured or not measured]
    title = METRIC_TITLES.get(metric, metric)
    against = swept_axis(cells)
    if against == "configuration":
        return _configuration_figure(header, cells, metric, labeller, title)
    styles = _configuration_styles(cells, labeller)
    panels = sorted({c.users for c in cells}) if against == "fault" else [None]
    columns = min(PANEL_COLUMNS, len(panels))
    rows = math.ceil(len(panels) / columns)
    legend_w = max((len(label) for label in styles), default=0) * 0.075 + 0.6
    figure = Chart(min(3.2 * columns + legend_w, 13.2), 2.9 * rows + 0.9,
                   title=f"{header['name']}: {title}, median and 95% CI")
    figure.grid(rows, columns, sharex=True, sharey=True)
    xs = sorted({c.fault_rate for c in cells}) if against == "fault" else sorted({c.users for c in cells})
    for index, ax in enumerate(figure.panels):
        if index >= len(panels):
            ax.visible = False
            continue
        user_count = panels[index]
        omitted = hollow = 0
        lines: dict[str, list[Cell]] = {}
        for cell in cells:
            if user_count is None or cell.users == user_count:
                lines.setdefault(labeller.label(cell.scenario), []).append(cell)
        for label, line_cells in lines.items():
            left_out, thin = _draw(ax, label, line_cells, metric, styles[label], against)
            omitted, hollow = omitted + left_out, hollow + thin
        if len(xs) <= 12:
            ax.xticks = Ticks(xs)             # the values that were run, not a round grid
        if user_count is not None:
            ax.title = plural(user_count, "user")
        notes = ([f"{plural(omitted, 'cell')} left out: failed rounds or no data"] if omitted else []) + (
            [f"{hollow} hollow: too few rounds for a 95% CI"] if hollow else [])
        if notes:
            ax.note(0.02, 0.97, "\n".join(notes), colour="#aa0000")
        ax.xlabel = "fault rate (%)" if against == "fault" else "virtual users"
        if index % columns == 0:
            ax.ylabel = title
    figure.add_legend("right", title="configurations")
    return figure


def _configuration_figure(header: dict, cells: list[Cell], metric: str, labeller: Labeller, title: str) -> Chart:
    """One fault rate and one user count: each configuration's median and interval on a row of its own."""
    cells = [c for c in cells if c.status in ("ok", THIN) and c.estimates[metric].median is not None] or cells
    labels = [labeller.label(c.scenario) for c in cells]
    figure = Chart(min(5.0 + 0.075 * max(map(len, labels), default=0), 13.2), 0.3 * len(cells) + 1.4,
                   title=f"{header['name']}: {title}, median and 95% CI (hollow: no interval)")
    ((ax,),) = figure.grid(1, 1)
    styles = _configuration_styles(cells, labeller)
    for y, (cell, label) in enumerate(zip(cells, labels)):
        estimate = cell.estimates[metric]
        if estimate.median is None:
            continue
        colour, marker = styles[label]
        thin = cell.status == THIN or estimate.low is None
        if not thin:
            ax.interval([estimate.low], [estimate.high], [y], colour, width=1.6)
        ax.points([estimate.median], [y], colour, marker=marker, size=6, hollow=thin, label="_" + label)
    ax.yticks = Ticks(list(range(len(cells))), labels)
    ax.invert_y = True                         # plan order, top to bottom
    ax.xlabel = title
    ax.grid = "x"
    return figure


def _draw(ax: Panel, label: str, line_cells: list[Cell], metric: str, style: tuple[str, str],
          against: str) -> tuple[int, int]:
    """One configuration's line and band; returns how many of its cells were left out (failed, no
    data) and how many are drawn hollow (a median from too few rounds or values, no band)."""
    x_of = (lambda c: c.fault_rate) if against == "fault" else (lambda c: c.users)
    line_cells = sorted(line_cells, key=x_of)
    shown = [c for c in line_cells if c.status in ("ok", THIN) and c.estimates[metric].median is not None]
    left_out = len(line_cells) - len(shown)
    if not shown:
        return left_out, 0
    colour, marker = style
    xs = [x_of(c) for c in shown]
    estimates = [c.estimates[metric] for c in shown]
    banded = [(x, e) for x, e, c in zip(xs, estimates, shown) if e.low is not None and c.status == "ok"]
    if banded:
        ax.band([x for x, _ in banded], [e.low for _, e in banded], [e.high for _, e in banded], colour)
    ax.line(xs, [e.median for e in estimates], colour, marker=marker, size=5, width=1.6,
            dash="--" if shown[0].pattern == "baseline" else "-", label=label)
    thin = [(x, e) for x, e, c in zip(xs, estimates, shown) if c.status == THIN]
    if thin:                      # not a measurement to compare yet: hollow, and said so in the panel
        ax.points([x for x, _ in thin], [e.median for _, e in thin], colour, marker=marker, size=5, hollow=True,
                  label="_thin")
    return left_out, len(thin)


def write_figure(figure: Chart, out_dir: Path, stem: str) -> list[Path]:
    """The figure as SVG (text kept as text: editable, and searchable in the report)."""
    return write_chart(figure, out_dir, stem)


def figure_facts(figure: Chart) -> dict:
    """What the report says of a drawn figure, for its readers and tests (rbl/report/chart/model.py)."""
    return chart_facts(figure)


def figure_entry(title: str, svg: Path, facts: dict) -> dict:
    """A figure as report.html embeds it."""
    import base64
    return {"title": title, "svg_base64": base64.b64encode(svg.read_bytes()).decode(), "facts": facts}

