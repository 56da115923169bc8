"""Diagnostics as values: collected by every stage, rendered once (see render.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .source import Span

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Label:
    span: Span
    message: str = ""
    primary: bool = True


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    severity: Severity
    message: str
    labels: tuple[Label, ...] = ()
    notes: tuple[str, ...] = ()
    help: str | None = None

    @property
    def primary(self) -> Label | None:
        return next((label for label in self.labels if label.primary), None)

    @property
    def location(self) -> str:
        primary = self.primary
        return primary.span.location if primary else "<unknown>"


@dataclass
class Diagnostics:
    """The collector every pass writes to."""

    items: list[Diagnostic] = field(default_factory=list)

    def error(self, code: str, message: str, span: Span | None, label: str = "", *,
              secondary: tuple[tuple[Span, str], ...] = (), notes: tuple[str, ...] = (),
              help: str | None = None) -> None:
        self._add("error", code, message, span, label, secondary, notes, help)

    def warning(self, code: str, message: str, span: Span | None, label: str = "", *,
                secondary: tuple[tuple[Span, str], ...] = (), notes: tuple[str, ...] = (),
                help: str | None = None) -> None:
        self._add("warning", code, message, span, label, secondary, notes, help)

    def _add(self, severity, code, message, span, label, secondary, notes, help) -> None:
        labels = ([Label(span, label, True)] if span is not None else [])
        labels += [Label(s, m, False) for s, m in secondary if s is not None]
        self.items.append(Diagnostic(code, severity, message, tuple(labels), tuple(notes), help))

    @property
    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.items)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == "warning"]

    def sorted(self) -> list[Diagnostic]:
        """Errors and warnings in source order (stable for equal positions)."""
        def key(d: Diagnostic):
            p = d.primary
            return (p.span.file.name, p.span.line, p.span.col) if p else ("", 0, 0)
        return sorted(self.items, key=key)


class CompileError(Exception):
    """Raised by the pipeline's callers when a stage produced errors; carries them all."""

    def __init__(self, diagnostics: list[Diagnostic]):
        super().__init__(f"{len(diagnostics)} diagnostic(s)")
        self.diagnostics = diagnostics
