"""controllers.jsonl: every decision a controller took during a run's rounds (rbl/runner/controllers.py
makes the records), one JSON line per decision, appended whole and fsynced like the results: the
window it saw, the value it set, and how long putting it in force took."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from .durable import append_whole, storage_errors

CONTROLLERS = "controllers.jsonl"


def append_decision(run_dir: Path, record: dict) -> None:
    with storage_errors(run_dir):
        append_whole(run_dir / CONTROLLERS, json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n")


def read_decisions(run_dir: Path) -> Iterator[dict]:
    """The decisions, in the order they were taken; none for a run without a controller."""
    path = run_dir / CONTROLLERS
    if not path.is_file():
        return
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)
