"""What a panel's data are drawn as in SVG (rbl/report/chart/svg.py): lines (stepped or not), bands,
stacked areas, bars, error bars, intervals, spans and markers, in points on the page, from a
panel's mapping of data to the page (px, py)."""

from __future__ import annotations

import math

from .model import Series
from .axes import Axis
from .text import SvgWriter, dash_style


def span_shape(writer: SvgWriter, span, px, top: float, h: float) -> str:
    x1, x2 = sorted((px(span.start), px(span.end)))
    rect = f'x="{x1:.1f}" y="{top:.1f}" width="{x2 - x1:.1f}" height="{h:.1f}"'
    out = f'<rect {rect} fill="{span.fill}" fill-opacity="{span.opacity:g}"/>'
    if span.hatch:
        out += f'<rect {rect} fill="url(#{writer.hatch(span.hatch)})"/>'
    return out


def _path(points: list[tuple[float, float]]) -> str:
    out, last = [], None
    for x, y in points:
        here = f"{x:.1f},{y:.1f}"
        if here != last:
            out.append(here)
            last = here
    return "M" + " L".join(out) if out else ""


def _stepped(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out = []
    for i, (x, y) in enumerate(points):
        if i:
            out.append((x, points[i - 1][1]))
        out.append((x, y))
    return out


def series_shape(s: Series, px, py, y_axis: Axis) -> str:
    floor = y_axis.low if y_axis.log else None

    def y_of(value: float) -> float:
        return py(max(value, floor) if floor is not None else value)

    if s.kind == "stack":
        out, base = [], [0.0] * len(s.xs)
        for values, colour, _ in s.layers or []:
            tops = [b + v for b, v in zip(base, values)]
            upper = [(px(x), y_of(t)) for x, t in zip(s.xs, tops)]
            lower = [(px(x), y_of(b)) for x, b in zip(s.xs, base)]
            if s.step:
                upper, lower = _stepped(upper), _stepped(lower)
            out.append(f'<path d="{_path(upper + lower[::-1])} Z" fill="{colour}" stroke="none"/>')
            base = tops
        return "".join(out)
    if s.kind == "band":
        upper = [(px(x), y_of(v)) for x, v in zip(s.xs, s.highs or [])]
        lower = [(px(x), y_of(v)) for x, v in zip(s.xs, s.ys)]
        return f'<path d="{_path(upper + lower[::-1])} Z" fill="{s.colour}" fill-opacity="{s.opacity:g}" stroke="none"/>'
    if s.kind == "bars":
        out = []
        for x, value in zip(s.xs, s.ys):
            x1, x2 = px(x - s.bar_width / 2), px(x + s.bar_width / 2)
            y1, y2 = sorted((y_of(value), y_of(0.0 if not y_axis.log else y_axis.low)))
            out.append(f'<rect x="{x1:.1f}" y="{y1:.1f}" width="{x2 - x1:.1f}" height="{y2 - y1:.1f}" '
                       f'fill="{s.colour}"/>')
        return "".join(out)
    if s.kind == "interval":
        return "".join(f'<line x1="{px(low):.1f}" y1="{py(row):.1f}" x2="{px(high):.1f}" y2="{py(row):.1f}" '
                       f'stroke="{s.colour}" stroke-width="{s.width}"/>'
                       for low, high, row in zip(s.xs, s.highs or [], s.ys))
    out = []
    points = [(px(x), y_of(y)) for x, y in zip(s.xs, s.ys)]
    if s.kind == "errorbar":
        for (x, _), low, high in zip(points, s.lows or [], s.highs or []):
            y1, y2 = y_of(low), y_of(high)
            out.append(f'<path d="M{x:.1f},{y1:.1f} L{x:.1f},{y2:.1f} M{x - 2:.1f},{y1:.1f} L{x + 2:.1f},{y1:.1f} '
                       f'M{x - 2:.1f},{y2:.1f} L{x + 2:.1f},{y2:.1f}" stroke="{s.colour}" stroke-width="1"/>')
    if s.kind in ("line", "errorbar") and len(points) > 1:
        drawn = _stepped(points) if s.step else points
        out.append(f'<path d="{_path(drawn)}" fill="none" stroke="{s.colour}" stroke-width="{s.width}" '
                   f'stroke-linejoin="round"{dash_style(s.dash, s.width)} stroke-opacity="{s.opacity:g}"/>')
    if s.marker:
        out += [marker(s.marker, x, y, s.size, s.colour, s.hollow) for x, y in points]
    return "".join(out)


def marker(kind: str, x: float, y: float, size: float, colour: str, hollow: bool = False) -> str:
    """A marker `size` points across at (x, y): o s ^ v < > D P X h, as matplotlib names them."""
    r = size / 2
    fill = "#ffffff" if hollow else colour
    style = f'fill="{fill}" stroke="{colour}" stroke-width="{1.0 if hollow else 0.5}"'
    if kind == "o":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" {style}/>'
    if kind == "s":
        return f'<rect x="{x - r * 0.9:.1f}" y="{y - r * 0.9:.1f}" width="{r * 1.8:.1f}" height="{r * 1.8:.1f}" {style}/>'
    shapes = {
        "^": [(0, -1.1), (1, 0.7), (-1, 0.7)], "v": [(0, 1.1), (1, -0.7), (-1, -0.7)],
        "<": [(-1.1, 0), (0.7, -1), (0.7, 1)], ">": [(1.1, 0), (-0.7, -1), (-0.7, 1)],
        "D": [(0, -1.1), (0.8, 0), (0, 1.1), (-0.8, 0)],
        "h": [(math.cos(a), math.sin(a)) for a in (math.pi / 6 + k * math.pi / 3 for k in range(6))],
        "P": [(-0.35, -1), (0.35, -1), (0.35, -0.35), (1, -0.35), (1, 0.35), (0.35, 0.35), (0.35, 1), (-0.35, 1),
              (-0.35, 0.35), (-1, 0.35), (-1, -0.35), (-0.35, -0.35)],
        "X": [(-0.75, -1), (0, -0.25), (0.75, -1), (1, -0.75), (0.25, 0), (1, 0.75), (0.75, 1), (0, 0.25),
              (-0.75, 1), (-1, 0.75), (-0.25, 0), (-1, -0.75)],
    }
    corners = shapes.get(kind, shapes["D"])
    return f'<path d="{_path([(x + dx * r, y + dy * r) for dx, dy in corners])} Z" {style}/>'
