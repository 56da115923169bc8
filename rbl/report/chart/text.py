"""Text and shared drawing pieces of rbl's SVG figures (rbl/report/chart/svg.py): how wide and tall
a text is without measuring glyphs, and the writer that collects a figure's elements, its text
sizes (the smallest is what a reader must be able to read) and its patterns."""

from __future__ import annotations

from dataclasses import dataclass, field
from xml.sax.saxutils import escape

FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
PAD = 6.0                        # points between a figure's parts
LINE_HEIGHT = 1.25               # of the font size
DASHES = {"-": None, "--": (3.7, 1.6), ":": (1.0, 1.65)}       # times the line width

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
class SvgWriter:
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


def dash_style(dash: str, width: float) -> str:
    pattern = DASHES.get(dash)
    return f' stroke-dasharray="{pattern[0] * width:.1f} {pattern[1] * width:.1f}"' if pattern else ""
