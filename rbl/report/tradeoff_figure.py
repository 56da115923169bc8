"""The trade-off an overload experiment is about, drawn: carried throughput (more is better) against
the p99 of successful response time (less is better), one point per configuration (its medians over
the counted rounds, which rbl/report/overload_figures.py works out), a panel per condition, and the
Pareto front marked: the configurations no other beats on both. A configuration off the front is
worse than one on it on both counts; among those on the front, choosing is choosing the trade-off
(the spec's `objective` says which)."""

from __future__ import annotations

from .figures import MARKERS, PALETTE, plain_log_ticks, subplots
from .labels import METRIC_TITLES

X_TITLE = METRIC_TITLES["carriedThroughput"] + " (better right)"
Y_TITLE = "p99 of successes (ms, log; better low)"


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indexes of the points no other point dominates, for x better high and y better low (a point
    dominates another when it is at least as good on both and better on one), by increasing x."""
    front = []
    for i, (x, y) in enumerate(points):
        dominated = any(ox >= x and oy <= y and (ox > x or oy < y) for j, (ox, oy) in enumerate(points) if j != i)
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: points[i])


def tradeoff_figure(name: str, labels: list[str], panels: dict[str, list[tuple[str, float, float]]]):
    """(title, stem, figure): a panel per condition (its title the condition, '' for the only one),
    each holding (configuration label, carried throughput, p99 of successes) points."""
    from matplotlib.lines import Line2D

    styles = {label: (PALETTE[i % len(PALETTE)], MARKERS[i % len(MARKERS)]) for i, label in enumerate(labels)}
    columns = min(2, len(panels))                  # at most two across: the figure stays legible at 1280 px
    rows = -(-len(panels) // columns)
    figure, grid = subplots(rows, columns, squeeze=False, sharey=True, figsize=(4.2 * columns + 3.2, 3.4 * rows + 0.4))
    for ax in grid.flat[len(panels):]:
        ax.set_visible(False)
    fronts = False
    for ax, (column, drawn) in zip(grid.flat, panels.items()):
        points = [(x, y) for _, x, y in drawn]
        front = pareto_front(points)
        if len(front) > 1:
            fronts = True
            ax.plot([points[i][0] for i in front], [points[i][1] for i in front], color="#999999", linewidth=1.0,
                    linestyle="--", zorder=1)
        for index, (label, x, y) in enumerate(drawn):
            colour, marker = styles[label]
            ax.scatter([x], [y], s=46, marker=marker, zorder=2, edgecolors=colour, linewidths=1.4,
                       facecolors=colour if index in front else "none")
        ax.set_title(column or "all scenarios", fontsize=10)
        ax.set_xlabel(X_TITLE, fontsize=9)
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)
        ax.grid(True, which="both", alpha=0.3)
        ax.tick_params(which="both", labelsize=8)
    for row in grid:
        row[0].set_ylabel(Y_TITLE, fontsize=9)
    # the legend's markers filled, whatever a panel drew (a hollow point there is off its front)
    handles = [Line2D([], [], marker=styles[label][1], color=styles[label][0], linestyle="none", markersize=7)
               for label in labels]
    names = list(labels)
    if fronts:
        handles.append(Line2D([], [], color="#999999", linestyle="--"))
        names.append("Pareto front")
    grid[0][-1].legend(handles, names, loc="upper left", bbox_to_anchor=(1.03, 1.0), fontsize=8, frameon=False)
    figure.suptitle(f"{name}: carried throughput against p99 of successes (filled: on the Pareto front)",
                    fontsize=11)
    figure.tight_layout(rect=(0, 0, 1, 1 - 0.3 / figure.get_figheight()))
    return ("Trade-off: carried throughput against p99 of successes, the Pareto front marked (filled points: "
            "no configuration beats them on both)", "overload-tradeoff", figure)
