"""A run's JSON Lines records beside its results (hops.jsonl, controllers.jsonl): each record one line,
appended whole and fsynced like the results, and read back in the order written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from .durable import append_whole, storage_errors


def append_line(run_dir: Path, name: str, record: dict) -> None:
    with storage_errors(run_dir):
        append_whole(run_dir / name, json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n")


def read_lines(run_dir: Path, name: str) -> Iterator[dict]:
    """The records in the order written; none when the file is not there."""
    path = run_dir / name
    if not path.is_file():
        return
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)
