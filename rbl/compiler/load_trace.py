"""A load trace: the shape of an open-loop load over time, read from a CSV file (`load.profile =
trace`, `load.trace = "FILE.csv"`), as replayed from a production system or drawn from a paper.

The file has a header `seconds,factor` and one point per line: a time from the round's start and a
factor of the load's rate (`load.rate` or `load.rps`) at that time. Between points the rate moves
linearly; before the first it is the first point's, after the last the last one's. So with
`load.rps = 1` the factors are requests per second, and with `load.rate = 100%` shares of capacity.
Blank lines and lines starting with `#` are skipped.

The points go into the plan (the profile's `points`), so a compiled plan runs without the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from ..lang.source import SourceFile, Span

HEADER = ("seconds", "factor")
MAX_TRACE_BYTES = 1_000_000
MAX_TRACE_POINTS = 10_000          # inline in every scenario's load record: a 30-min trace at 1 s is 1,800
MAX_FACTOR = Fraction(100)
MAX_SECONDS = Fraction(86_400)     # load.duration's own bound
_NUMBER = re.compile(r"[0-9]{1,12}(\.[0-9]{1,9})?")


@dataclass(frozen=True)
class TraceProblem:
    """Where a trace file is wrong: its span (in the file), what is wrong, the label there and a hint."""

    span: Span | None
    message: str
    label: str
    help: str


@dataclass(frozen=True)
class Trace:
    source: str                                      # the path as the spec wrote it
    points: tuple[tuple[Fraction, Fraction], ...]    # (seconds, factor), times strictly increasing

    @property
    def end_s(self) -> Fraction:
        return self.points[-1][0]

    @property
    def highest(self) -> Fraction:
        return max(factor for _, factor in self.points)

    def record(self) -> list[list[int | float]]:
        return [[_native(t), _native(f)] for t, f in self.points]


def _native(value: Fraction) -> int | float:
    return int(value) if value.denominator == 1 else float(value)


def resolve(path_text: str, spec_name: str) -> Path:
    """The trace's path: as written if absolute, else beside the spec (the working directory for a
    spec that is no file, such as standard input)."""
    path = Path(path_text)
    spec = Path(spec_name)
    if path.is_absolute() or spec_name.startswith("<") or not spec.parent.parts:
        return path
    return spec.parent / path


def read_trace(path_text: str, spec_name: str) -> Trace | TraceProblem:
    """The trace `path_text` names (relative to the spec `spec_name`), or what is wrong with it."""
    path = resolve(path_text, spec_name)
    try:
        if not path.is_file():
            return TraceProblem(None, f"no trace file {str(path)!r}", "not a file",
                                "give the CSV's path relative to the spec (header `seconds,factor`)")
        with path.open("rb") as handle:
            data = handle.read(MAX_TRACE_BYTES + 1)
    except OSError as error:
        return TraceProblem(None, f"cannot read the trace {str(path)!r}: {error.strerror or error}", "unreadable",
                            "check the file's permissions")
    if len(data) > MAX_TRACE_BYTES:
        return TraceProblem(None, f"the trace {str(path)!r} is larger than {MAX_TRACE_BYTES:,} bytes", "too large",
                            f"at most {MAX_TRACE_POINTS:,} points; resample it (one point a second is plenty)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        return TraceProblem(None, f"the trace {str(path)!r} is not UTF-8 (byte {error.start})", "not UTF-8",
                            "save the CSV as UTF-8")
    return parse_trace(SourceFile(str(path), text), path_text)


def parse_trace(source: SourceFile, path_text: str) -> Trace | TraceProblem:
    points: list[tuple[Fraction, Fraction]] = []
    header_seen = False
    for number, line in enumerate(source.text.split("\n"), 1):
        line = line.rstrip("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cells = line.split(",")
        if not header_seen:
            header_seen = True
            if tuple(cell.strip().lower() for cell in cells) != HEADER:
                return _problem(source, number, 1, len(line), f"the trace's header must be `{','.join(HEADER)}`",
                                "not the header", "the first line names the columns: seconds,factor")
            continue
        if len(cells) != 2:
            return _problem(source, number, 1, len(line), f"a trace line holds 2 values, this one {len(cells)}",
                            "expected `seconds,factor`", "one point per line, e.g. `30,1.2`")
        values = []
        column = 1
        for cell, what in zip(cells, HEADER):
            start = column + len(cell) - len(cell.lstrip())
            text = cell.strip()
            if not _NUMBER.fullmatch(text):
                return _problem(source, number, start, max(1, len(text)),
                                f"the trace's {what} must be a plain decimal number, found {text[:20]!r}",
                                "not a number", "digits with an optional decimal point, e.g. 12.5")
            values.append((Fraction(text), start, len(text)))
            column += len(cell) + 1
        (seconds, s_col, s_len), (factor, f_col, f_len) = values
        if points and seconds <= points[-1][0]:
            return _problem(source, number, s_col, s_len, f"the trace's times must increase: {text_of(seconds)} s "
                            f"follows {text_of(points[-1][0])} s", "not after the previous point",
                            "sort the points by time; one point per time")
        if seconds > MAX_SECONDS:
            return _problem(source, number, s_col, s_len, f"a trace point at {text_of(seconds)} s is beyond a round's "
                            f"{text_of(MAX_SECONDS)} s", "too late", "a round lasts at most 24 h")
        if factor > MAX_FACTOR:
            return _problem(source, number, f_col, f_len, f"a trace factor of {text_of(factor)} is more than "
                            f"{text_of(MAX_FACTOR)}", "too high",
                            "factors multiply the load's rate; scale the rate instead")
        if len(points) == MAX_TRACE_POINTS:
            return _problem(source, number, 1, len(line), f"the trace has more than {MAX_TRACE_POINTS:,} points",
                            "one too many", "resample it (one point a second is plenty)")
        points.append((seconds, factor))
    if not points:
        line, _ = source.end
        return _problem(source, line, 1, 1, "the trace has no points", "nothing after the header",
                        "add lines `seconds,factor`, e.g. `0,1` and `60,1.4`")
    if all(factor == 0 for _, factor in points):
        return _problem(source, 1, 1, 1, "every factor of the trace is 0: it sends nothing", "no load",
                        "a factor of 1 is the load's rate")
    return Trace(path_text, tuple(points))


def text_of(value: Fraction) -> str:
    return f"{float(value):g}"


def _problem(source: SourceFile, line: int, col: int, length: int, message: str, label: str,
             hint: str) -> TraceProblem:
    return TraceProblem(Span(source, line, col, line, col + max(1, length)), message, label, hint)
