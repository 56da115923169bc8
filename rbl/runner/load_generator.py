"""The open-loop load generator, rbl-load (on vegeta's library), as a process: it sends requests on
a schedule whatever the answers and records each one with its scheduled send time, so a slow target
cannot hold the load back (no coordinated omission); and its CSV read as the per-request table,
each request with one response class:
  success         the call succeeded (library), or a 2xx came back (mesh);
  circuit_broken  the sidecar refused it locally (Envoy flag UO: a connection-pool limit; or its
                  adaptive concurrency or admission control filter);
  timed_out       no answer within the load's timeout, the sidecar's timeout fired (UT), or a
                  library's timeout ended the call;
  rejected        a library policy refused the call (a breaker, bulkhead or rate limiter: the call
                  says which, or sent no request);
  failed          anything else (a call a library's fallback answered included: not a success).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from itertools import islice
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.compute as pc

from ..clients.protocol import SIDECAR_REFUSAL_DETAILS
from ..plan_records import MAX_ROUND_REQUESTS, OPEN_LOOP_CONNECTIONS, Population
from ..store.durable import fresh_directory, new_file

LOADGEN_CONNECTIONS = OPEN_LOOP_CONNECTIONS      # the backends let a client hold this many calls
STOP_GRACE_S = 30.0                 # beyond duration + timeout, before the generator is stopped
CALL_TIMEOUT_ERRORS = ("timeout", "deadline exceeded", "Client.Timeout")
PR_SET_PDEATHSIG = 1


class LoadFailed(Exception):
    """The load generator could not run the round; the message says why."""


class LoadRun:
    """The load generator sending one schedule (`offsets`), or running a population of users (with
    `population`, its think times drawn from `seed`): started at once, waited on in steps (so the
    round's frame can tick its observers meanwhile), stopped when its time is up or the run is
    interrupted."""

    def __init__(self, binary: Path, url: str, offsets: Iterable[int] | None, work_dir: Path, timeout_s: float,
                 duration_s: float, body: dict | None = None, max_connections: int = LOADGEN_CONNECTIONS,
                 population: Population | None = None, seed: int = 1):
        # a fresh directory, every file in it new (durable.py): a link planted in a run directory's
        # work directory is removed, never written through, and nothing it points to is touched
        fresh_directory(work_dir)
        self.out = work_dir / "requests.csv"
        argv = [str(binary), "--url", url, "--out", str(self.out),
                "--timeout", f"{timeout_s:g}s", "--max-connections", str(max_connections)]
        if population is not None:
            argv += ["--users", str(population.users), "--think", f"{population.think_ms:g}ms",
                     "--duration", f"{duration_s:g}s", "--seed", str(seed), "--max-requests", str(MAX_ROUND_REQUESTS)]
            if population.trace:
                trace = work_dir / "trace.txt"
                with os.fdopen(new_file(trace), "w", encoding="ascii") as out:
                    out.write("".join(f"{seconds!r},{factor!r}\n" for seconds, factor in population.trace))
                argv += ["--trace", str(trace)]
        else:
            schedule = work_dir / "schedule.txt"
            _write_schedule(schedule, offsets)
            argv += ["--schedule", str(schedule)]
        if body is not None:
            body_file = work_dir / "body.json"
            with os.fdopen(new_file(body_file), "w", encoding="utf-8") as out:
                out.write(json.dumps(body))
            argv += ["--method", "POST", "--body-file", str(body_file)]
        # its output goes to files, not pipes: nobody reads a pipe while the frame waits in steps
        self._stdout, self._stderr = work_dir / "stdout.txt", work_dir / "stderr.txt"
        with os.fdopen(new_file(self._stdout), "wb") as stdout, os.fdopen(new_file(self._stderr), "wb") as stderr:
            self.process = subprocess.Popen(argv, stdout=stdout, stderr=stderr, preexec_fn=_stop_with_runner)
        self.deadline = time.monotonic() + duration_s + timeout_s + STOP_GRACE_S

    def wait(self, timeout_s: float) -> bool:
        """True once the generator has exited; past its deadline it is told to stop (SIGTERM)."""
        try:
            self.process.wait(timeout=max(0.0, min(timeout_s, self.deadline - time.monotonic())))
            return True
        except subprocess.TimeoutExpired:
            if time.monotonic() >= self.deadline:
                self.process.send_signal(signal.SIGTERM)
                self.deadline = float("inf")
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.stop()
                return True
            return False

    def result(self) -> tuple[Path, dict]:
        """The CSV of its requests and the generator's summary (its last JSON line)."""
        if self.process.returncode != 0:
            stderr = self._stderr.read_text(errors="replace").strip()
            raise LoadFailed(f"the load generator exited with code {self.process.returncode}: {stderr[-400:]}")
        lines = [line for line in self._stdout.read_text(errors="replace").splitlines() if line.startswith("{")]
        return self.out, json.loads(lines[-1]) if lines else {}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _write_schedule(path: Path, offsets: Iterable[int]) -> None:
    """The schedule file, written as the offsets come (never a list of them), at most
    MAX_ROUND_REQUESTS of them; an empty schedule is refused too."""
    count, pending = 0, iter(offsets)
    with os.fdopen(new_file(path), "w", encoding="ascii") as out:
        for chunk in iter(lambda: list(islice(pending, 65_536)), []):
            count += len(chunk)
            if count > MAX_ROUND_REQUESTS:
                raise LoadFailed(f"the round's schedule holds more than {MAX_ROUND_REQUESTS:,} requests, "
                                 "more than a round may send")
            out.write("".join(f"{offset}\n" for offset in chunk))
    if count == 0:
        raise LoadFailed("the round's schedule is empty (a rate too low for its duration)")


def run_load(binary: Path, url: str, offsets: Iterable[int], work_dir: Path, timeout_s: float, duration_s: float,
             body: dict | None = None, max_connections: int = LOADGEN_CONNECTIONS) -> tuple[Path, dict]:
    """Send the schedule to `url` and wait; returns the CSV of its requests and the generator's summary."""
    load = LoadRun(binary, url, offsets, work_dir, timeout_s, duration_s, body, max_connections)
    try:
        while not load.wait(3600.0):
            pass
        return load.result()
    finally:
        load.stop()


def _stop_with_runner() -> None:
    """In the child: SIGTERM when the runner dies, even by kill -9 (Linux), so no load outlives it."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        except (OSError, AttributeError):
            pass


def classify(csv_path: Path, warmup_s: float, mesh: bool) -> pa.Table:
    """The generator's CSV as the per-request table (store/requests.py's REQUEST_SCHEMA), column by
    column: no Python code runs per request."""
    text_columns = ("flags", "error", "ok", "last_status", "ending")
    table = pacsv.read_csv(csv_path, convert_options=pacsv.ConvertOptions(
        column_types={**{name: pa.string() for name in text_columns}, "seq": pa.int64(), "scheduled_ns": pa.int64(),
                      "sent_ns": pa.int64(), "latency_ns": pa.int64(), "status": pa.int32(),
                      "requests": pa.int32()},          # an empty `requests` is null: unknown (mesh)
        strings_can_be_null=False))
    scheduled_ns = pc.cast(table["scheduled_ns"], pa.float64())
    sent_ns = pc.cast(table["sent_ns"], pa.float64())
    status = table["status"]
    answered = pc.not_equal(status, 0)
    response_ms = pc.divide(pc.add(pc.subtract(sent_ns, scheduled_ns), pc.cast(table["latency_ns"], pa.float64())),
                            1e6)
    scheduled_s = pc.divide(scheduled_ns, 1e9)
    return pa.table({
        "seq": table["seq"], "scheduled_s": scheduled_s,
        "lag_ms": pc.divide(pc.subtract(sent_ns, scheduled_ns), 1e6),
        "response_ms": pc.if_else(answered, response_ms, pa.scalar(None, pa.float64())),
        "status": status, "cls": response_classes(table, mesh), "requests": table["requests"],
        "flags": table["flags"], "warmup": pc.less(scheduled_s, warmup_s),
    })


def _first_of(cases: list[tuple], otherwise: str) -> pa.ChunkedArray:
    """The class of the first case whose condition holds, row by row (a vectorised if/elif chain)."""
    result = pa.scalar(otherwise)
    for condition, cls in reversed(cases):
        result = pc.if_else(pc.fill_null(condition, False), pa.scalar(cls), result)
    return result


def _any_marker(flags: pa.ChunkedArray, markers: tuple[str, ...]):
    """Whether ",flags," holds any of the markers as a whole comma-separated item."""
    found = pc.match_substring(flags, f",{markers[0]},")
    for marker in markers[1:]:
        found = pc.or_(found, pc.match_substring(flags, f",{marker},"))
    return found


def response_classes(table: pa.Table, mesh: bool) -> pa.ChunkedArray:
    """Each request's response class (the module's docstring), from the CSV's columns."""
    status = table["status"]
    timeout_error = pc.match_substring(table["error"], CALL_TIMEOUT_ERRORS[0])
    for word in CALL_TIMEOUT_ERRORS[1:]:               # literal searches: a regex costs 10x
        timeout_error = pc.or_(timeout_error, pc.match_substring(table["error"], word))
    no_answer = [(pc.and_(pc.equal(status, 0), timeout_error), "timed_out"), (pc.equal(status, 0), "failed")]
    if mesh:
        # Envoy joins several flags with commas: ",UO," is in ",flags," when UO is one of them
        flags = pc.binary_join_element_wise("", table["flags"], "", ",")
        return _first_of(no_answer + [
            (pc.and_(pc.greater_equal(status, 200), pc.less(status, 300)), "success"),
            (_any_marker(flags, ("UO", *SIDECAR_REFUSAL_DETAILS.values())), "circuit_broken"),
            (pc.match_substring(flags, ",UT,"), "timed_out"),
        ], "failed")
    ok, ending = table["ok"], table["ending"]
    return _first_of(no_answer + [
        (pc.or_(pc.not_equal(status, 200), pc.equal(ok, "")), "failed"),   # the client service refused or broke it
        (pc.equal(ok, "1"), "success"),
        (pc.equal(ending, "timed_out"), "timed_out"),                      # the library's timeout ended the call
        (pc.starts_with(ending, "rejected:"), "rejected"),                 # a breaker, bulkhead or rate limiter
        (pc.equal(ending, "fallback"), "failed"),                          # the fallback answered: not a success
        (pc.equal(table["requests"], 0), "rejected"),                      # refused before any request
    ], "failed")


def requests_so_far(csv_path: Path, warmup_s: float, mesh: bool) -> pa.Table | None:
    """The requests the generator has recorded so far (the complete lines of its CSV, which it
    writes as answers arrive), as the request table; None before the first one."""
    try:
        data = csv_path.read_bytes()
    except FileNotFoundError:
        return None
    end = data.rfind(b"\n")
    if end < 0 or data.count(b"\n", 0, end + 1) < 2:           # the header and at least one record
        return None
    return classify(pa.BufferReader(data[:end + 1]), warmup_s, mesh=mesh)
