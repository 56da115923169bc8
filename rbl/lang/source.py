"""Source files and spans: where every AST node and diagnostic points."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

# Lines are split on "\n" only, as Lark counts them: str.splitlines would also split on \f, \v,
# \x1c-\x1e, \x85, U+2028 and U+2029 and make diagnostics quote the wrong line.
_NEWLINE = "\n"
# The line index keeps one checkpoint per chunk of text instead of one offset per line, so a
# file of 10^7 blank lines costs a few hundred KB of index, not hundreds of MB.
_CHUNK = 1 << 12


class _LineIndex:
    """Finds the text of line n in time bounded by one chunk, after one linear pass."""

    def __init__(self, text: str):
        self.text = text
        self.chunk_lines = [0]          # newlines before the start of each chunk
        for start in range(0, len(text), _CHUNK):
            self.chunk_lines.append(self.chunk_lines[-1] + text.count(_NEWLINE, start, start + _CHUNK))

    @property
    def count(self) -> int:
        return self.chunk_lines[-1] + 1

    def start(self, number: int) -> int:
        """Offset of the first character of line `number` (1-based, 1 <= number <= count)."""
        if number == 1:
            return 0
        wanted = number - 1                      # newlines before the line
        chunk = bisect_right(self.chunk_lines, wanted - 1) - 1
        position = chunk * _CHUNK
        for _ in range(wanted - self.chunk_lines[chunk]):
            position = self.text.index(_NEWLINE, position) + 1
        return position

    def line(self, number: int) -> str:
        if not 1 <= number <= self.count:
            return ""
        start = self.start(number)
        end = self.text.find(_NEWLINE, start)
        text = self.text[start:] if end < 0 else self.text[start:end]
        return text[:-1] if text.endswith("\r") else text


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A named text the compiler read; diagnostics quote lines from it."""

    name: str
    text: str
    _index: list = field(default_factory=list, init=False, repr=False, compare=False)

    def _lines(self) -> _LineIndex:
        if not self._index:                      # built on the first quote, once
            self._index.append(_LineIndex(self.text))
        return self._index[0]

    def line(self, number: int) -> str:
        return self._lines().line(number)

    @property
    def end(self) -> tuple[int, int]:
        """(line, column) just past the last character, 1-based."""
        last = self.text.rfind(_NEWLINE)
        return self.text.count(_NEWLINE) + 1, len(self.text) - last


@dataclass(frozen=True, slots=True)
class Span:
    """A half-open region of a source file, 1-based lines and columns."""

    file: SourceFile
    line: int
    col: int
    end_line: int
    end_col: int

    def __repr__(self) -> str:  # keep AST reprs short
        return f"Span({self.file.name}:{self.line}:{self.col})"

    @property
    def location(self) -> str:
        return f"{self.file.name}:{self.line}:{self.col}"

    def to(self, other: "Span") -> "Span":
        """The span from the start of self to the end of other."""
        return Span(self.file, self.line, self.col, other.end_line, other.end_col)

    @classmethod
    def of_token(cls, file: SourceFile, token) -> "Span":
        return cls(file, token.line, token.column, token.end_line, token.end_column)

    @classmethod
    def point(cls, file: SourceFile, line: int, col: int) -> "Span":
        return cls(file, line, col, line, col + 1)
