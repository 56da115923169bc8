"""hops.jsonl: what each round of a topology did along its chain (rbl/runner/hops.py makes the
records), one JSON line per round (record_lines.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from .record_lines import append_line, read_lines

HOPS = "hops.jsonl"


def append_hops(run_dir: Path, record: dict) -> None:
    append_line(run_dir, HOPS, record)


def read_hops(run_dir: Path) -> Iterator[dict]:
    """The records, in the order the rounds ran; none for a run without a topology."""
    return read_lines(run_dir, HOPS)
