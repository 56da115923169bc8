"""`rbl report` at 80 and 100 columns: no line is wider than the terminal, no interval is cut in
two, columns that do not fit are left out and named, and a finding's continuation lines stay
under its first word."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from rbl.report.keyed_table import NumberColumn, print_keyed_table
from rbl.report.terminal_text import print_indented

from .conftest import EXAMPLES
from .conftest import run_rbl as rbl

METRICS = ["successTimePerRequest", "totalExecutionTime", "latencyP95", "throughput", "totalRequests"]
INTERVAL = re.compile(r"\[[^\]\s]*\]")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("widths")
    done = rbl("run", EXAMPLES / "quickstart.rbl", "--rounds", "3", "--set", "successes=3", "-o", "run", cwd=work)
    assert done.returncode == 0, done.stderr
    return work / "run"


@pytest.mark.parametrize("columns", [80, 100])
def test_the_report_fits_the_terminal_and_says_what_it_left_out(run, tmp_path, columns):
    metric_args = [arg for metric in METRICS for arg in ("-m", metric)]
    done = rbl("report", run, *metric_args, "--resamples", "200", "-o", tmp_path / "report", cwd=tmp_path,
               env={"COLUMNS": str(columns)})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines and max(len(line) for line in lines) <= columns, max(lines, key=len)
    table = [line for line in lines if line.startswith("│")]
    assert table, done.stdout
    for line in table:                       # an interval is one word: whole on its line, or absent
        assert line.count("[") == line.count("]") == len(INTERVAL.findall(line)), line
    header = "\n".join(line for line in lines if line.startswith("┃"))
    # the note may wrap inside its list (more columns left out than one line holds): read it whole
    left_out = re.findall(r"\(\d+ columns? left out to fit (\d+) columns: (.*?); a wider", " ".join(" ".join(lines).split()))
    if columns == 80:                        # five metrics cannot fit 80 columns with their intervals
        assert left_out and left_out[0][0] == str(columns), done.stdout
    for _, listed in left_out:
        for title in listed.split(","):
            assert title.split()[0] not in header     # what is said to be left out is not in the table
    # a bullet's continuation lines start under its first word
    bullets = [i for i, line in enumerate(lines) if line.startswith("  - ")]
    assert bullets
    for i in bullets:
        following = lines[i + 1] if i + 1 < len(lines) else ""
        assert not following or following.startswith(("    ", "  - ")) or not following.startswith(" "), following


def test_a_table_too_wide_even_with_keys_drops_its_last_columns_never_an_interval():
    columns = [NumberColumn(f"metric {i}") for i in range(6)]
    rows = [(f"client.retry attempts={n}", [f"{100 + n}.5 [{90 + n}.25,{110 + n}.75]*"] * 6) for n in range(3)]
    for width in (80, 100):
        console = Console(width=width, record=True, color_system=None)
        print_keyed_table(console, "title", "configuration", columns, rows)
        text = console.export_text()
        assert max(len(line) for line in text.splitlines()) <= width
        shown = [c.header for c in columns if c.header in text.split("left out")[0]]
        assert 0 < len(shown) < 6 and f"left out to fit {width} columns" in text
        assert all(line.count("[") == line.count("]") for line in text.splitlines() if line.startswith("│"))


def test_an_indented_sentence_wraps_under_its_first_word():
    console = Console(width=40, record=True, color_system=None)
    print_indented(console, "word " * 30 + "`a-very-long-label-that-does-not-fit-anywhere-at-all`", bullet="- ")
    lines = console.export_text().splitlines()
    assert lines[0].startswith("  - word") and all(line.startswith("    ") for line in lines[1:])
    assert max(len(line) for line in lines[:-1]) <= 40
    assert lines[-1].strip() == "`a-very-long-label-that-does-not-fit-anywhere-at-all`"    # kept whole
