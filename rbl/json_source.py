"""Where each value of a JSON document starts, by path, so `rbl import` can point at the key a
message is about (`clientSpecs[2].patternConfig.sleepDuration[1]`), not at its first namesake;
how a JSON value is quoted in a message or a comment; and how its numbers are read exactly
(read_number), those no number type holds included, so that they are reported where they stand.

One iterative pass over text that json.loads has already accepted: no recursion, linear time.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal, InvalidOperation

from .lang.diagnostics import Diagnostic, Label
from .lang.source import SourceFile, Span

Path = tuple[str | int, ...]

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+', re.S)
MAX_DEPTH = 8        # rbl reads nothing deeper than clientSpecs[i].patternConfig.key[j]


def json_locations(text: str) -> dict[Path, tuple[int, int, int]]:
    """path -> (offset, line, column) of the key (in an object) or the value (in an array)."""
    found: dict[Path, tuple[int, int, int]] = {}
    stack: list[list] = []            # per open container: [path, is_object, next key or index]
    line, line_start, scanned = 1, 0, 0
    expecting_key = False
    for match in _TOKEN.finditer(text):
        start = match.start()
        newlines = text.count("\n", scanned, start)
        if newlines:
            line += newlines
            line_start = text.rindex("\n", scanned, start) + 1
        scanned = start
        token = match.group()
        where = (start, line, start - line_start + 1)
        top = stack[-1] if stack else None
        if token in ",:":
            if token == "," and top is not None:
                if top[1]:
                    expecting_key = True
                else:
                    top[2] += 1
            continue
        if token in "}]":
            stack.pop()
            continue
        if top is not None and top[1] and expecting_key:     # an object's key
            expecting_key = False
            key = _key_text(token)
            top[2] = key
            if len(top[0]) < MAX_DEPTH:
                found.setdefault(top[0] + (key,), where)
            continue
        path: Path = () if top is None else top[0] + (top[2],)
        if top is not None and not top[1] and len(path) <= MAX_DEPTH:
            found.setdefault(path, where)
        if token in "{[":
            stack.append([path, token == "{", 0])
            expecting_key = token == "{"
    return found


def _key_text(token: str) -> str:
    try:
        return json.loads(token)
    except ValueError:
        return token.strip('"')


# Integers longer than this are not converted: Python refuses int() of more than 4300 digits,
# and no benchmark setting needs a tenth of them.
MAX_INT_DIGITS = 4000
_ZERO = re.compile(r"-?0+(\.0*)?[eE]")


class UnreadableNumber:
    """A JSON number no number type holds (`1e999999999999999999999`, 10^5 digits), kept as its
    text so the value that uses it can be reported at its own path instead of failing the read."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"UnreadableNumber({shown(self)})"


def read_number(text: str) -> Decimal | UnreadableNumber:
    """json.loads' parse_float: a number with a fraction or an exponent, exactly. The decimal
    module refuses exponents beyond about 10^18 (InvalidOperation, not ValueError)."""
    try:
        return Decimal(text)
    except (InvalidOperation, ValueError):
        if _ZERO.match(text):                # 0e-99999999999999999999 is still 0
            return Decimal(0)
        return UnreadableNumber(text)


def read_integer(text: str) -> int | UnreadableNumber:
    """json.loads' parse_int: an integer, or too long a one kept as text."""
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        return UnreadableNumber(text)
    return int(text)


def path_text(path: Path) -> str:
    """clientSpecs[2].patternConfig.sleepDuration, as a user reads it."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def shown(value, limit: int = 60) -> str:
    """A JSON value quoted for a message or a spec comment: one line, control characters escaped."""
    if isinstance(value, Decimal):           # a JSON number read exactly
        return str(value)
    if isinstance(value, UnreadableNumber):
        text = value.text
        return text if len(text) <= limit else text[:limit - 3] + "..."
    try:
        text = json.dumps(value, ensure_ascii=True, default=str)
    except (ValueError, RecursionError):
        text = "<value>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


class ImportFailed(Exception):
    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


class JsonSource:
    """The JSON text, for locating the value a message is about."""

    def __init__(self, source: SourceFile):
        self.source = source
        self.locations = json_locations(source.text)

    def span_of(self, path: Path) -> Span:
        for length in range(len(path), 0, -1):
            found = self.locations.get(tuple(path[:length]))
            if found is not None:
                _, line, col = found
                return Span(self.source, line, col, line, col + 1)
        return Span.point(self.source, 1, 1)

    def diagnostic(self, code: str, severity: str, message: str, path: Path, hint: str | None = None,
                   notes: tuple[str, ...] = ()) -> Diagnostic:
        return Diagnostic(code, severity, message, (Label(self.span_of(path), path_text(path)),), notes, hint)

    def fail(self, message: str, path: Path, hint: str | None = None) -> ImportFailed:
        return ImportFailed(self.diagnostic("E0401", "error", message, path, hint))
