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

import matplotlib

matplotlib.use("Agg")                     # files only; no display needed
from matplotlib.ticker import FuncFormatter  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402  (not pyplot: a third of matplotlib's import, and a registry)

from .cells import METRIC_TITLES, Cell  # noqa: E402
THIN = "too few observations"             # Cell.status of a cell with a median but no interval
from .labels import Labeller, plural  # noqa: E402

# Paul Tol's "bright" and "muted" qualitative schemes: distinguishable with the common colour
# vision deficiencies; the markers differ too, so lines stay apart in greyscale print.
# Ordered so that the first ten are far apart (the muted greens and yellows come last).
PALETTE = ("#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE", "#AA3377",
           "#332288", "#882255", "#44AA99", "#999933", "#117733", "#DDCC77", "#CC6677", "#88CCEE")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
BASELINE_COLOUR = "#333333"
# The report shows a figure at most this wide (its page's width at 1280 px), so a figure's smallest
# text, in points, must be at least 0.6 x its width in inches to stay 10 px on screen (rbl/report
# tests check every figure): 8-pt text allows 13.3 inches.
SMALLEST_TEXT_PT = 8
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


def build_figure(header: dict, cells: list[Cell], metric: str) -> Figure:
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
    figure, grid = subplots(rows, columns, squeeze=False, sharex=True, sharey=True,
                            figsize=(min(3.2 * columns + 4.2, 13.2), 2.9 * rows + 0.9))
    xs = sorted({c.fault_rate for c in cells}) if against == "fault" else sorted({c.users for c in cells})
    for index, ax in enumerate(grid.flat):
        if index >= len(panels):
            ax.set_visible(False)
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
            ax.set_xticks(xs)                # the values that were run, not a round grid
        if user_count is not None:
            ax.set_title(plural(user_count, "user"), fontsize=SMALLEST_TEXT_PT + 1)
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelleft=True, labelbottom=True, labelsize=SMALLEST_TEXT_PT)
        notes = ([f"{plural(omitted, 'cell')} left out: failed rounds or no data"] if omitted else []) + (
            [f"{hollow} hollow: too few rounds for a 95% CI"] if hollow else [])
        if notes:
            ax.text(0.02, 0.96, "\n".join(notes), transform=ax.transAxes, fontsize=SMALLEST_TEXT_PT, va="top",
                    color="#aa0000")
        ax.set_xlabel("fault rate (%)" if against == "fault" else "virtual users", fontsize=SMALLEST_TEXT_PT + 1)
        if index % columns == 0:
            ax.set_ylabel(title, fontsize=SMALLEST_TEXT_PT + 1)
    _legend(list(grid.flat[:len(panels)]), columns)
    figure.suptitle(f"{header['name']}: {title}, median and 95% CI", fontsize=11)
    figure.tight_layout(rect=(0, 0, 1, 0.96))
    return figure


def legend_entries(axes) -> tuple[list, list]:
    """Every panel's legend handles and names, each name once, in the order first drawn."""
    handles, names = [], []
    for ax in axes:
        for handle, name in zip(*ax.get_legend_handles_labels()):
            if name not in names:
                handles.append(handle)
                names.append(name)
    return handles, names


def _legend(axes: list, columns: int) -> None:
    """One legend for every panel, right of the first row: a configuration is drawn alike in all."""
    handles, names = legend_entries(axes)
    if handles:
        last_of_row = axes[min(columns, len(axes)) - 1]
        last_of_row.legend(handles, names, loc="upper left", bbox_to_anchor=(1.03, 1.0), fontsize=SMALLEST_TEXT_PT,
                           frameon=False, title="configurations", title_fontsize=SMALLEST_TEXT_PT)


def _configuration_figure(header: dict, cells: list[Cell], metric: str, labeller: Labeller, title: str) -> Figure:
    """One fault rate and one user count: each configuration's median and interval on a row of its own."""
    cells = [c for c in cells if c.status in ("ok", THIN) and c.estimates[metric].median is not None] or cells
    labels = [labeller.label(c.scenario) for c in cells]
    figure, ax = subplots(1, 1, figsize=(min(6.0 + 0.06 * max(map(len, labels), default=0), 13.2),
                                         0.45 * len(cells) + 1.6))
    styles = _configuration_styles(cells, labeller)
    for y, (cell, label) in enumerate(zip(cells, labels)):
        estimate = cell.estimates[metric]
        if estimate.median is None:
            continue
        colour, marker = styles[label]
        thin = cell.status == THIN or estimate.low is None
        if not thin:
            ax.plot([estimate.low, estimate.high], [y, y], color=colour, linewidth=1.6)
        ax.plot([estimate.median], [y], marker=marker, color=colour, markersize=6, linestyle="none",
                markerfacecolor="white" if thin else colour)
    ax.set_yticks(range(len(cells)), labels, fontsize=SMALLEST_TEXT_PT)
    ax.invert_yaxis()                         # plan order, top to bottom
    ax.set_xlabel(title, fontsize=SMALLEST_TEXT_PT + 1)
    ax.tick_params(labelsize=SMALLEST_TEXT_PT)
    ax.grid(True, axis="x", alpha=0.3)
    figure.suptitle(f"{header['name']}: {title}, median and 95% CI (hollow: no interval)", fontsize=11)
    figure.tight_layout()
    return figure


def _draw(ax, label: str, line_cells: list[Cell], metric: str, style: tuple[str, str], against: str) -> tuple[int, int]:
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
    ax.plot(xs, [e.median for e in estimates], color=colour, marker=marker, markersize=5, linewidth=1.6,
            linestyle="--" if shown[0].pattern == "baseline" else "-", label=label, zorder=3)
    thin = [(x, e) for x, e, c in zip(xs, estimates, shown) if c.status == THIN]
    if thin:                      # not a measurement to compare yet: hollow, and said so in the panel
        ax.plot([x for x, _ in thin], [e.median for _, e in thin], linestyle="none", marker=marker, markersize=5,
                markerfacecolor="white", markeredgecolor=colour, label="_thin", zorder=4)
    banded = [(x, e) for x, e, c in zip(xs, estimates, shown) if e.low is not None and c.status == "ok"]
    if banded:
        ax.fill_between([x for x, _ in banded], [e.low for _, e in banded], [e.high for _, e in banded],
                        color=colour, alpha=0.12, linewidth=0)
    return left_out, len(thin)


def write_figure(figure: Figure, out_dir: Path, stem: str) -> list[Path]:
    """The figure as PNG and SVG. Each figure is laid out by tight_layout (or a constrained layout)
    already: bbox_inches="tight" would draw it once more per file only to find its edges. The SVG
    keeps its text as text (editable, and a third faster to write than a path per glyph)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.svg"]
    figure.savefig(paths[0], dpi=120)
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        figure.savefig(paths[1])
    return paths


def figure_facts(figure: Figure) -> dict:
    """What the report says of a drawn figure (saved first, so its ticks exist), for its readers and
    tests: each panel's x label, x scale and how many distinct x values its data have; the width
    in inches and the smallest text in points (see SMALLEST_TEXT_PT)."""
    from matplotlib.text import Text
    panels = []
    for ax in figure.axes:
        xs: set = set()
        for line in ax.get_lines():
            xs.update(_plain(x) for x in line.get_xdata())
        for collection in ax.collections:
            if type(collection).__name__ == "PathCollection":          # scatter: its points are the offsets
                xs.update(_plain(x) for x, _ in collection.get_offsets())
            else:                                                      # bands, stacks: their outlines
                xs.update(_plain(x) for path in collection.get_paths() for x in path.vertices[:, 0])
        for patch in ax.patches:
            if hasattr(patch, "get_x"):
                xs.add(_plain(patch.get_x()))
        if xs and ax.get_visible():
            panels.append({"x_label": ax.get_xlabel(), "x_scale": ax.get_xscale(), "x_values": len(xs)})
    sizes = [text.get_fontsize() for text in figure.findobj(Text)
             if text.get_visible() and text.get_text().strip()]
    return {"panels": panels, "width_in": round(float(figure.get_figwidth()), 2),
            "smallest_text_pt": min(sizes, default=None)}


def _plain(x):
    return x if isinstance(x, str) else float(x)


def figure_entry(title: str, png: Path, facts: dict) -> dict:
    """A figure as report.html embeds it."""
    import base64
    return {"title": title, "png_base64": base64.b64encode(png.read_bytes()).decode(), "facts": facts}


def subplots(rows: int, columns: int, figsize: tuple[float, float], **grid) -> tuple[Figure, object]:
    """pyplot.subplots without pyplot: a figure nobody needs to close, and its grid of axes."""
    figure = Figure(figsize=figsize)
    return figure, figure.subplots(rows, columns, **grid)


def plain_log_ticks(axis) -> None:
    """Log-scale ticks as plain numbers (20, 50, 100 ms), not powers of ten; the 2s and 5s between
    powers of ten are labelled only where the axis spans under three decades (else they collide)."""
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))

    def minor(value, _):
        low, high = sorted(axis.get_view_interval())
        narrow = low > 0 and high / low < 1000
        return f"{value:g}" if narrow and f"{value:g}"[0] in "25" else ""
    axis.set_minor_formatter(FuncFormatter(minor))
