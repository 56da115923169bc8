"""The run directory (docs/running.md): plan, manifest, results.jsonl, failures, CSV, logs.

results.jsonl holds one row per (scenario, round, virtual user). All rows of a round are written
with one write, flushed and fsynced (and cut back if the write fails), so a crash or a full disk
loses nothing finished. A new run directory appears whole or not at all: it is built in a hidden
sibling and renamed into place. Whoever runs a directory holds its lock (run_lock.py). `--resume`
drops unreadable lines and any round left incomplete or with a user twice, then skips every
complete round, so each row appears exactly once.

Every file is read through run_reader.py (no link followed, sizes bounded, strict JSON) and checked
(run_checks.py, and the plan as `rbl run` checks a plan file): report, diff and merge read a run
directory as untrusted input, and only --resume, which owns it, changes it.
"""

from __future__ import annotations

import csv
import errno
import json
import os
import shutil
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from ..errors import UsageError
from .durable import (BALLAST, append_whole, fsync_directory, new_file, release_ballast, reserve_ballast,
                      storage_errors, write_atomically)
from .metrics import (CHAIN_COLUMNS, LATENCY_COLUMNS, METRIC_COLUMNS, PATTERN_COLUMNS, RESPONSE_CLASS_COLUMNS, SIDECAR_COLUMNS,
                      SPIN_FREE_COLUMNS)
from .own_entries import check_own_entries
from .plan_file import PlanProblem, header_problem, scenario_check
from .run_checks import failure_problem, manifest_problem, plan_problem, row_problem, scenario_problem
from .run_layout import LOGS, RUN_TREES
from .run_lock import LOCK_FILE, RunLock
from .run_reader import Line, check_member, read_document, read_lines

PLAN = "plan.json"
SCENARIOS = "scenarios.jsonl"
MANIFEST = "manifest.json"
RESULTS = "results.jsonl"
FAILURES = "failures.jsonl"
CSV_FILE = "results.csv"
PARTIAL = ".partial-"            # a run directory being built: .NAME.partial-XXXXXXXX, next to it
# all a partial directory can hold, so a leftover is removed only when it is certainly rbl's
PARTIAL_ENTRIES = {PLAN, SCENARIOS, MANIFEST, RESULTS, LOGS, LOCK_FILE, BALLAST, SCENARIOS + ".tmp",
                   PLAN + ".tmp", MANIFEST + ".tmp"}
PARTIAL_GRACE_S = 60
MAX_WARNINGS = 10                # per kind; then "and N more"
# where --resume writes (the runner, and the services' logs and Envoy's configuration): checked first
RESUME_WRITES = (RESULTS, FAILURES, MANIFEST, MANIFEST + ".tmp", MANIFEST + ".damaged", RESULTS + ".tmp",
                 CSV_FILE, CSV_FILE + ".tmp", LOCK_FILE, BALLAST)
RESUME_WRITES_BENEATH = RUN_TREES     # every directory rbl writes in (run_layout.py), links refused throughout

# The original tool's columns (scheduler/app.py and its clients' ResilienceModuleMetrics) ...
ORIGINAL_COLUMNS = ("userId", "startTime", "endTime", "users", "round", "lib", "strategy",
                    "faultPercentage", "faultType", "faultStatus", "faultDuration", *METRIC_COLUMNS)
# ... then the configuration keys, then rbl's own columns.
RBL_COLUMNS = ("scenarioId", "scenarioIndex", "client", "share", "libraryVersion", "stoppedBy",
               "faultRateApplied", "proxyRequests", *LATENCY_COLUMNS, "warmup", *SPIN_FREE_COLUMNS,
               "oracleViolations")
# ... and a mesh client's: its requests' response classes and its sidecar's counters for the round
# (written only when a row has them, so library-only runs keep their columns).
MESH_COLUMNS = (*RESPONSE_CLASS_COLUMNS, *SIDECAR_COLUMNS)
# ... and a varying target's point (written only when the plan's target varies)
TARGET_COLUMNS = ("targetPath", "targetCpus")
# ... and a timeout's, bulkhead's, rate limiter's, hedge's or fallback's (likewise only when a row has them)


def _dump(record: dict) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


def damaged(path: Path, what: str) -> UsageError:
    return UsageError(f"the run directory {path.parent} is damaged: {path.name} {what}",
                      hint="start a new run (rbl run SPEC -o NEW_DIR); this one cannot be resumed")


@dataclass
class ResultRounds:
    """results.jsonl read whole and grouped by round: the rows of each (scenarioId, round) in file
    order, what is wrong with the lines that are not rows of the plan, and the rounds in which a
    virtual user appears twice (only its first row is kept; which one is right cannot be told)."""

    rounds: dict[tuple[str, int], list[dict]] = field(default_factory=dict)
    bad: list[Line] = field(default_factory=list)           # the first MAX_WARNINGS, with bad_count
    bad_count: int = 0
    repeated: dict[tuple[str, int], list[str]] = field(default_factory=dict)   # round -> "line N repeats ..."
    rows_of: Counter = field(default_factory=Counter)       # rows per round, repeats included
    unended: bool = False                                   # the last line has no newline

    def complete(self, key: tuple[str, int], users: int) -> bool:
        """Every virtual user of the round once."""
        return key not in self.repeated and sorted(r["userId"] for r in self.rounds.get(key, ())) == \
            list(range(1, users + 1))

    def bad_lines(self, where: str) -> list[str]:
        """`WHERE:LINE: problem` for the bad lines, capped."""
        found = [f"{where}:{line.number}: {line.problem}" for line in self.bad]
        if self.bad_count > len(found):
            found.append(f"... and {self.bad_count - len(found)} more")
        return found

    def repeats(self) -> list[str]:
        return _capped([message for messages in self.repeated.values() for message in messages])


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
        if not path.is_dir() or not check_member(path, PLAN) or not check_member(path, SCENARIOS):
            raise UsageError(f"{path} is not an rbl run directory (no {PLAN} and {SCENARIOS})",
                             hint="pass the directory an earlier `rbl run` wrote (its -o)")
        check_own_entries(path, RESUME_WRITES, RESUME_WRITES_BENEATH)    # before anything is written
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
        users_of = self._users_of()
        read = self.rounds(missing_ok=True)
        bad = [f"results.jsonl line {line.number}: {_torn_or(line)}; dropped, and the round it belonged to is redone"
               for line in read.bad]
        if read.bad_count > len(bad):
            bad.append(f"... and {read.bad_count - len(bad)} more lines like these")
        complete, kept, incomplete = set(), [], []
        for key, group in read.rounds.items():
            if read.complete(key, users_of[key[0]]):
                complete.add(key)
                kept.extend(group)
            else:
                repeats = read.repeated.get(key)
                incomplete.append(f"round {key[1]} of scenario {key[0]} has {read.rows_of[key]} rows for "
                                  f"{users_of[key[0]]} virtual users" + (f" ({repeats[0]})" if repeats else "")
                                  + "; it is redone")
        self.warnings += bad + _capped(incomplete)
        if bad or incomplete or read.unended:
            write_atomically(self.path / RESULTS, "".join(_dump(r) + "\n" for r in kept))
        self.completed = complete
        self.rows_written = len(kept)

    # -- reading -----------------------------------------------------------------------------
    def plan_header(self, strict: bool = False) -> dict:
        """plan.json, checked as far as the runner uses it, or (strict) as `rbl run` checks a plan
        file: what report, diff and merge read is input, and its labels reach a terminal."""
        path = self.path / PLAN
        read = read_document(self.path, PLAN)
        if read is None:
            raise damaged(path, "is missing")
        header, problem = read
        if problem:
            raise damaged(path, f"is not readable JSON: {problem}")
        problem = plan_problem(header) or (header_problem(header) if strict else None)
        if problem:
            raise damaged(path, f"is not a plan: {problem}")
        return header

    def scenarios(self, header: dict | None = None, strict: bool = False) -> Iterator[dict]:
        """The plan's scenarios in order; a damaged line is an error naming it, not a traceback.
        Strict: each checked as `rbl run` checks a plan's (give the header plan_header(strict=True) read)."""
        header = header or self.plan_header(strict)
        labels = {c["label"] for c in header["clients"]}
        check = scenario_check(header) if strict else None
        path = self.path / SCENARIOS
        lines = read_lines(self.path, SCENARIOS)
        if lines is None:
            raise damaged(path, "is missing")
        seen: set[str] = set()
        for line in lines:
            scenario, problem = line.value, line.problem
            problem = problem or scenario_problem(scenario, labels)
            if problem is None and scenario["id"] in seen:
                problem = f"repeats scenario {scenario['id']}"
            if problem is None and check:
                try:
                    check(scenario)
                except PlanProblem as found:
                    problem = str(found)
            if problem:
                raise damaged(path, f"line {line.number} is {problem}" if problem.startswith(("a ", "not "))
                              else f"line {line.number}: {problem}")
            seen.add(scenario["id"])
            yield scenario
        try:
            if check:
                check.finish()
        except PlanProblem as found:
            raise damaged(path, f"holds {found}") from None

    def _users_of(self, header: dict | None = None) -> dict[str, int]:
        return {s["id"]: s["users"] for s in self.scenarios(header)}

    def _checked_rows(self, missing_ok: bool = False) -> Iterator[tuple[Line, str | None]]:
        """Each line of results.jsonl with what is wrong with it as a row of this plan (None: a row)."""
        header = self.plan_header()
        users_of = self._users_of(header)
        rounds = header["rounds"] + header.get("warmup", 0)
        lines = read_lines(self.path, RESULTS)
        if lines is None:
            if missing_ok:
                return
            raise damaged(self.path / RESULTS, "is missing")
        for line in lines:
            yield line, line.problem or row_problem(line.value, users_of, rounds)

    def rows(self) -> Iterator[dict]:
        """The rows of results.jsonl, streamed. A line that is not a valid row of this plan (damaged, or
        edited by hand) is skipped and counted in skipped_rows, as --resume would drop it."""
        self.skipped_rows = 0
        for line, problem in self._checked_rows():
            if problem is None:
                yield line.value
            else:
                self.skipped_rows += 1

    def rounds(self, missing_ok: bool = False) -> ResultRounds:
        """results.jsonl grouped by round, every problem located (ResultRounds)."""
        read = ResultRounds()
        first_line: dict[tuple[str, int, int], int] = {}
        for line, problem in self._checked_rows(missing_ok):
            read.unended = not line.ended
            if problem is not None:
                read.bad_count += 1
                if len(read.bad) < MAX_WARNINGS:
                    read.bad.append(Line(line.number, None, problem, line.ended))
                continue
            row = line.value
            key, user = (row["scenarioId"], row["round"]), row["userId"]
            read.rows_of[key] += 1
            earlier = first_line.setdefault((*key, user), line.number)
            if earlier != line.number:
                read.repeated.setdefault(key, []).append(
                    f"line {line.number} repeats user {user} of round {key[1]} of scenario {key[0]} (line {earlier})")
                continue
            read.rounds.setdefault(key, []).append(row)
        return read

    def failures(self) -> list[dict]:
        """The failed rounds failures.jsonl records; a line that is not one of this plan is skipped."""
        lines = read_lines(self.path, FAILURES)
        if lines is None:
            return []
        users_of = self._users_of()
        return [line.value for line in lines if line.problem is None and failure_problem(line.value, users_of) is None]

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

    def manifest(self) -> tuple[dict, str | None]:
        """The manifest ({} when there is none) and None, or {} and what is wrong with it; changes nothing."""
        manifest, problem = self._manifest_as_read()
        return ({}, problem) if problem else (manifest, None)

    def _manifest_as_read(self) -> tuple[object, str | None]:
        read = read_document(self.path, MANIFEST)
        if read is None:
            return {}, None
        manifest, problem = read
        return manifest, problem or manifest_problem(manifest)

    def read_manifest(self) -> dict:
        """For the run that owns the directory: the manifest, or {} when there is none; a damaged
        one is set aside (with a warning), unless it is a shard's."""
        manifest, problem = self._manifest_as_read()
        if problem is None:
            return manifest
        path = self.path / MANIFEST
        if isinstance(manifest, dict) and "shard" in manifest:
            # a new manifest would not know the shard, and the run would go on with the whole plan
            raise UsageError(f"{path} is damaged ({problem}), and it is the only record of which shard "
                             f"{self.path} runs", hint="repair it, or start the shard again in a new run directory")
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
        mesh = any("circuitBrokenRequests" in row for row in self.rows())
        patterns = any("timedOutCalls" in row for row in self.rows())
        chain = any("chainAmplification" in row for row in self.rows())
        targets = any("targetPath" in row for row in self.rows())
        columns = [*ORIGINAL_COLUMNS, *config_keys, *(TARGET_COLUMNS if targets else ()), *RBL_COLUMNS,
                   *(MESH_COLUMNS if mesh else ()),
                   *(PATTERN_COLUMNS if patterns else ()), *(CHAIN_COLUMNS if chain else ())]
        path = self.path / CSV_FILE
        with storage_errors(self.path):
            temporary = path.with_name(CSV_FILE + ".tmp")
            try:
                with os.fdopen(new_file(temporary), "w", encoding="utf-8", newline="") as out:
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


def _torn_or(line: Line) -> str:
    """What is wrong with a line; a last line without its newline that does not parse was cut short by a crash."""
    return "torn (a crash cut it short)" if not line.ended and line.problem.startswith("not JSON") else line.problem


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
