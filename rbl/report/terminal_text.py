"""Sentences for the terminal that wrap under themselves: a bullet's continuation lines start
under its first word, not at column 0, so a list of findings stays a list at 80 columns."""

from __future__ import annotations

import textwrap

from rich.console import Console


def print_indented(console: Console, text: str, indent: int = 2, bullet: str = "") -> None:
    """`text` (plain) after `indent` spaces and `bullet`, wrapped at the console's width with a
    hanging indent; a word longer than a line (a long label) is kept whole."""
    lead = " " * indent + bullet
    lines = textwrap.wrap(text, width=max(20, console.width - len(lead)), break_long_words=False,
                          break_on_hyphens=False) or [""]
    for number, line in enumerate(lines):
        console.print((lead if number == 0 else " " * len(lead)) + line, markup=False, highlight=False,
                      soft_wrap=True)
