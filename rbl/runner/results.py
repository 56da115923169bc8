"""The run directory (DESIGN 5.3): plan, manifest, results.jsonl, failures, CSV, logs.

results.jsonl holds one row per (scenario, round, virtual user). All rows of a round are written
with one write, flushed and fsynced, so a crash loses nothing finished. `--resume` drops any
round left incomplete by a crash (and a torn last line), then skips every complete round, so each
row appears exactly once.
"""

from __future__ import annotations

import csv
import json
import os
from collections import Counter
from pathlib import Path
from typing import Iterable, Iterator

from ..errors import UsageError
from .metrics import LATENCY_COLUMNS, METRIC_COLUMNS

PLAN = "plan.json"
SCENARIOS = "scenarios.jsonl"
MANIFEST = "manifest.json"
RESULTS = "results.jsonl"
FAILURES = "failures.jsonl"
CSV_FILE = "results.csv"
LOGS = "logs"

# The original tool's columns (scheduler/app.py and its clients' ResilienceModuleMetrics) ...
ORIGINAL_COLUMNS = ("userId", "startTime", "endTime", "users", "round", "lib", "strategy",
                    "faultPercentage", "faultType", "faultStatus", "faultDuration", *METRIC_COLUMNS)
# ... then the configuration keys, then rbl's own columns.
RBL_COLUMNS = ("scenarioId", "scenarioIndex", "client", "share", "libraryVersion", "stoppedBy",
               "faultRateApplied", "proxyRequests", *LATENCY_COLUMNS)


def _dump(record: dict) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


class RunDirectory:
    def __init__(self, path: Path):
        self.path = path
        self.logs = path / LOGS
        self.completed: set[tuple[str, int]] = set()
        self.rows_written = 0

    # -- creation and resumption -------------------------------------------------------------
    @classmethod
    def create(cls, path: Path, header: dict, scenario_lines: Iterable[str]) -> "RunDirectory":
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise UsageError(f"{path} already exists and is not empty",
                             hint=f"continue it with `rbl run --resume {path}`, or choose another -o")
        path.mkdir(parents=True, exist_ok=True)
        run = cls(path)
        run.logs.mkdir()
        with (path / SCENARIOS).open("w", encoding="utf-8") as out:
            for line in scenario_lines:
                out.write(line + "\n")
        header = {**header, "scenarios_file": SCENARIOS}
        header.pop("scenarios", None)
        (path / PLAN).write_text(json.dumps(header, indent=2) + "\n", encoding="utf-8")
        (path / RESULTS).touch()
        return run

    @classmethod
    def resume(cls, path: Path) -> "RunDirectory":
        if not (path / PLAN).is_file() or not (path / SCENARIOS).is_file():
            raise UsageError(f"{path} is not an rbl run directory (no {PLAN} and {SCENARIOS})",
                             hint="pass the directory an earlier `rbl run` wrote (its -o)")
        run = cls(path)
        run.logs.mkdir(exist_ok=True)
        run._repair()
        return run

    def _repair(self) -> None:
        """Keep only complete rounds; rewrite results.jsonl if a crash left anything else."""
        results = self.path / RESULTS
        rows = []
        torn = False
        if results.exists():
            for line in results.read_text(encoding="utf-8").splitlines():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    torn = True
        per_round = Counter((r["scenarioId"], r["round"]) for r in rows)
        expected = {(r["scenarioId"], r["round"]): r["users"] for r in rows}
        complete = {key for key, count in per_round.items() if count == expected[key]}
        kept = [r for r in rows if (r["scenarioId"], r["round"]) in complete]
        if torn or len(kept) != len(rows):
            temporary = results.with_suffix(".jsonl.tmp")
            temporary.write_text("".join(_dump(r) + "\n" for r in kept), encoding="utf-8")
            os.replace(temporary, results)
        self.completed = complete
        self.rows_written = len(kept)

    # -- reading -----------------------------------------------------------------------------
    def plan_header(self) -> dict:
        return json.loads((self.path / PLAN).read_text(encoding="utf-8"))

    def scenarios(self) -> Iterator[dict]:
        with (self.path / SCENARIOS).open(encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    yield json.loads(line)

    def rows(self) -> Iterator[dict]:
        with (self.path / RESULTS).open(encoding="utf-8") as lines:
            for line in lines:
                yield json.loads(line)

    def failures(self) -> list[dict]:
        path = self.path / FAILURES
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

    # -- writing -----------------------------------------------------------------------------
    def append_round(self, rows: list[dict]) -> None:
        self._append(RESULTS, rows)
        self.rows_written += len(rows)
        if rows:
            self.completed.add((rows[0]["scenarioId"], rows[0]["round"]))

    def record_failure(self, failure: dict) -> None:
        self._append(FAILURES, [failure])

    def _append(self, name: str, records: list[dict]) -> None:
        data = "".join(_dump(r) + "\n" for r in records)
        with (self.path / name).open("a", encoding="utf-8") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())

    def write_manifest(self, manifest: dict) -> None:
        temporary = self.path / (MANIFEST + ".tmp")
        temporary.write_text(json.dumps(manifest, indent=2, default=str) + "\n", encoding="utf-8")
        os.replace(temporary, self.path / MANIFEST)

    def read_manifest(self) -> dict:
        path = self.path / MANIFEST
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}

    def write_csv(self) -> Path:
        """The consolidated CSV: original columns, configuration keys, rbl's columns."""
        config_keys: dict[str, None] = {}
        for row in self.rows():
            config_keys.update(dict.fromkeys(row.get("config", {})))
        columns = [*ORIGINAL_COLUMNS, *config_keys, *RBL_COLUMNS]
        path = self.path / CSV_FILE
        with path.open("w", encoding="utf-8", newline="") as out:
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(columns)
            for row in self.rows():
                flat = {**row, **row.get("config", {})}
                writer.writerow([_cell(flat.get(column)) for column in columns])
        return path


def _cell(value) -> object:
    if value is None:
        return ""
    if value is True or value is False:
        return str(value).lower()
    return value
