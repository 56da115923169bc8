"""Figures in the style of the seed paper's Figures 4 and 5: a metric against the fault rate, one
line per strategy configuration with its 95% band; rows = library (platform), columns = user
counts. Each configuration has its own colour and marker (a colour-blind-safe palette), the same
in every panel of its row, explained in the row's legend with units; panels of a row share their
y axis, so they compare by eye; the baseline is drawn in every panel (as a dashed reference where
the row's library has none). Cells that failed are left out and counted in the panel; cells with
too few rounds for an interval (a quick `--rounds 1` run) are drawn hollow, without a band, and
counted too: never drawn as if they were measurements to compare."""

from __future__ import annotations

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
PALETTE = ("#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE", "#AA3377",
           "#332288", "#117733", "#DDCC77", "#CC6677", "#88CCEE", "#882255", "#44AA99", "#999933")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
BASELINE_COLOUR = "#333333"


def _configuration_styles(cells: list[Cell], labeller: Labeller) -> dict[str, dict[str, tuple[str, str]]]:
    """library -> label -> (colour, marker), in plan order; baselines are drawn apart."""
    styles: dict[str, dict[str, tuple[str, str]]] = {}
    for cell in cells:
        if cell.pattern == "baseline":
            continue
        row = styles.setdefault(cell.library, {})
        label = labeller.label(cell.scenario)
        if label not in row:
            n = len(row)
            row[label] = (PALETTE[n % len(PALETTE)], MARKERS[(n + n // len(PALETTE)) % len(MARKERS)])
    return styles


def build_figure(header: dict, cells: list[Cell], metric: str) -> Figure:
    labeller = Labeller(header)
    # a metric only some clients have (a mesh client's sidecar counters): the others get no row
    measured = {c.library for c in cells if c.estimates.get(metric) and c.estimates[metric].median is not None}
    libraries = [library for library in dict.fromkeys(c.library for c in cells) if library in measured or not measured]
    users = sorted({c.users for c in cells})
    rates = sorted({c.fault_rate for c in cells})
    styles = _configuration_styles(cells, labeller)
    title = METRIC_TITLES.get(metric, metric)
    figure, grid = subplots(len(libraries), len(users), squeeze=False, sharex=True, sharey="row",
                                figsize=(3.4 * len(users) + 3.8, 2.9 * len(libraries) + 0.9))
    for row, library in enumerate(libraries):
        own_baseline = any(c.library == library and c.pattern == "baseline" for c in cells)
        for col, user_count in enumerate(users):
            ax = grid[row][col]
            omitted = hollow = 0
            lines: dict[str, list[Cell]] = {}
            for cell in cells:
                if cell.users != user_count:
                    continue
                # the row's own configurations, and every baseline as the panel's reference
                if cell.library == library or cell.pattern == "baseline":
                    lines.setdefault(labeller.label(cell.scenario), []).append(cell)
            for label, line_cells in lines.items():
                first = line_cells[0]
                reference = first.pattern == "baseline" and first.library != library
                if reference and own_baseline:
                    continue              # the row has its own baseline: no second one
                left_out, thin = _draw(ax, label, line_cells, metric, styles.get(library, {}), reference,
                                       counted=not reference)
                omitted, hollow = omitted + left_out, hollow + thin
            if len(rates) <= 12:
                ax.set_xticks(rates)            # the fault rates that were run, not a round grid
            ax.set_title(f"{library}, {plural(user_count, 'user')}", fontsize=9)
            ax.grid(True, alpha=0.3)
            ax.tick_params(labelleft=True, labelsize=8)    # shared y, but every panel keeps its numbers
            notes = ([f"{plural(omitted, 'cell')} left out: failed rounds or no data"] if omitted else []) + (
                [f"{hollow} hollow: too few rounds for a 95% CI"] if hollow else [])
            if notes:
                ax.text(0.02, 0.96, "\n".join(notes), transform=ax.transAxes, fontsize=7, va="top", color="#aa0000")
            if row == len(libraries) - 1:
                ax.set_xlabel("fault rate (%)")
            if col == 0:
                ax.set_ylabel(title, fontsize=9)
        handles, names = grid[row][-1].get_legend_handles_labels()
        for ax in grid[row][:-1]:               # a configuration missing from the last panel
            for handle, name in zip(*ax.get_legend_handles_labels()):
                if name not in names:
                    handles.append(handle)
                    names.append(name)
        if handles:
            grid[row][-1].legend(handles, names, loc="upper left", bbox_to_anchor=(1.03, 1.0), fontsize=7,
                                 frameon=False, title=f"{library} configurations", title_fontsize=7)
    figure.suptitle(f"{header['name']}: {title}, median and 95% CI", fontsize=11)
    figure.tight_layout(rect=(0, 0, 1, 0.96))
    return figure


def _draw(ax, label: str, line_cells: list[Cell], metric: str, row_styles: dict, reference: bool,
          counted: bool) -> tuple[int, int]:
    """One configuration's line and band; returns how many of its cells were left out (failed, no
    data) and how many are drawn hollow (a median from too few rounds or values, no band)."""
    line_cells = sorted(line_cells, key=lambda c: c.fault_rate)
    shown = [c for c in line_cells if c.status in ("ok", THIN) and c.estimates[metric].median is not None]
    left_out = len(line_cells) - len(shown) if counted else 0
    if not shown:
        return left_out, 0
    baseline = shown[0].pattern == "baseline"
    colour, marker = (BASELINE_COLOUR, "o") if baseline else row_styles.get(label, (PALETTE[0], "o"))
    xs = [c.fault_rate for c in shown]
    estimates = [c.estimates[metric] for c in shown]
    ax.plot(xs, [e.median for e in estimates], color=colour, marker=marker, markersize=5,
            linewidth=1.2 if reference else 1.6, linestyle="--" if baseline else "-",
            alpha=0.8 if reference else 1.0, label=f"{label} (reference)" if reference else label, zorder=3)
    thin = [(x, e) for x, e, c in zip(xs, estimates, shown) if c.status == THIN]
    if thin:                      # not a measurement to compare yet: hollow, and said so in the panel
        ax.plot([x for x, _ in thin], [e.median for _, e in thin], linestyle="none", marker=marker, markersize=5,
                markerfacecolor="white", markeredgecolor=colour, label="_thin", zorder=4)
    banded = [(x, e) for x, e, c in zip(xs, estimates, shown) if e.low is not None and c.status == "ok"]
    if banded and not reference:
        ax.fill_between([x for x, _ in banded], [e.low for _, e in banded], [e.high for _, e in banded],
                        color=colour, alpha=0.12, linewidth=0)
    return left_out, len(thin) if counted else 0


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


def subplots(rows: int, columns: int, figsize: tuple[float, float], **grid) -> tuple[Figure, object]:
    """pyplot.subplots without pyplot: a figure nobody needs to close, and its grid of axes."""
    figure = Figure(figsize=figsize)
    return figure, figure.subplots(rows, columns, **grid)


def plain_log_ticks(axis) -> None:
    """Log-scale ticks as plain numbers (20, 50, 100 ms), not powers of ten."""
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda value, _: f"{value:g}" if f"{value:g}"[0] in "25" else ""))
