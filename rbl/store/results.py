"""The run directory (docs/running.md): plan, manifest, results.jsonl, failures, CSV, logs.

results.jsonl holds one row per (scenario, round, virtual user). All rows of a round are written
with one write, flushed and fsynced (and cut back if the write fails), so a crash or a full disk
loses nothing finished. A new run directory appears whole or not at all: it is built in a hidden
sibling and renamed into place. Whoever runs a directory holds its lock (run_lock.py). `--resume`
drops unreadable lines and any round left incomplete, then skips every complete round, so each
row appears exactly once.
"""

from __future__ import annotations

import csv
import errno
import json
import os
import shutil
import secrets
import time
from collections import defaultdict
from pathlib import Path
from typing import Iterable, Iterator

from ..errors import UsageError
from .durable import (BALLAST, append_whole, fsync_directory, release_ballast, reserve_ballast, storage_errors,
                      write_atomically)
from .metrics import LATENCY_COLUMNS, METRIC_COLUMNS, SPIN_FREE_COLUMNS
from .run_checks import manifest_problem, parse_line, plan_problem, row_problem, scenario_problem
from .run_lock import LOCK_FILE, RunLock

PLAN = "plan.json"
SCENARIOS = "scenarios.jsonl"
MANIFEST = "manifest.json"
RESULTS = "results.jsonl"
FAILURES = "failures.jsonl"
CSV_FILE = "results.csv"
LOGS = "logs"
PARTIAL = ".partial-"            # a run directory being built: .NAME.partial-XXXXXXXX, next to it
# all a partial directory can hold, so a leftover is removed only when it is certainly rbl's
PARTIAL_ENTRIES = {PLAN, SCENARIOS, MANIFEST, RESULTS, LOGS, LOCK_FILE, BALLAST, SCENARIOS + ".tmp",
                   PLAN + ".tmp", MANIFEST + ".tmp"}
PARTIAL_GRACE_S = 60
MAX_WARNINGS = 10                # per kind; then "and N more"

# The original tool's columns (scheduler/app.py and its clients' ResilienceModuleMetrics) ...
ORIGINAL_COLUMNS = ("userId", "startTime", "endTime", "users", "round", "lib", "strategy",
                    "faultPercentage", "faultType", "faultStatus", "faultDuration", *METRIC_COLUMNS)
# ... then the configuration keys, then rbl's own columns.
RBL_COLUMNS = ("scenarioId", "scenarioIndex", "client", "share", "libraryVersion", "stoppedBy",
               "faultRateApplied", "proxyRequests", *LATENCY_COLUMNS, "warmup", *SPIN_FREE_COLUMNS,
               "oracleViolations")


def _dump(record: dict) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


def damaged(path: Path, what: str) -> UsageError:
    return UsageError(f"the run directory {path.parent} is damaged: {path.name} {what}",
                      hint="start a new run (rbl run SPEC -o NEW_DIR); this one cannot be resumed")


class RunDirectory:
    def __init__(self, path: Path):
        self.path = path
        self.logs = path / LOGS
        self.completed: set[tuple[str, int]] = set()
        self.rows_written = 0
        self.warnings: list[str] = []       # what --resume repaired, for the console
        self.lock: RunLock | None = None

    # -- creation and resumption -------------------------------------------------------------
    @classmethod
    def create(cls, path: Path, header: dict, scenario_lines: Iterable[str],
               manifest: dict | None = None) -> "RunDirectory":
        """Build the directory next to `path` and rename it into place once complete and on disk,
        so a crash or a full disk never leaves a half-made run directory that -o and --resume reject."""
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise UsageError(f"{path} already exists and is not empty",
                             hint=f"continue it with `rbl run --resume {path}`, or choose another -o")
        with storage_errors(path, resumable=False):
            path.parent.mkdir(parents=True, exist_ok=True)
            _remove_abandoned_partials(path)
            # not mkdtemp: its 0700 would become the run directory's mode; mkdir honours the umask
            partial = path.parent / f".{path.name}{PARTIAL}{secrets.token_hex(4)}"
            partial.mkdir()
        lock = None
        try:
            with storage_errors(path, resumable=False):
                lock = RunLock(partial, shown_as=path).acquire()
                _write_contents(partial, header, scenario_lines, manifest)
                fsync_directory(partial)
                try:
                    os.rename(partial, path)       # atomic; fails if someone else's run took `path`
                except OSError as error:
                    if error.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                        raise UsageError(f"{path} already exists and is not empty",
                                         hint="another rbl run created it meanwhile; choose another -o") from None
                    raise
                fsync_directory(path.parent)
        except BaseException:
            if lock is not None:
                lock.release()
            shutil.rmtree(partial, ignore_errors=True)
            raise
        run = cls(path)
        run.lock = lock
        return run

    @classmethod
    def resume(cls, path: Path) -> "RunDirectory":
        if not (path / PLAN).is_file() or not (path / SCENARIOS).is_file():
            raise UsageError(f"{path} is not an rbl run directory (no {PLAN} and {SCENARIOS})",
                             hint="pass the directory an earlier `rbl run` wrote (its -o)")
        run = cls(path)
        run.lock = RunLock(path).acquire()      # before reading: another runner may be appending
        try:
            with storage_errors(path):
                run.logs.mkdir(exist_ok=True)
                run._repair()
                run.read_manifest()             # a damaged one is set aside now, with a warning
                reserve_ballast(path)
        except BaseException:
            run.close()
            raise
        return run

    def close(self) -> None:
        """The run is over: give back the reserved space and the lock."""
        try:
            release_ballast(self.path)
        except OSError:
            pass
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def release_ballast(self) -> None:
        """The disk is full: free the reserve so the manifest can still say so."""
        try:
            release_ballast(self.path)
        except OSError:
            pass

    def _repair(self) -> None:
        """Keep only readable rows of complete rounds; rewrite results.jsonl if anything else was there."""
        header = self.plan_header()
        users_of = {s["id"]: s["users"] for s in self.scenarios(header)}
        results = self.path / RESULTS
        data = results.read_bytes() if results.exists() else b""
        bad: list[str] = []
        rounds: dict[tuple[str, int], list[dict]] = defaultdict(list)
        lines = data.split(b"\n")
        for number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            row, problem = parse_line(raw)
            if problem is None:
                problem = row_problem(row, users_of, header["rounds"] + header.get("warmup", 0))
            if problem is not None:
                torn = number == len(lines) and problem == "not JSON"     # no newline: cut short by a crash
                bad.append(f"results.jsonl line {number}: {'torn (a crash cut it short)' if torn else problem}; "
                           f"dropped, and the round it belonged to is redone")
                continue
            rounds[(row["scenarioId"], row["round"])].append(row)
        complete, kept, incomplete = set(), [], []
        for key, group in rounds.items():
            if sorted(r["userId"] for r in group) == list(range(1, users_of[key[0]] + 1)):
                complete.add(key)
                kept.extend(group)
            else:
                incomplete.append(f"round {key[1]} of scenario {key[0]} has {len(group)} rows for "
                                  f"{users_of[key[0]]} virtual users; it is redone")
        self.warnings += _capped(bad) + _capped(incomplete)
        if bad or incomplete or (data and not data.endswith(b"\n")):
            write_atomically(results, "".join(_dump(r) + "\n" for r in kept))
        self.completed = complete
        self.rows_written = len(kept)

    # -- reading -----------------------------------------------------------------------------
    def plan_header(self) -> dict:
        path = self.path / PLAN
        try:
            header = json.loads(path.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
            raise damaged(path, f"is not readable JSON ({error})") from None
        problem = plan_problem(header)
        if problem:
            raise damaged(path, f"is not a plan: {problem}")
        return header

    def scenarios(self, header: dict | None = None) -> Iterator[dict]:
        """The plan's scenarios in order; a damaged line is an error naming it, not a traceback."""
        labels = {c["label"] for c in (header or self.plan_header())["clients"]}
        path = self.path / SCENARIOS
        seen: set[str] = set()
        with path.open("rb") as lines:
            for number, raw in enumerate(lines, 1):
                if not raw.strip():
                    continue
                scenario, problem = parse_line(raw)
                problem = problem or scenario_problem(scenario, labels)
                if problem is None and scenario["id"] in seen:
                    problem = f"repeats scenario {scenario['id']}"
                if problem:
                    raise damaged(path, f"line {number} is {problem}" if problem.startswith(("a ", "not "))
                                  else f"line {number}: {problem}")
                seen.add(scenario["id"])
                yield scenario

    def rows(self) -> Iterator[dict]:
        """The rows of results.jsonl. A line that is not a valid row of this plan (damaged, or edited
        by hand) is skipped and counted in skipped_rows, as --resume would drop it."""
        header = self.plan_header()
        users_of = {s["id"]: s["users"] for s in self.scenarios(header)}
        self.skipped_rows = 0
        with (self.path / RESULTS).open("rb") as lines:
            for raw in lines:
                if not raw.strip():
                    continue
                row, problem = parse_line(raw)
                if problem is None:
                    problem = row_problem(row, users_of, header["rounds"] + header.get("warmup", 0))
                if problem is None:
                    yield row
                else:
                    self.skipped_rows += 1

    def failures(self) -> list[dict]:
        path = self.path / FAILURES
        if not path.exists():
            return []
        found = []
        for raw in path.read_bytes().splitlines():
            failure, problem = parse_line(raw)
            if problem is None and isinstance(failure, dict) and "scenarioId" in failure and "round" in failure:
                found.append(failure)
        return found

    # -- writing -----------------------------------------------------------------------------
    def append_round(self, rows: list[dict]) -> None:
        self._append(RESULTS, rows)
        self.rows_written += len(rows)
        if rows:
            self.completed.add((rows[0]["scenarioId"], rows[0]["round"]))

    def record_failure(self, failure: dict) -> None:
        self._append(FAILURES, [failure])

    def _append(self, name: str, records: list[dict]) -> None:
        with storage_errors(self.path):
            append_whole(self.path / name, "".join(_dump(r) + "\n" for r in records))

    def write_manifest(self, manifest: dict) -> None:
        with storage_errors(self.path):
            write_atomically(self.path / MANIFEST, json.dumps(manifest, indent=2, default=str) + "\n")

    def read_manifest(self) -> dict:
        """The manifest, or {} when there is none; a damaged one is set aside (with a warning)."""
        path = self.path / MANIFEST
        if not path.exists():
            return {}
        manifest, problem = parse_line(path.read_bytes())
        problem = problem or manifest_problem(manifest)
        if problem is None:
            return manifest
        kept = path.with_name(MANIFEST + ".damaged")
        os.replace(path, kept)
        self.warnings.append(f"{MANIFEST} was damaged ({problem}); a new one is started and the old one "
                             f"is kept as {kept.name}")
        return {}

    def write_csv(self) -> Path:
        """The consolidated CSV: original columns, configuration keys, rbl's columns."""
        config_keys: dict[str, None] = {}
        for row in self.rows():
            config_keys.update(dict.fromkeys(row.get("config", {})))
        columns = [*ORIGINAL_COLUMNS, *config_keys, *RBL_COLUMNS]
        path = self.path / CSV_FILE
        with storage_errors(self.path):
            temporary = path.with_name(CSV_FILE + ".tmp")
            try:
                with temporary.open("w", encoding="utf-8", newline="") as out:
                    writer = csv.writer(out, lineterminator="\n")
                    writer.writerow(columns)
                    for row in self.rows():
                        flat = {**row, **row.get("config", {})}
                        writer.writerow([_cell(flat.get(column)) for column in columns])
                os.replace(temporary, path)
            except BaseException:
                temporary.unlink(missing_ok=True)
                raise
        return path


def _write_contents(directory: Path, header: dict, scenario_lines: Iterable[str], manifest: dict | None) -> None:
    (directory / LOGS).mkdir()
    with (directory / SCENARIOS).open("w", encoding="utf-8") as out:
        for line in scenario_lines:
            out.write(line + "\n")
        out.flush()
        os.fsync(out.fileno())
    header = {**header, "scenarios_file": SCENARIOS}
    header.pop("scenarios", None)
    write_atomically(directory / PLAN, json.dumps(header, indent=2) + "\n")
    if manifest is not None:
        write_atomically(directory / MANIFEST, json.dumps(manifest, indent=2, default=str) + "\n")
    (directory / RESULTS).touch()
    reserve_ballast(directory)


def _remove_abandoned_partials(path: Path) -> None:
    """Partial directories a killed `rbl run -o PATH` left: removed when nobody holds them and
    they hold nothing but what rbl puts there (anything else is left alone, and ignored)."""
    prefix = f".{path.name}{PARTIAL}"
    for partial in path.parent.iterdir():
        if not partial.name.startswith(prefix) or partial.is_symlink() or not partial.is_dir():
            continue
        try:
            # a young one may be a concurrent run between making it and locking it
            if time.time() - partial.stat().st_mtime < PARTIAL_GRACE_S:
                continue
            if not {entry.name for entry in partial.iterdir()} <= PARTIAL_ENTRIES:
                continue
            with RunLock(partial):              # held: a run is still building it
                shutil.rmtree(partial)
        except (UsageError, OSError):
            continue


def _capped(messages: list[str]) -> list[str]:
    if len(messages) <= MAX_WARNINGS:
        return messages
    return messages[:MAX_WARNINGS] + [f"... and {len(messages) - MAX_WARNINGS} more like these"]


def _cell(value) -> object:
    if value is None:
        return ""
    if isinstance(value, list):          # oracleViolations: their messages
        return "; ".join(f"{v.get('oracle')}: {v.get('message')}" + (f" ({v['count']} times)" if v.get("count", 1) > 1 else "")
                         if isinstance(v, dict) else str(v) for v in value)
    if value is True or value is False:
        return str(value).lower()
    return value
