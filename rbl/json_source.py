"""Where each value of a JSON document starts, by path, so `rbl import` can point at the key a
message is about (`clientSpecs[2].patternConfig.sleepDuration[1]`), not at its first namesake;
and how a JSON value is quoted in a message or a comment.

One iterative pass over text that json.loads has already accepted: no recursion, linear time.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal

from .compiler.diagnostics import Diagnostic, Label
from .compiler.source import SourceFile, Span

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
