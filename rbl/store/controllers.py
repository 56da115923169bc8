"""controllers.jsonl: every decision a controller took during a run's rounds (rbl/runner/controllers.py
makes the records), one JSON line per decision (record_lines.py): the window it saw, the value it
set, and how long putting it in force took."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from .record_lines import append_line, read_lines

CONTROLLERS = "controllers.jsonl"


def append_decision(run_dir: Path, record: dict) -> None:
    append_line(run_dir, CONTROLLERS, record)


def read_decisions(run_dir: Path) -> Iterator[dict]:
    """The decisions, in the order they were taken; none for a run without a controller."""
    return read_lines(run_dir, CONTROLLERS)
