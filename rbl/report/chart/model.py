"""rbl's figures as data: a chart is a grid of panels, each holding what is drawn in it (lines,
points, bands, stacked areas, error bars, bars, spans, notes) with its axes' titles and scales.
rbl/report/chart/svg.py lays a chart out and writes it as SVG, text kept as text, and says what
it shows (`facts`). A figure is
drawn in milliseconds this way, where a plotting library's import alone took longer than the
whole report is allowed; and what a figure holds can be read back (tests, `facts`).

Sizes are in inches (the figure) and points (text, lines, markers), 72 points to the inch."""

from __future__ import annotations

from dataclasses import dataclass, field

SMALLEST_TEXT_PT = 8          # a figure's smallest text; see rbl/report/figures.py for why


@dataclass
class Series:
    """Something drawn from data. kind: "line" (markers optional, stepped optional), "points",
    "band" (between ys and highs), "stack" (layers stacked from 0, stepped), "errorbar" (a line
    with a low-high bar per point), "bars", "interval" (a horizontal segment per row: xs to highs
    at height ys). A label starting with "_" stays out of the legend."""
    kind: str
    xs: list[float]
    ys: list[float]
    colour: str = "#333333"
    label: str | None = None
    marker: str | None = None
    size: float = 5.0                       # marker size, points
    width: float = 1.5                      # line width, points
    dash: str = "-"                         # "-", "--" or ":"
    step: bool = False                      # held until the next x (a step "post")
    hollow: bool = False                    # markers white inside
    opacity: float = 1.0
    highs: list[float] | None = None        # band and interval upper ends; errorbar highs
    lows: list[float] | None = None         # errorbar lows
    layers: list[tuple[list[float], str, str]] | None = None    # stack: (values, colour, label)
    bar_width: float = 0.8


@dataclass
class Span:
    """A shaded x range over the panel's whole height (a warm-up, a noise floor)."""
    start: float
    end: float
    fill: str = "#eeeeee"
    opacity: float = 1.0
    hatch: str | None = None                # the hatch lines' colour
    label: str | None = None
    front: bool = False                     # drawn over the data (it covers what is not measured)


@dataclass
class Rule:
    """A line across the panel at one value: axis "x" (vertical) or "y" (horizontal)."""
    axis: str
    value: float
    colour: str = "#444444"
    width: float = 0.8
    dash: str = "-"
    label: str | None = None


@dataclass
class Note:
    """Text placed in the panel's own coordinates (0-1 from its bottom left)."""
    x: float
    y: float
    text: str
    colour: str = "#000000"
    anchor: str = "start"                   # "start", "middle" or "end"


@dataclass
class Ticks:
    values: list[float]
    labels: list[str] | None = None


@dataclass
class Panel:
    title: str = ""
    xlabel: str = ""
    ylabel: str = ""
    ylabel_colour: str = "#000000"
    xscale: str = "linear"
    yscale: str = "linear"
    xticks: Ticks | None = None             # None: chosen from the range (rbl/report/chart/ticks.py)
    yticks: Ticks | None = None
    invert_y: bool = False
    grid: str | None = "both"               # which axes' ticks get grid lines: "both", "x", "y" or None
    visible: bool = True
    xlim: tuple[float, float] | None = None
    series: list[Series] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)

    def line(self, xs, ys, colour: str, **style) -> Series:
        return self._add(Series("line", list(xs), list(ys), colour, **style))

    def points(self, xs, ys, colour: str, **style) -> Series:
        return self._add(Series("points", list(xs), list(ys), colour, **style))

    def band(self, xs, lows, highs, colour: str, opacity: float = 0.12, **style) -> Series:
        return self._add(Series("band", list(xs), list(lows), colour, highs=list(highs), opacity=opacity, **style))

    def stack(self, xs, layers: list[tuple[list[float], str, str]]) -> Series:
        return self._add(Series("stack", list(xs), [], layers=[(list(v), c, n) for v, c, n in layers]))

    def errorbars(self, xs, ys, lows, highs, colour: str, **style) -> Series:
        return self._add(Series("errorbar", list(xs), list(ys), colour, lows=list(lows), highs=list(highs), **style))

    def bars(self, xs, heights, colour: str, bar_width: float, **style) -> Series:
        return self._add(Series("bars", list(xs), list(heights), colour, bar_width=bar_width, **style))

    def interval(self, lows, highs, rows, colour: str, **style) -> Series:
        """A horizontal segment from low to high at each row's height (a confidence interval)."""
        return self._add(Series("interval", list(lows), list(rows), colour, highs=list(highs), **style))

    def span(self, start: float, end: float, **style) -> None:
        self.spans.append(Span(start, end, **style))

    def rule(self, axis: str, value: float, **style) -> None:
        self.rules.append(Rule(axis, value, **style))

    def note(self, x: float, y: float, text: str, **style) -> None:
        self.notes.append(Note(x, y, text, **style))

    def _add(self, series: Series) -> Series:
        self.series.append(series)
        return series

    def has_data(self) -> bool:
        return any(s.xs for s in self.series)

    def x_values(self) -> set[float]:
        """The distinct x values the panel's data have (an axis with one value compares nothing)."""
        found: set[float] = set()
        for s in self.series:
            found.update(float(x) for x in s.xs)
            if s.kind == "interval" and s.highs:
                found.update(float(x) for x in s.highs)
        return found

    def legend_entries(self) -> list[tuple[str, dict]]:
        """(name, how its key is drawn) of what this panel labels, in the order drawn."""
        entries = []
        for s in self.series:
            if s.kind == "stack":
                entries += [(name, {"patch": colour}) for _, colour, name in s.layers or []]
            elif s.label and not s.label.startswith("_"):
                if s.kind in ("bars", "band"):
                    entries.append((s.label, {"patch": s.colour}))
                else:
                    entries.append((s.label, {"line": s.colour if s.kind != "points" else None, "colour": s.colour,
                                              "marker": s.marker, "dash": s.dash, "hollow": s.hollow}))
        entries += [(span.label, {"patch": span.fill, "hatch": span.hatch}) for span in self.spans if span.label]
        entries += [(rule.label, {"line": rule.colour, "colour": rule.colour, "dash": rule.dash})
                    for rule in self.rules if rule.label]
        return entries


@dataclass
class Legend:
    where: str = "right"                    # "right" of the panels, or "top" / "bottom" across
    columns: int = 1
    title: str | None = None
    entries: list[tuple[str, dict]] | None = None   # None: every panel's, each name once


@dataclass
class Chart:
    width_in: float
    height_in: float
    title: str = ""
    title_size: float = 11
    text_size: float = SMALLEST_TEXT_PT
    rows: list[list[Panel]] = field(default_factory=list)
    sharex: bool = False
    sharey: bool = False
    legend: Legend | None = None

    def grid(self, rows: int, columns: int, sharex: bool = False, sharey: bool = False) -> list[list[Panel]]:
        self.rows = [[Panel() for _ in range(columns)] for _ in range(rows)]
        self.sharex, self.sharey = sharex, sharey
        return self.rows

    @property
    def panels(self) -> list[Panel]:
        return [panel for row in self.rows for panel in row]

    def add_legend(self, where: str = "right", columns: int = 1, title: str | None = None,
                   entries: list[tuple[str, dict]] | None = None) -> None:
        self.legend = Legend(where, columns, title, entries)

    def legend_entries(self) -> list[tuple[str, dict]]:
        if self.legend is not None and self.legend.entries is not None:
            return self.legend.entries
        seen, entries = set(), []
        for panel in self.panels:
            for name, key in panel.legend_entries():
                if name not in seen:
                    seen.add(name)
                    entries.append((name, key))
        return entries
