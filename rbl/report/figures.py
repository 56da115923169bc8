"""Figures in the style of the seed paper's Figures 4 and 5: a metric against the fault rate, one
line per strategy configuration with its 95% band; rows = library (platform), columns = user
counts; a thicker line for a larger back-off parameter. Cells that failed or have too few
observations are left out and counted in the panel, never drawn as if they were data."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")                     # files only; no display needed
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from .cells import METRIC_TITLES, Cell, axes_by_client, configuration_label  # noqa: E402

PATTERN_COLOURS = {"baseline": "#444444", "retry": "#1f77b4", "circuit_breaker": "#d62728"}
OTHER_COLOUR = "#2ca02c"


def _line_widths(header: dict, cells: list[Cell]) -> dict[tuple[str, str], float]:
    """Per (client, configuration): 1.2 for the smallest back-off value of that client, growing by
    1.3 for each larger one (configurations ordered by their axis values)."""
    axes = axes_by_client(header)
    widths = {}
    by_client: dict[str, set] = {}
    for cell in cells:
        key = tuple(cell.scenario["config"].get(a) for a in axes[cell.client])
        by_client.setdefault(cell.client, set()).add(key)
    for client, keys in by_client.items():
        for rank, key in enumerate(sorted(keys, key=lambda k: tuple(str(v) if not isinstance(v, (int, float)) else v
                                                                       for v in k))):
            widths[client, json.dumps(list(key))] = 1.2 + 1.3 * rank
    return widths


def build_figure(header: dict, cells: list[Cell], metric: str) -> Figure:
    libraries = list(dict.fromkeys(c.library for c in cells))
    users = sorted({c.users for c in cells})
    axes_of = axes_by_client(header)
    widths = _line_widths(header, cells)
    figure, grid = plt.subplots(len(libraries), len(users), squeeze=False, sharex=True,
                                figsize=(max(10.0, 3.6 * len(users) + 1.5), 2.9 * len(libraries) + 1.2))
    handles = {}
    for row, library in enumerate(libraries):
        for col, user_count in enumerate(users):
            ax = grid[row][col]
            panel = [c for c in cells if c.library == library and c.users == user_count]
            lines: dict[str, list[Cell]] = {}
            for cell in panel:
                lines.setdefault(configuration_label(cell.scenario, axes_of[cell.client]), []).append(cell)
            omitted = 0
            for label, line_cells in lines.items():
                line_cells.sort(key=lambda c: c.fault_rate)
                shown = [c for c in line_cells if c.status == "ok" and c.estimates[metric].median is not None]
                omitted += len(line_cells) - len(shown)
                if not shown:
                    continue
                first = shown[0]
                key = json.dumps([first.scenario["config"].get(a) for a in axes_of[first.client]])
                colour = PATTERN_COLOURS.get(first.pattern, OTHER_COLOUR)
                xs = [c.fault_rate for c in shown]
                estimates = [c.estimates[metric] for c in shown]
                (handle,) = ax.plot(xs, [e.median for e in estimates], marker="o", markersize=3, color=colour,
                                    linewidth=widths.get((first.client, key), 1.2), label=label)
                banded = [(x, e) for x, e in zip(xs, estimates) if e.low is not None]
                if banded:
                    ax.fill_between([x for x, _ in banded], [e.low for _, e in banded], [e.high for _, e in banded],
                                    color=colour, alpha=0.15, linewidth=0)
                handles.setdefault(label, handle)
            ax.set_title(f"{library}, {user_count} users", fontsize=9)
            ax.grid(True, alpha=0.3)
            if omitted:
                ax.text(0.02, 0.96, f"{omitted} cell(s) left out: failed or too few observations",
                        transform=ax.transAxes, fontsize=7, va="top", color="#aa0000")
            if row == len(libraries) - 1:
                ax.set_xlabel("fault rate (%)")
            if col == 0:
                ax.set_ylabel(METRIC_TITLES.get(metric, metric))
    figure.suptitle(f"{header['name']}: {METRIC_TITLES.get(metric, metric)}, median and 95% CI", fontsize=11)
    columns = 2 if max((len(label) for label in handles), default=0) > 40 else 3
    figure.legend(list(handles.values()), list(handles), loc="lower center", ncol=min(columns, max(1, len(handles))),
                  fontsize=7, frameon=False)
    legend_rows = (len(handles) + columns - 1) // columns
    figure.tight_layout(rect=(0, min(0.5, 0.03 + 0.12 * legend_rows / (2.9 * len(libraries) + 1.2)), 1, 0.95))
    return figure


def write_figure(figure: Figure, out_dir: Path, stem: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.svg"]
    figure.savefig(paths[0], dpi=120)
    figure.savefig(paths[1])
    plt.close(figure)
    return paths
