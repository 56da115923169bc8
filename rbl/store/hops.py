"""hops.jsonl: what each round of a topology did along its chain (rbl/runner/hops.py makes the
records), one JSON line per round, appended whole and fsynced like the results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from .durable import append_whole, storage_errors

HOPS = "hops.jsonl"


def append_hops(run_dir: Path, record: dict) -> None:
    with storage_errors(run_dir):
        append_whole(run_dir / HOPS, json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n")


def read_hops(run_dir: Path) -> Iterator[dict]:
    """The records, in the order the rounds ran; none for a run without a topology."""
    path = run_dir / HOPS
    if not path.is_file():
        return
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)
