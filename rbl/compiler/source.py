"""Source files and spans: where every AST node and diagnostic points."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A named text the compiler read; diagnostics quote lines from it."""

    name: str
    text: str

    def line(self, number: int) -> str:
        lines = self.text.splitlines()
        if 1 <= number <= len(lines):
            return lines[number - 1]
        return ""

    @property
    def end(self) -> tuple[int, int]:
        """(line, column) just past the last character, 1-based."""
        lines = self.text.split("\n")
        return len(lines), len(lines[-1]) + 1


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
