"""README.md's library x pattern table says what the catalogue (rbl/libraries/prelude.rbl) says: a mark
for each pattern a library has, none for one it lacks, and its composition."""

from __future__ import annotations

from pathlib import Path

from rbl.libraries.catalogue import builtin_libraries

README = Path(__file__).resolve().parent.parent / "README.md"
MARK, NONE = "✓", "–"


def table() -> tuple[list[str], list[list[str]]]:
    text = README.read_text(encoding="utf-8")
    inside = text.split("<!-- pattern-table -->", 1)[1].split("<!-- /pattern-table -->", 1)[0]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in inside.strip().splitlines()]
    header, _rule, *body = rows
    return header, body


def test_every_builtin_library_has_a_row_and_every_row_a_library():
    _, body = table()
    assert [row[0].split()[0] for row in body] == list(builtin_libraries())


def test_each_mark_is_a_pattern_the_catalogue_declares_and_each_gap_one_it_lacks():
    header, body = table()
    patterns = header[2:-1]
    declared = {p for library in builtin_libraries().values() for p in library.patterns} - {"baseline"}
    assert set(patterns) == declared, "the table has a column for every pattern of the catalogue"
    for row in body:
        library = builtin_libraries()[row[0].split()[0]]
        for pattern, mark in zip(patterns, row[2:-1]):
            assert mark == (MARK if pattern in library.patterns else NONE), (library.name, pattern, mark)
        assert row[-1] == (library.composition or NONE), library.name
