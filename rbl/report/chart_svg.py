"""Lays out a chart (rbl/report/chart.py) and writes it as SVG: the title on top, the legend right of
the panels (or across the top or bottom), the panels in a grid with room for their titles, tick
labels and axis titles measured from the text they hold. Units are points (the viewBox is the
figure's size in points), so a font size is what it says on paper; text stays text."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

from .chart import Chart, Panel, Series
from .chart_ticks import data_range, linear_ticks, log_ticks, tick_text

FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
PAD = 6.0                        # points between a figure's parts
TICK = 3.5                       # tick mark length
LINE_HEIGHT = 1.25               # of the font size
DASHES = {"-": None, "--": (3.7, 1.6), ":": (1.0, 1.65)}       # times the line width, as matplotlib's

# narrow and wide characters of a sans-serif font, as a share of the font size (the rest ~0.6):
# enough to keep labels apart and inside the figure without measuring glyphs
_NARROW = set("iljtfrI.,:;'|!()[] ")
_WIDE = set("mwMW@%")


def text_width(text: str, size: float) -> float:
    longest = max((sum(0.3 if c in _NARROW else 0.9 if c in _WIDE else 0.72 if c.isupper() else 0.58
                       for c in line) for line in text.split("\n")), default=0.0)
    return longest * size


def text_height(text: str, size: float) -> float:
    return (text.count("\n") + 1) * size * LINE_HEIGHT if text else 0.0


@dataclass
class Rendered:
    text: str
    smallest_text_pt: float | None


@dataclass
class _Axis:
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


@dataclass
class _Writer:
    parts: list[str] = field(default_factory=list)
    sizes: list[float] = field(default_factory=list)
    defs: dict[str, str] = field(default_factory=dict)

    def text(self, x: float, y: float, text: str, size: float, anchor: str = "start", colour: str = "#000000",
             rotate: bool = False, weight: str | None = None, baseline: str = "alphabetic", halo: bool = False) -> None:
        if not text.strip():
            return
        self.sizes.append(size)
        lines = text.split("\n")
        transform = f' transform="rotate(-90 {x:.1f} {y:.1f})"' if rotate else ""
        bold = f' font-weight="{weight}"' if weight else ""
        if halo:                  # a white outline keeps text over data readable
            bold += ' stroke="#ffffff" stroke-width="2.5" stroke-opacity="0.8" paint-order="stroke"'
        fill = f' fill="{colour}"' if colour != "#000000" else ""
        # the first line's baseline sits so the block is placed as `baseline` asks
        first = y
        if rotate:                # the lines stack leftwards, the last one at x (nearest the axis)
            first = y - (len(lines) - 1) * size * LINE_HEIGHT
            spans = "".join(f'<tspan x="{x:.1f}" y="{first + i * size * LINE_HEIGHT:.1f}">{escape(line)}</tspan>'
                            for i, line in enumerate(lines))
            self.parts.append(f'<text font-size="{size:g}" text-anchor="{anchor}"{fill}{bold}{transform}>{spans}</text>')
            return
        if baseline == "top":
            first = y + size * 0.95
        elif baseline == "middle":
            first = y - (len(lines) - 1) * size * LINE_HEIGHT / 2 + size * 0.35
        spans = "".join(f'<tspan x="{x:.1f}" y="{first + i * size * LINE_HEIGHT:.1f}">{escape(line)}</tspan>'
                        for i, line in enumerate(lines))
        self.parts.append(f'<text font-size="{size:g}" text-anchor="{anchor}"{fill}{bold}{transform}>{spans}</text>')

    def add(self, element: str) -> None:
        self.parts.append(element)

    def hatch(self, colour: str) -> str:
        key = f"hatch{len(self.defs)}"
        for name, body in self.defs.items():
            if f'stroke="{colour}"' in body and name.startswith("hatch"):
                return name
        self.defs[key] = (f'<pattern id="{key}" patternUnits="userSpaceOnUse" width="6" height="6">'
                          f'<path d="M-1,1 l2,-2 M0,6 l6,-6 M5,7 l2,-2" stroke="{colour}" stroke-width="0.7"/>'
                          f'</pattern>')
        return key


def _dash(dash: str, width: float) -> str:
    pattern = DASHES.get(dash)
    return f' stroke-dasharray="{pattern[0] * width:.1f} {pattern[1] * width:.1f}"' if pattern else ""


def _axis(values: list[float], log: bool, ticks, from_zero: bool = False,
          limits: tuple[float, float] | None = None) -> _Axis:
    low, high = limits or data_range(values, log, from_zero)
    if ticks is not None:
        shown = [v for v in ticks.values if low <= v <= high or ticks.labels is not None]
        if ticks.labels is not None and shown:
            low, high = min(low, min(shown)), max(high, max(shown))
        labels = ticks.labels if ticks.labels is not None else [tick_text(v) for v in shown]
        return _Axis(low, high, log, list(shown), [], list(labels))
    if log:
        major, minor = log_ticks(low, high)
    else:
        major, minor = linear_ticks(low, high), []
    return _Axis(low, high, log, major, minor, [tick_text(v) for v in major])


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


def _axes(chart: Chart) -> dict[int, tuple[_Axis, _Axis]]:
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


def write_chart(chart: Chart, out_dir: Path, stem: str) -> list[Path]:
    """The chart as OUT_DIR/STEM.svg."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stem}.svg"
    path.write_text(render(chart).text, encoding="utf-8")
    return [path]


def chart_facts(chart: Chart) -> dict:
    """What the report says of the figure, for its readers and tests: each shown panel's x label,
    x scale and how many distinct x values its data have; the width in inches and the smallest
    text in points (see SMALLEST_TEXT_PT)."""
    panels = [{"x_label": p.xlabel, "x_scale": p.xscale, "x_values": len(p.x_values())}
              for p in chart.panels if p.visible and p.has_data()]
    return {"panels": panels, "width_in": round(float(chart.width_in), 2),
            "smallest_text_pt": render(chart).smallest_text_pt}


def panel_axes(chart: Chart) -> list[tuple[_Axis, _Axis]]:
    """Each shown panel's (x axis, y axis) as drawn: range, ticks and their labels."""
    axes = _axes(chart)
    return [axes[id(p)] for p in chart.panels if p.visible]


def render(chart: Chart) -> Rendered:
    width, height = chart.width_in * 72, chart.height_in * 72
    size = chart.text_size
    writer = _Writer()
    axes = _axes(chart)
    entries = chart.legend_entries() if chart.legend is not None else []

    top = PAD + (text_height(chart.title, chart.title_size) + PAD if chart.title else 0)
    right, bottom = PAD, PAD
    legend_box = None
    if entries:
        legend_box = _legend_size(chart, entries, width)
        if chart.legend.where == "right":
            right += legend_box[0] + PAD
        elif chart.legend.where == "top":
            top += legend_box[1] + PAD / 2
        else:
            bottom += legend_box[1] + PAD
    if chart.title:
        writer.text(width / 2, PAD, chart.title, chart.title_size, "middle", baseline="top")

    rows, columns = len(chart.rows), max((len(r) for r in chart.rows), default=1)
    shown = [p for p in chart.panels if p.visible]
    y_label_w = max((max((text_width(t, size) for t in axes[id(p)][1].labels), default=0) for p in shown), default=0)
    left_gutter = y_label_w + TICK + 4 + max((text_height(p.ylabel, size + 1) for p in shown), default=0)
    title_h = max((text_height(p.title, size + 1) for p in shown), default=0)
    top_gutter = title_h + (4 if title_h else 2)
    x_label_h = max((text_height(t, size) for p in shown for t in axes[id(p)][0].labels), default=size)
    bottom_gutter = TICK + 4 + x_label_h + max((text_height(p.xlabel, size + 1) for p in shown), default=0)
    cell_w = (width - PAD - right) / max(1, columns)
    cell_h = (height - top - bottom) / max(1, rows)

    for r, row in enumerate(chart.rows):
        for c, panel in enumerate(row):
            if not panel.visible:
                continue
            x0 = PAD + c * cell_w + left_gutter
            y0 = top + r * cell_h + top_gutter
            box = (x0, y0, max(10.0, cell_w - left_gutter - PAD * 1.5), max(10.0, cell_h - top_gutter - bottom_gutter))
            _panel(writer, panel, box, *axes[id(panel)], size, f"p{r}_{c}")
    if legend_box:
        where = chart.legend.where
        if where == "right":
            origin = (width - right + PAD, top + top_gutter)
        elif where == "top":
            origin = ((width - legend_box[0]) / 2, top - legend_box[1] - PAD / 2)
        else:
            origin = ((width - legend_box[0]) / 2, height - bottom + PAD)
        _legend(writer, chart, entries, origin, width)

    defs = f"<defs>{''.join(writer.defs.values())}</defs>" if writer.defs else ""
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}pt" height="{height:.0f}pt" '
           f'viewBox="0 0 {width:.1f} {height:.1f}" font-family="{FONT}">'
           f'{defs}<rect width="100%" height="100%" fill="#ffffff"/>{"".join(writer.parts)}</svg>\n')
    return Rendered(svg, min(writer.sizes, default=None))


def _panel(writer: _Writer, panel: Panel, box: tuple[float, float, float, float], x_axis: _Axis, y_axis: _Axis,
           size: float, clip: str) -> None:
    left, top, w, h = box

    def px(value: float) -> float:
        return left + x_axis.fraction(value) * w

    def py(value: float) -> float:
        fraction = y_axis.fraction(value)
        return top + (fraction if panel.invert_y else 1 - fraction) * h

    writer.defs[clip] = f'<clipPath id="{clip}"><rect x="{left:.1f}" y="{top:.1f}" width="{w:.1f}" height="{h:.1f}"/></clipPath>'
    if panel.grid in ("both", "x"):
        for value in x_axis.major:
            writer.add(f'<line x1="{px(value):.1f}" y1="{top:.1f}" x2="{px(value):.1f}" y2="{top + h:.1f}" '
                       f'stroke="#dddddd" stroke-width="0.6"/>')
    if panel.grid in ("both", "y"):
        for value in y_axis.major + y_axis.minor:
            writer.add(f'<line x1="{left:.1f}" y1="{py(value):.1f}" x2="{left + w:.1f}" y2="{py(value):.1f}" '
                       f'stroke="{"#dddddd" if value in y_axis.major else "#eeeeee"}" stroke-width="0.6"/>')
    body: list[str] = []
    for span in panel.spans:
        if not span.front:
            body.append(_span(writer, span, px, top, h))
    for series in panel.series:
        body.append(_series(series, px, py, y_axis))
    for rule in panel.rules:
        if rule.axis == "x":
            x1 = x2 = px(rule.value)
            y1, y2 = top, top + h
        else:
            x1, x2, y1 = left, left + w, py(rule.value)
            y2 = y1
        body.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{rule.colour}" '
                    f'stroke-width="{rule.width}"{_dash(rule.dash, rule.width)}/>')
    for span in panel.spans:
        if span.front:
            body.append(_span(writer, span, px, top, h))
    writer.add(f'<g clip-path="url(#{clip})">{"".join(body)}</g>')
    writer.add(f'<rect x="{left:.1f}" y="{top:.1f}" width="{w:.1f}" height="{h:.1f}" fill="none" '
               f'stroke="#333333" stroke-width="0.8"/>')
    for value, label in zip(x_axis.major, x_axis.labels):
        x = px(value)
        writer.add(f'<line x1="{x:.1f}" y1="{top + h:.1f}" x2="{x:.1f}" y2="{top + h + TICK:.1f}" stroke="#333333" '
                   f'stroke-width="0.8"/>')
        writer.text(x, top + h + TICK + 1.5, label, size, "middle", baseline="top")
    for value in x_axis.minor:
        x = px(value)
        writer.add(f'<line x1="{x:.1f}" y1="{top + h:.1f}" x2="{x:.1f}" y2="{top + h + TICK / 2:.1f}" '
                   f'stroke="#333333" stroke-width="0.6"/>')
    for value, label in zip(y_axis.major, y_axis.labels):
        y = py(value)
        writer.add(f'<line x1="{left - TICK:.1f}" y1="{y:.1f}" x2="{left:.1f}" y2="{y:.1f}" stroke="#333333" '
                   f'stroke-width="0.8"/>')
        writer.text(left - TICK - 2, y, label, size, "end", baseline="middle")
    for value in y_axis.minor:
        y = py(value)
        writer.add(f'<line x1="{left - TICK / 2:.1f}" y1="{y:.1f}" x2="{left:.1f}" y2="{y:.1f}" stroke="#333333" '
                   f'stroke-width="0.6"/>')
    if panel.title:
        writer.text(left + w / 2, top - 3 - text_height(panel.title, size + 1) + (size + 1) * 0.95,
                    panel.title, size + 1, "middle")
    if panel.xlabel:
        ticks_h = max((text_height(t, size) for t in x_axis.labels), default=size)
        writer.text(left + w / 2, top + h + TICK + 3 + ticks_h, panel.xlabel, size + 1, "middle", baseline="top")
    if panel.ylabel:
        label_w = max((text_width(t, size) for t in y_axis.labels), default=0)
        x = left - TICK - 4 - label_w - 2
        writer.text(x, top + h / 2, panel.ylabel, size + 1, "middle", colour=panel.ylabel_colour, rotate=True)
    for note in panel.notes:
        writer.text(left + note.x * w, top + (1 - note.y) * h, note.text, size, note.anchor, note.colour,
                    baseline="top", halo=True)


def _span(writer: _Writer, span, px, top: float, h: float) -> str:
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


def _series(s: Series, px, py, y_axis: _Axis) -> str:
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
                   f'stroke-linejoin="round"{_dash(s.dash, s.width)} stroke-opacity="{s.opacity:g}"/>')
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


KEY_W = 22.0                      # a legend key's width, points


def _legend_columns(chart: Chart, entries: list[tuple[str, dict]], width: float) -> tuple[int, float]:
    """(columns, column width): as many of the columns asked for as fit across the figure."""
    column_w = max(KEY_W + 4 + text_width(name, chart.text_size) + 10 for name, _ in entries)
    fitting = max(1, int((width - 2 * PAD) // column_w))
    return max(1, min(chart.legend.columns, len(entries), fitting)), column_w


def _legend_size(chart: Chart, entries: list[tuple[str, dict]], width: float) -> tuple[float, float]:
    size = chart.text_size
    columns, column_w = _legend_columns(chart, entries, width)
    rows = -(-len(entries) // columns)
    line_h = max(text_height(name, size) for name, _ in entries) + 2
    title_h = text_height(chart.legend.title or "", size) + 2 if chart.legend.title else 0
    return min(column_w * columns, width - 2 * PAD), rows * line_h + title_h


def _legend(writer: _Writer, chart: Chart, entries: list[tuple[str, dict]], origin: tuple[float, float],
            width: float) -> None:
    size = chart.text_size
    columns, column_w = _legend_columns(chart, entries, width)
    line_h = max(text_height(name, size) for name, _ in entries) + 2
    x0, y = origin
    if chart.legend.title:
        writer.text(x0, y, chart.legend.title, size, baseline="top", weight="bold")
        y += text_height(chart.legend.title, size) + 2
    for index, (name, key) in enumerate(entries):
        x = x0 + (index % columns) * column_w
        row_y = y + (index // columns) * line_h
        middle = row_y + size * 0.6
        if "patch" in key:
            writer.add(f'<rect x="{x + 3:.1f}" y="{middle - 4:.1f}" width="{KEY_W - 6:.1f}" height="8" '
                       f'fill="{key["patch"]}"/>')
            if key.get("hatch"):
                writer.add(f'<rect x="{x + 3:.1f}" y="{middle - 4:.1f}" width="{KEY_W - 6:.1f}" height="8" '
                           f'fill="url(#{writer.hatch(key["hatch"])})" stroke="{key["hatch"]}" stroke-width="0.5"/>')
        else:
            if key.get("line"):
                writer.add(f'<line x1="{x:.1f}" y1="{middle:.1f}" x2="{x + KEY_W:.1f}" y2="{middle:.1f}" '
                           f'stroke="{key["line"]}" stroke-width="1.5"{_dash(key.get("dash") or "-", 1.5)}/>')
            if key.get("marker"):
                writer.add(marker(key["marker"], x + KEY_W / 2, middle, 5.5, key["colour"], key.get("hollow", False)))
        writer.text(x + KEY_W + 4, middle, name, size, baseline="middle")
