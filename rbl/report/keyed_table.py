"""Terminal tables whose identifying column is never cut: configuration labels are printed whole
when the table fits the terminal, and otherwise replaced by short keys (A, B, ...) explained in a
legend below the table. Number columns never shrink below their widest value; headers wrap."""

from __future__ import annotations

import os
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table


@dataclass(frozen=True)
class NumberColumn:
    header: str
    justify: str = "right"


def output_width(stream, fallback: int) -> int | None:
    """The width to print tables at: the terminal's, or COLUMNS when set; a pipe or file gets
    `fallback` columns (the whole table, not one squeezed to 80)."""
    columns = os.environ.get("COLUMNS", "")
    if stream.isatty() or (columns.isascii() and columns.isdigit()):
        return None
    return fallback


def key_name(index: int) -> str:
    """A, B, ..., Z, AA, AB, ..."""
    name = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        name = chr(ord("A") + rest) + name
    return name


def print_keyed_table(console: Console, title: str, label_header: str, columns: list[NumberColumn],
                      rows: list[tuple[str, list[str]]]) -> None:
    """rows: (configuration label, the other cells as text). Cells may hold rich markup."""
    table = _table(title, label_header, columns, rows, None)
    # drawn with every label whole and no word split (each column at least its longest word), as wide
    # as rich really draws it (its own measure can be short of that): wider than the terminal, the
    # labels become keys
    if _drawn_width(console, table) <= console.width:
        console.print(table)
        return
    keys = {label: key_name(i) for i, label in enumerate(dict.fromkeys(label for label, _ in rows))}
    # still too wide with keys: the last columns are left out (never an interval cut in two), and said so
    shown = len(columns)
    while shown > 1 and _drawn_width(console, _table(title, "key", columns[:shown], _first(rows, shown), keys)) \
            > console.width:
        shown -= 1
    console.print(_table(title, "key", columns[:shown], _first(rows, shown), keys))
    if shown < len(columns):
        left_out = ", ".join(column.header for column in columns[shown:])
        console.print(f"({len(columns) - shown} column{'s' if len(columns) - shown > 1 else ''} left out to fit "
                      f"{console.width} columns: {left_out}; a wider terminal, or COLUMNS=200, shows them)",
                      highlight=False, markup=False)
    console.print(f"{label_header}:", highlight=False)
    for label, key in keys.items():
        console.print(f"  {key:>3}  {label}", highlight=False, markup=False, soft_wrap=True)


def _first(rows, count: int):
    return [(label, cells[:count]) for label, cells in rows]


def _table(title: str, label_header: str, columns: list[NumberColumn], rows, keys: dict | None) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column(label_header, no_wrap=True)
    for index, column in enumerate(columns):
        table.add_column(column.header, justify=column.justify, min_width=_min_width(rows, index, column))
    for label, cells in rows:
        table.add_row(keys[label] if keys else _escaped(label), *cells)
    return table


def _drawn_width(console: Console, table: Table) -> int:
    import io
    drawn = io.StringIO()
    Console(file=drawn, width=console.width, color_system=None).print(table, crop=False)
    return max((len(line) for line in drawn.getvalue().splitlines()), default=0)


def _min_width(rows, index: int, column: NumberColumn) -> int:
    """Wide enough for the longest word: a cell may wrap at a space, never inside a number."""
    words = [word for _, cells in rows for word in _plain(cells[index]).split()] + column.header.split()
    return max((len(word) for word in words), default=0)      # a column may be empty throughout


def _escaped(text: str) -> str:
    from rich.markup import escape
    return escape(text)


def _plain(text: str) -> str:
    from rich.text import Text
    return Text.from_markup(text).plain
