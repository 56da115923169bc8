"""The axes of a chart's panels (rbl/report/chart/model.py): each panel's x and y range from what it
holds (or the whole grid's, where the chart shares an axis), and their ticks
(rbl/report/chart/ticks.py), before anything is laid out: tick labels decide the margins."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .model import Chart, Panel
from .ticks import data_range, linear_ticks, log_ticks, tick_text


@dataclass
class Axis:
    low: float
    high: float
    log: bool
    major: list[float]
    minor: list[float]
    labels: list[str]

    def fraction(self, value: float) -> float:
        if self.log:
            value = max(value, self.low * 1e-3)
            return (math.log10(value) - math.log10(self.low)) / (math.log10(self.high) - math.log10(self.low))
        return (value - self.low) / (self.high - self.low)


def _axis(values: list[float], log: bool, ticks, from_zero: bool = False,
          limits: tuple[float, float] | None = None) -> Axis:
    low, high = limits or data_range(values, log, from_zero)
    if ticks is not None:
        shown = [v for v in ticks.values if low <= v <= high or ticks.labels is not None]
        if ticks.labels is not None and shown:
            low, high = min(low, min(shown)), max(high, max(shown))
        labels = ticks.labels if ticks.labels is not None else [tick_text(v) for v in shown]
        return Axis(low, high, log, list(shown), [], list(labels))
    if log:
        major, minor = log_ticks(low, high)
    else:
        major, minor = linear_ticks(low, high), []
    return Axis(low, high, log, major, minor, [tick_text(v) for v in major])


def _x_data(panel: Panel) -> list[float]:
    values = []
    for s in panel.series:
        values += s.xs
        if s.kind == "interval":
            values += s.highs or []
        if s.kind == "bars":
            values += [x - s.bar_width / 2 for x in s.xs] + [x + s.bar_width / 2 for x in s.xs]
    values += [r.value for r in panel.rules if r.axis == "x"]
    values += [end for span in panel.spans for end in (span.start, span.end)]
    return values


def _y_data(panel: Panel) -> list[float]:
    values = []
    for s in panel.series:
        if s.kind == "stack":
            layers = s.layers or []
            values += [sum(layer[0][i] for layer in layers) for i in range(len(s.xs))] + [0.0]
        elif s.kind == "interval":
            values += s.ys
        else:
            values += s.ys + (s.highs or []) + (s.lows or [])
    values += [r.value for r in panel.rules if r.axis == "y"]
    return values


def _from_zero(panel: Panel) -> bool:
    return any(s.kind in ("stack", "bars") for s in panel.series)


def axes_of(chart: Chart) -> dict[int, tuple[Axis, Axis]]:
    """Each panel's x and y axis, shared across the grid where the chart says so."""
    shown = [p for p in chart.panels if p.visible]
    out = {}
    shared_x = [v for p in shown for v in _x_data(p)] if chart.sharex else None
    shared_y = [v for p in shown for v in _y_data(p)] if chart.sharey else None
    for panel in shown:
        x = _axis(shared_x if shared_x is not None else _x_data(panel), panel.xscale == "log", panel.xticks,
                  limits=panel.xlim)
        y = _axis(shared_y if shared_y is not None else _y_data(panel), panel.yscale == "log", panel.yticks,
                  from_zero=any(_from_zero(p) for p in shown) if chart.sharey else _from_zero(panel))
        out[id(panel)] = (x, y)
    return out


def panel_axes(chart: Chart) -> list[tuple[Axis, Axis]]:
    """Each shown panel's (x axis, y axis) as drawn: range, ticks and their labels."""
    axes = axes_of(chart)
    return [axes[id(p)] for p in chart.panels if p.visible]
