"""Lays out a chart (rbl/report/chart/model.py) and writes it as SVG: the title on top, the legend right of
the panels (or across the top or bottom), the panels in a grid with room for their titles, tick
labels and axis titles measured from the text they hold. Units are points (the viewBox is the
figure's size in points), so a font size is what it says on paper; text stays text."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from .model import Chart, Panel
from .axes import Axis, axes_of
from .legend import draw_legend, legend_size
from .marks import series_shape, span_shape
from .text import FONT, PAD, SvgWriter, dash_style, text_height, text_width

TICK = 3.5                       # tick mark length


@dataclass
class Rendered:
    text: str
    smallest_text_pt: float | None


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


def render(chart: Chart) -> Rendered:
    """The chart as SVG text, and the smallest text it holds."""
    width, height = chart.width_in * 72, chart.height_in * 72
    size = chart.text_size
    writer = SvgWriter()
    axes = axes_of(chart)
    entries = chart.legend_entries() if chart.legend is not None else []

    top = PAD + (text_height(chart.title, chart.title_size) + PAD if chart.title else 0)
    right, bottom = PAD, PAD
    legend_box = None
    if entries:
        legend_box = legend_size(chart, entries, width)
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
        draw_legend(writer, chart, entries, origin, width)

    defs = f"<defs>{''.join(writer.defs.values())}</defs>" if writer.defs else ""
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}pt" height="{height:.0f}pt" '
           f'viewBox="0 0 {width:.1f} {height:.1f}" font-family="{FONT}">'
           f'{defs}<rect width="100%" height="100%" fill="#ffffff"/>{"".join(writer.parts)}</svg>\n')
    return Rendered(svg, min(writer.sizes, default=None))


def _panel(writer: SvgWriter, panel: Panel, box: tuple[float, float, float, float], x_axis: Axis, y_axis: Axis,
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
            body.append(span_shape(writer, span, px, top, h))
    for series in panel.series:
        body.append(series_shape(series, px, py, y_axis))
    for rule in panel.rules:
        if rule.axis == "x":
            x1 = x2 = px(rule.value)
            y1, y2 = top, top + h
        else:
            x1, x2, y1 = left, left + w, py(rule.value)
            y2 = y1
        body.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{rule.colour}" '
                    f'stroke-width="{rule.width}"{dash_style(rule.dash, rule.width)}/>')
    for span in panel.spans:
        if span.front:
            body.append(span_shape(writer, span, px, top, h))
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
    for value, label in zip(y_axis.major, _spaced(y_axis, h, size)):
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


def _spaced(axis: Axis, length: float, size: float) -> list[str]:
    """A y axis's labels, those between the powers of ten of a log axis left blank where the labels
    would stand closer than a line of text (a short panel spanning a few decades)."""
    if not axis.log or len(axis.major) < 2 or length / (len(axis.major) - 1) >= size * 1.6:
        return axis.labels
    return [label if math.log10(value).is_integer() else "" for value, label in zip(axis.major, axis.labels)]
