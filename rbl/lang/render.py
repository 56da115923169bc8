"""Render diagnostics rustc-style: headline, --> location, source gutter, carets, help."""

from __future__ import annotations

from .diagnostics import Diagnostic, Label

# A quoted source line shows at most this many columns, around the start of the label.
WIDTH = 100
_CONTEXT = 30          # columns shown before the label's start when the line is cut
_ELLIPSIS = "..."
_UNCUT = 1 << 62       # the end of the window of a line quoted whole

# Control characters would reach the terminal raw (a spec could move the cursor or clear the
# screen): each is shown as one visible character, so the carets stay aligned.
_VISIBLE = {code: 0x2400 + code for code in range(0x20)}
_VISIBLE.update({0x7F: 0x2421, 0x85: 0xFFFD, 0x2028: 0xFFFD, 0x2029: 0xFFFD, 0xFEFF: 0xFFFD})
_VISIBLE.update({code: 0xFFFD for code in range(0x80, 0xA0)})


def visible(text: str) -> str:
    """text with every control character (newlines too) replaced by a visible one."""
    return text.translate(_VISIBLE)


def render(diagnostic: Diagnostic, colour: bool = False) -> str:
    out = [f"{diagnostic.severity}[{diagnostic.code}]: {visible(diagnostic.message)}"]
    labels = list(diagnostic.labels)
    width = max((len(str(label.span.line)) for label in labels), default=1)
    pad = " " * width
    for index, (file, group) in enumerate(_by_file(labels)):
        primary = next((label for label in group if label.primary), group[0])
        out.append(f"{pad}{'-->' if index == 0 else ':::'} {visible(primary.span.location)}")
        out.append(f"{pad} |")
        previous_line, window = None, (1, 1)
        for label in sorted(group, key=lambda label: (label.span.line, label.span.col)):
            if previous_line is not None and label.span.line > previous_line + 1:
                out.append("...")
            if label.span.line != previous_line:
                window = _window(label)          # shared by the other labels on this line
                out.append(_source_line(label, window, width, colour))
            out.append(_marker(label, window, width))
            previous_line = label.span.line
    if labels:
        out.append(f"{pad} |")
    for note in diagnostic.notes:
        out.append(f"{pad} = note: {visible(note)}")
    if diagnostic.help:
        out.append(f"{pad} = help: {visible(diagnostic.help)}")
    return "\n".join(out)


def _by_file(labels: list[Label]):
    """Labels grouped by file, the primary label's file first."""
    groups: dict[int, tuple[object, list[Label]]] = {}
    for label in sorted(labels, key=lambda label: not label.primary):
        groups.setdefault(id(label.span.file), (label.span.file, []))[1].append(label)
    return list(groups.values())


def _window(label: Label) -> tuple[int, int]:
    """The columns [first, last) of the label's line that are quoted: all of a short line, or
    WIDTH columns starting a little before the label."""
    length = len(label.span.file.line(label.span.line))
    if length <= WIDTH:
        return 1, _UNCUT
    first = max(1, min(label.span.col - _CONTEXT, length + 1 - WIDTH))
    return first, first + WIDTH


def _text(label: Label, window: tuple[int, int]) -> str:
    """The quoted part of the label's line, with "..." where it was cut."""
    line = label.span.file.line(label.span.line)
    first, last = window
    text = visible(line[first - 1:last - 1].replace("\t", " "))
    before = _ELLIPSIS if first > 1 else ""
    after = _ELLIPSIS if last <= len(line) else ""
    return before + text + after


def _source_line(label: Label, window: tuple[int, int], width: int, colour: bool = False) -> str:
    text = _text(label, window).rstrip()
    if colour:
        from ..highlight import colour_source_line
        text = colour_source_line(text)
    return f"{str(label.span.line).rjust(width)} | {text}".rstrip()


def _marker(label: Label, window: tuple[int, int], width: int) -> str:
    span = label.span
    first, last = window
    shift = first - 1 - (len(_ELLIPSIS) if first > 1 else 0)      # columns cut before the window
    start = min(max(span.col, first), last)
    if span.end_line == span.line:
        end = max(min(span.end_col, last), start + 1)
    else:  # multi-line spans: mark to the end of the first line
        end = max(min(len(label.span.file.line(span.line)) + 1, last), start + 1)
    mark = ("^" if label.primary else "-") * (end - start)
    return f"{' ' * width} | {' ' * (start - 1 - shift)}{mark} {visible(label.message)}".rstrip()


def render_all(diagnostics: list[Diagnostic], colour: bool = False) -> str:
    """All diagnostics and a summary; `colour` highlights the source lines (a colour terminal)."""
    text = "\n\n".join(render(d, colour) for d in diagnostics)
    errors = sum(d.severity == "error" for d in diagnostics)
    warnings = len(diagnostics) - errors
    summary = []
    if errors:
        summary.append(f"{errors} error{'s' if errors != 1 else ''}")
    if warnings:
        summary.append(f"{warnings} warning{'s' if warnings != 1 else ''}")
    if summary:
        text += "\n\n" + ", ".join(summary) + " emitted"
    return text
