"""The capacity cache, ~/.cache/rbl/capacity.json: read as untrusted input (a regular file only, a
bounded and strict read, each record schema-checked) and written atomically under a lock, so two
calibrations at once both keep their measurement and an unreadable cache is moved aside, never lost."""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import stat
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Callable

from ..errors import UsageError
from ..store.durable import fsync_directory, open_own, write_atomically
from ..store.run_reader import parse_json

CACHE_LIMIT = 4 << 20            # bytes; a record is about 1 KB
SLO_LIMIT_MS = 24 * 3600 * 1000  # load.slo's own bound (compiler/workload.py)
# what calibrate() writes: an ISO 8601 UTC time to the second; nothing a terminal or rich interprets
_MEASURED_AT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})?")

Say = Callable[[str], None]


def store_path() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rbl" / "capacity.json"


def record_problem(record: object, max_rps: float) -> str | None:
    """Why a stored record cannot be used, or None: a finite capacity within what a calibration
    measures (0 < capacity <= max_rps), a finite positive slo_ms within load.slo's bound, and the
    time it was measured as calibrate() writes it."""
    if not isinstance(record, dict):
        return "is not an object"
    for name, limit in (("capacity_rps", max_rps), ("slo_ms", SLO_LIMIT_MS)):
        value = record.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"has no number {name}"
        if not (math.isfinite(value) and 0 < value <= limit):
            return f"has {name} {value!r}, not within (0, {limit:g}]"
    measured_at = record.get("measured_at")
    if not isinstance(measured_at, str) or not _MEASURED_AT.fullmatch(measured_at):
        return "has no measured_at of the form 2025-01-31T12:00:00+00:00"
    try:
        datetime.fromisoformat(measured_at.replace("Z", "+00:00"))
    except ValueError:
        return "has no measured_at of the form 2025-01-31T12:00:00+00:00"
    return None


def read_record(key: str, max_rps: float, say: Say) -> dict | None:
    """The stored record under `key`, when it is usable; None otherwise (with a note when it is
    there but unusable, or the cache itself is)."""
    path = store_path()
    if not path.parent.is_dir():
        return None
    with _locked(path):
        records = _read_records(path, say)
    if key not in records:
        return None
    problem = record_problem(records[key], max_rps)
    if problem:
        say(f"note: the capacity stored for this target in {path} {problem}; it is measured again")
        return None
    return records[key]


def write_record(key: str, record: dict, max_rps: float, say: Say) -> Path:
    """Store `record` under `key`, keeping every other entry: read, changed and replaced whole
    (temporary file, fsync, rename) while holding the cache's lock."""
    problem = record_problem(record, max_rps)
    if problem:
        raise ValueError(f"a capacity record {problem}")
    path = store_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        records = _read_records(path, say)
        records[key] = record
        write_atomically(path, json.dumps(records, indent=1, allow_nan=False))
        fsync_directory(path.parent)
    return path


@contextmanager
def _locked(path: Path):
    """Held while the cache is read or replaced (flock: released when the process dies)."""
    descriptor = open_own(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def _read_records(path: Path, say: Say) -> dict:
    """The cache's records ({} when there is none). A cache rbl cannot read (a link, a FIFO, a
    device or a directory there, too large, not strict JSON, not an object) is moved aside with a
    note, never overwritten: its entries stay where the user can recover them."""
    problem, records = _read(path)
    if problem is None:
        return records
    aside = path.with_name(f"{path.name}.unreadable-{datetime.now().strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    try:
        os.rename(path, aside)          # the entry itself (a link is moved, not followed)
    except OSError as error:
        raise UsageError(f"the capacity cache {path} {problem}, and it cannot be moved aside: "
                         f"{error.strerror or error}", hint=f"move or remove {path}, then try again") from None
    say(f"note: the capacity cache {path} {problem}; moved aside to {aside.name}, and a new one is started")
    return {}


def _read(path: Path) -> tuple[str | None, dict]:
    try:
        status = os.lstat(path)         # before opening: opening a device may itself do something
    except FileNotFoundError:
        return None, {}
    if not stat.S_ISREG(status.st_mode):
        return ("is a symbolic link" if stat.S_ISLNK(status.st_mode) else
                "is a directory" if stat.S_ISDIR(status.st_mode) else "is not a regular file"), {}
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, {}
    except OSError as error:
        return f"cannot be read ({error.strerror or error})", {}
    with os.fdopen(descriptor, "rb") as source:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):       # swapped since the lstat
            return "is not a regular file", {}
        try:
            data = source.read(CACHE_LIMIT + 1)
        except OSError as error:
            return f"cannot be read ({error.strerror or error})", {}
    if len(data) > CACHE_LIMIT:
        return f"is larger than {CACHE_LIMIT >> 20} MB", {}
    value, problem = parse_json(data)
    if problem:
        return f"is {problem}", {}
    if not isinstance(value, dict):
        return "is not a JSON object", {}
    return None, value
