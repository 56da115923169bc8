"""Render diagnostics rustc-style: headline, --> location, source gutter, carets, help."""

from __future__ import annotations

from .diagnostics import Diagnostic, Label


def render(diagnostic: Diagnostic, colour: bool = False) -> str:
    out = [f"{diagnostic.severity}[{diagnostic.code}]: {diagnostic.message}"]
    labels = list(diagnostic.labels)
    width = max((len(str(label.span.line)) for label in labels), default=1)
    pad = " " * width
    for index, (file, group) in enumerate(_by_file(labels)):
        primary = next((label for label in group if label.primary), group[0])
        out.append(f"{pad}{'-->' if index == 0 else ':::'} {primary.span.location}")
        out.append(f"{pad} |")
        previous_line = None
        for label in sorted(group, key=lambda label: (label.span.line, label.span.col)):
            if previous_line is not None and label.span.line > previous_line + 1:
                out.append("...")
            if label.span.line != previous_line:
                out.append(_source_line(label, width, colour))
            out.append(_marker(label, width))
            previous_line = label.span.line
    if labels:
        out.append(f"{pad} |")
    for note in diagnostic.notes:
        out.append(f"{pad} = note: {note}")
    if diagnostic.help:
        out.append(f"{pad} = help: {diagnostic.help}")
    return "\n".join(out)


def _by_file(labels: list[Label]):
    """Labels grouped by file, the primary label's file first."""
    groups: dict[int, tuple[object, list[Label]]] = {}
    for label in sorted(labels, key=lambda label: not label.primary):
        groups.setdefault(id(label.span.file), (label.span.file, []))[1].append(label)
    return list(groups.values())


def _text(label: Label) -> str:
    return label.span.file.line(label.span.line).replace("\t", " ")


def _source_line(label: Label, width: int, colour: bool = False) -> str:
    text = _text(label).rstrip()
    if colour:
        from ..highlight import colour_source_line
        text = colour_source_line(text)
    return f"{str(label.span.line).rjust(width)} | {text}".rstrip()


def _marker(label: Label, width: int) -> str:
    span = label.span
    start = max(span.col, 1)
    if span.end_line == span.line:
        end = max(span.end_col, start + 1)
    else:  # multi-line spans: mark to the end of the first line
        end = max(len(_text(label)) + 1, start + 1)
    mark = ("^" if label.primary else "-") * (end - start)
    return f"{' ' * width} | {' ' * (start - 1)}{mark} {label.message}".rstrip()


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
