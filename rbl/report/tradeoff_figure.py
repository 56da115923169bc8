"""The trade-off an overload experiment is about, drawn: carried throughput (more is better) against
the p99 of successful response time (less is better), one point per configuration (its medians over
the counted rounds), a panel per condition, and the Pareto front marked: the configurations no other
beats on both. A configuration off the front is worse than one on it on both counts; among those on
the front, choosing is choosing the trade-off (the spec's `objective` says which)."""

from __future__ import annotations

import statistics

from .cells import Cell
from .figures import MARKERS, PALETTE, subplots
from .labels import METRIC_TITLES, Labeller

X_METRIC, Y_METRIC = "carriedThroughput", "successP99Ms"


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indexes of the points no other point dominates, for x better high and y better low (a point
    dominates another when it is at least as good on both and better on one), by increasing x."""
    front = []
    for i, (x, y) in enumerate(points):
        dominated = any(ox >= x and oy <= y and (ox > x or oy < y) for j, (ox, oy) in enumerate(points) if j != i)
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: points[i])


def tradeoff_figure(header: dict, cells: list[Cell], per_cell: dict, labeller: Labeller, varying: set[str]):
    from matplotlib.lines import Line2D

    from .overload_figures import _grid, _plain_log_ticks, condition, round_values
    rows, columns = _grid(cells, labeller, varying)
    styles = {label: (PALETTE[i % len(PALETTE)], MARKERS[i % len(MARKERS)]) for i, label in enumerate(rows)}
    figure, grid = subplots(1, len(columns), squeeze=False, sharey=True, figsize=(4.2 * len(columns) + 3.2, 3.8))
    for column_index, column in enumerate(columns):
        ax = grid[0][column_index]
        points, labels = [], []
        for cell in cells:
            if condition(cell.scenario, varying) != column:
                continue
            xs = round_values(cell, per_cell[cell.scenario["id"]], X_METRIC)
            ys = round_values(cell, per_cell[cell.scenario["id"]], Y_METRIC)
            if xs and ys:
                points.append((statistics.median(xs), statistics.median(ys)))
                labels.append(labeller.label(cell.scenario))
        front = pareto_front(points)
        if len(front) > 1:
            ax.plot([points[i][0] for i in front], [points[i][1] for i in front], color="#999999", linewidth=1.0,
                    linestyle="--", zorder=1, label="Pareto front")
        for index, ((x, y), label) in enumerate(zip(points, labels)):
            colour, marker = styles[label]
            on_front = index in front
            ax.scatter([x], [y], s=46, marker=marker, zorder=2, label=label, edgecolors=colour, linewidths=1.4,
                       facecolors=colour if on_front else "none")
        ax.set_title(column or "all scenarios", fontsize=10)
        ax.set_xlabel(METRIC_TITLES[X_METRIC] + " (better right)", fontsize=9)
        ax.set_yscale("log")
        _plain_log_ticks(ax.yaxis)
        ax.grid(True, which="both", alpha=0.3)
        ax.tick_params(which="both", labelsize=8)
    grid[0][0].set_ylabel("p99 of successes (ms, log; better low)", fontsize=9)
    # the legend's markers filled whatever the first panel drew (a hollow point there is off its front)
    handles = [Line2D([], [], marker=styles[label][1], color=styles[label][0], linestyle="none", markersize=7)
               for label in rows]
    names = list(rows)
    if any(line.get_label() == "Pareto front" for ax in grid[0] for line in ax.get_lines()):
        handles.append(Line2D([], [], color="#999999", linestyle="--"))
        names.append("Pareto front")
    grid[0][-1].legend(handles, names, loc="upper left", bbox_to_anchor=(1.03, 1.0), fontsize=8, frameon=False)
    figure.suptitle(f"{header['name']}: carried throughput against p99 of successes (filled: on the Pareto front)",
                    fontsize=11)
    figure.tight_layout(rect=(0, 0, 1, 0.92))
    return ("Trade-off: carried throughput against p99 of successes, the Pareto front marked (filled points: "
            "no configuration beats them on both)", "overload-tradeoff", figure)
