"""The trade-off an overload experiment is about, drawn: carried throughput (more is better) against
the p99 of successful response time (less is better), one point per configuration (its medians over
the counted rounds, which rbl/report/overload_figures.py works out), a panel per condition, and the
Pareto front marked: the configurations no other beats on both. A configuration off the front is
worse than one on it on both counts; among those on the front, choosing is choosing the trade-off
(the spec's `objective` says which)."""

from __future__ import annotations

from .chart.model import Chart
from .figures import MARKERS, PALETTE
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
    styles = {label: (PALETTE[i % len(PALETTE)], MARKERS[i % len(MARKERS)]) for i, label in enumerate(labels)}
    columns = min(2, len(panels))                  # at most two across: the figure stays legible at 1280 px
    rows = -(-len(panels) // columns)
    legend_w = max((len(label) for label in labels), default=0) * 0.075 + 0.6
    figure = Chart(4.2 * columns + legend_w, 3.4 * rows + 0.4,
                   title=f"{name}: carried throughput against p99 of successes (filled: on the Pareto front)")
    figure.grid(rows, columns, sharey=True)
    for ax in figure.panels[len(panels):]:
        ax.visible = False
    fronts = False
    for ax, (column, drawn) in zip(figure.panels, panels.items()):
        points = [(x, y) for _, x, y in drawn]
        front = pareto_front(points)
        if len(front) > 1:
            fronts = True
            ax.line([points[i][0] for i in front], [points[i][1] for i in front], "#999999", width=1.0, dash="--")
        for index, (label, x, y) in enumerate(drawn):
            colour, marker = styles[label]
            ax.points([x], [y], colour, marker=marker, size=7, hollow=index not in front)
        ax.title = column or "all scenarios"
        ax.xlabel = X_TITLE
        ax.yscale = "log"
    for row in figure.rows:
        row[0].ylabel = Y_TITLE
    # the legend's markers filled, whatever a panel drew (a hollow point there is off its front)
    entries = [(label, {"colour": styles[label][0], "marker": styles[label][1]}) for label in labels]
    if fronts:
        entries.append(("Pareto front", {"line": "#999999", "colour": "#999999", "dash": "--"}))
    figure.add_legend("right", entries=entries)
    return ("Trade-off: carried throughput against p99 of successes, the Pareto front marked (filled points: "
            "no configuration beats them on both)", "overload-tradeoff", figure)
