"""Diagnostics as values: collected by every stage, rendered once (see render.py)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from .source import Span

Severity = Literal["error", "warning"]

# A hostile spec can repeat one mistake 10^5 times: keep the first ones of each code and say how
# many more there were, so the output stays readable and its size bounded.
MAX_PER_CODE = 50
# Messages, labels, notes and help quote spec values (a 10 MB string, a 4000-digit number):
# each text is cut to this many characters.
MAX_TEXT = 300
# Help lists what would be valid (a composed client's parameters: about 800 characters at most in the
# catalogue): cut only where a hostile spec's own text would make it long.
MAX_HELP = 1500


def clip(text: str, limit: int = MAX_TEXT) -> str:
    """text, cut to `limit` characters with a note of how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


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
    counts: dict[str, int] = field(default_factory=dict)      # code -> diagnostics reported
    error_count: int = 0

    def error(self, code: str, message: str, span: Span | None, label: str = "", *,
              secondary: tuple[tuple[Span, str], ...] = (), notes: tuple[str, ...] = (),
              help: str | None = None) -> None:
        self._add("error", code, message, span, label, secondary, notes, help)

    def warning(self, code: str, message: str, span: Span | None, label: str = "", *,
                secondary: tuple[tuple[Span, str], ...] = (), notes: tuple[str, ...] = (),
                help: str | None = None) -> None:
        self._add("warning", code, message, span, label, secondary, notes, help)

    def capped(self, code: str, severity: Severity = "error") -> bool:
        """True when another `code` would not be shown: it is counted here, and the caller skips
        building it (suggestions for 10^5 unknown names would cost more than the parse)."""
        if self.counts.get(code, 0) < MAX_PER_CODE:
            return False
        self.counts[code] += 1
        self.error_count += severity == "error"
        return True

    def _add(self, severity, code, message, span, label, secondary, notes, help) -> None:
        self.counts[code] = self.counts.get(code, 0) + 1
        self.error_count += severity == "error"
        if self.counts[code] > MAX_PER_CODE:
            return
        labels = ([Label(span, clip(label), True)] if span is not None else [])
        labels += [Label(s, clip(m), False) for s, m in secondary if s is not None]
        self.items.append(Diagnostic(code, severity, clip(message), tuple(labels),
                                     tuple(clip(n) for n in notes), clip(help, MAX_HELP) if help else help))

    @property
    def has_errors(self) -> bool:
        return self.error_count > 0

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == "warning"]

    def sorted(self) -> list[Diagnostic]:
        """Errors and warnings in source order (stable for equal positions); the last one shown
        of a code that was capped says how many more were left out."""
        def key(d: Diagnostic):
            p = d.primary
            return (p.span.file.name, p.span.line, p.span.col) if p else ("", 0, 0)
        items = sorted(self.items, key=key)
        for code, count in self.counts.items():
            if count > MAX_PER_CODE:
                last = max(i for i, d in enumerate(items) if d.code == code)
                more = f"{count - MAX_PER_CODE} more {code} diagnostics like this were not shown"
                items[last] = replace(items[last], notes=(*items[last].notes, more))
        return items


class CompileError(Exception):
    """Raised by the pipeline's callers when a stage produced errors; carries them all."""

    def __init__(self, diagnostics: list[Diagnostic]):
        super().__init__(f"{len(diagnostics)} diagnostic(s)")
        self.diagnostics = diagnostics
