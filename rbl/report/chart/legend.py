"""A chart's legend in SVG (rbl/report/chart/svg.py): a key and a name per entry, in as many of
the columns asked for as fit across the figure, right of the panels or across the top or bottom."""

from __future__ import annotations

from .model import Chart
from .marks import marker
from .text import PAD, SvgWriter, dash_style, text_height, text_width


KEY_W = 22.0                      # a legend key's width, points


def _legend_columns(chart: Chart, entries: list[tuple[str, dict]], width: float) -> tuple[int, float]:
    """(columns, column width): as many of the columns asked for as fit across the figure."""
    column_w = max(KEY_W + 4 + text_width(name, chart.text_size) + 10 for name, _ in entries)
    fitting = max(1, int((width - 2 * PAD) // column_w))
    return max(1, min(chart.legend.columns, len(entries), fitting)), column_w


def legend_size(chart: Chart, entries: list[tuple[str, dict]], width: float) -> tuple[float, float]:
    size = chart.text_size
    columns, column_w = _legend_columns(chart, entries, width)
    rows = -(-len(entries) // columns)
    line_h = max(text_height(name, size) for name, _ in entries) + 2
    title_h = text_height(chart.legend.title or "", size) + 2 if chart.legend.title else 0
    return min(column_w * columns, width - 2 * PAD), rows * line_h + title_h


def draw_legend(writer: SvgWriter, chart: Chart, entries: list[tuple[str, dict]], origin: tuple[float, float],
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
                           f'stroke="{key["line"]}" stroke-width="1.5"{dash_style(key.get("dash") or "-", 1.5)}/>')
            if key.get("marker"):
                writer.add(marker(key["marker"], x + KEY_W / 2, middle, 5.5, key["colour"], key.get("hollow", False)))
        writer.text(x + KEY_W + 4, middle, name, size, baseline="middle")
