"""Render diagnostics rustc-style: headline, --> location, source gutter, carets, help."""

from __future__ import annotations

from .diagnostics import Diagnostic, Label


def render(diagnostic: Diagnostic) -> str:
    out = [f"{diagnostic.severity}[{diagnostic.code}]: {diagnostic.message}"]
    labels = list(diagnostic.labels)
    width = max((len(str(label.span.line)) for label in labels), default=1)
    pad = " " * width
    previous_file = None
    for label in labels:
        span = label.span
        arrow = "-->" if label.primary else ":::"
        if label.primary or span.file is not previous_file:
            out.append(f"{pad}{arrow} {span.location}")
            out.append(f"{pad} |")
        previous_file = span.file
        out.extend(_snippet(label, width))
    if labels:
        out.append(f"{pad} |")
    for note in diagnostic.notes:
        out.append(f"{pad} = note: {note}")
    if diagnostic.help:
        out.append(f"{pad} = help: {diagnostic.help}")
    return "\n".join(out)


def _snippet(label: Label, width: int) -> list[str]:
    span = label.span
    text = span.file.line(span.line).replace("\t", " ")
    start = max(span.col, 1)
    if span.end_line == span.line:
        end = max(span.end_col, start + 1)
    else:  # multi-line spans: mark to the end of the first line
        end = max(len(text) + 1, start + 1)
    mark = ("^" if label.primary else "-") * (end - start)
    lines = [f"{str(span.line).rjust(width)} | {text}".rstrip()]
    lines.append(f"{' ' * width} | {' ' * (start - 1)}{mark} {label.message}".rstrip())
    return lines


def render_all(diagnostics: list[Diagnostic]) -> str:
    text = "\n\n".join(render(d) for d in diagnostics)
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
