"""Per-request records of open-loop rounds: one Parquet file per (scenario, round) under
RUN_DIR/requests/SCENARIO_ID/round-N.parquet, one row per request the load generator sent.

Parquet with zstd because a round of an overload experiment holds many requests (a 20 s round at
2,000 req/s is 40,000 rows): bench/request_store.py measured 1,000,000 rows at 13.3 bytes a row
(snappy 17.7, CSV 55.4, JSON Lines 160.5), written at 1.25 M rows/s and read at 2.0 M rows/s, faster
than CSV (0.63 and 1.23) or JSON Lines (0.07 and 0.45).
A round's file is replaced whole (temporary file, fsync, rename), so a resumed run that redoes a
round never leaves half of one; reading treats the directory as untrusted input, like the rest of
a run directory (rbl/store/run_reader.py)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import UsageError
from ..plan_records import MAX_ROUND_REQUESTS, MAX_ROUND_S
from .durable import fsync_directory, new_file, own_directory
from .open_columns import RESPONSE_CLASSES  # noqa: F401  (the classes the cls column holds)
from .run_layout import REQUESTS
from .run_reader import open_member, refused, shown

COMPRESSION = "zstd"
ROW_BYTES_LIMIT = 256           # decoded bytes per row at most (a row rbl writes is about 50)

REQUEST_SCHEMA = pa.schema([
    pa.field("seq", pa.int64(), nullable=False),
    pa.field("scheduled_s", pa.float64(), nullable=False),   # scheduled send time, from the round's start
    pa.field("lag_ms", pa.float64()),                        # actual send - scheduled
    pa.field("response_ms", pa.float64()),                   # scheduled send -> end of answer; null: no answer
    pa.field("status", pa.int32()),                          # HTTP status, 0: no answer
    pa.field("cls", pa.string()),                            # one of RESPONSE_CLASSES
    pa.field("requests", pa.int32()),                        # requests the call sent; null: unknown (mesh)
    pa.field("flags", pa.string()),                          # Envoy's response flags, or ""
    pa.field("warmup", pa.bool_()),                          # scheduled_s < the load's warm-up
])
READ_SCHEMA = REQUEST_SCHEMA.append(pa.field("scenario", pa.string())).append(pa.field("round", pa.int32()))

# a scenario id names a directory: no separator, no dot-dot, nothing a shell or terminal trips on
_SCENARIO_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_ROUND_FILE = re.compile(r"round-([1-9][0-9]{0,8})\.parquet")


def round_path(run_dir: Path, scenario_id: str, round_number: int) -> Path:
    return run_dir / REQUESTS / scenario_id / f"round-{round_number}.parquet"


def conform(table: pa.Table) -> pa.Table:
    """`table` with REQUEST_SCHEMA's columns, in its order and types (extra columns dropped);
    a missing column is a programming error of the writer, named."""
    missing = [name for name in REQUEST_SCHEMA.names if name not in table.column_names]
    if missing:
        raise ValueError(f"a round's request table lacks column(s) {', '.join(missing)}")
    return table.select(REQUEST_SCHEMA.names).cast(REQUEST_SCHEMA)


def write_round_requests(run_dir: Path, scenario_id: str, round_number: int, table: pa.Table) -> Path:
    """Write one round's requests atomically, replacing an earlier file of the same round."""
    if not _SCENARIO_ID.fullmatch(scenario_id):
        raise ValueError(f"scenario id {scenario_id!r} cannot name a directory")
    if not isinstance(round_number, int) or round_number < 1:
        raise ValueError(f"round {round_number!r} is not a positive integer")
    path = round_path(run_dir, scenario_id, round_number)
    for directory in (path.parent.parent, path.parent):
        own_directory(directory)
    table = conform(table)
    temporary = path.with_name(path.name + ".tmp")
    try:
        with os.fdopen(new_file(temporary), "wb") as out:
            pq.write_table(table, out, compression=COMPRESSION)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)
    return path


def empty_requests() -> pa.Table:
    return READ_SCHEMA.empty_table()


def read_requests(run_dir: Path, scenario_ids=None) -> pa.Table:
    """Every round's requests (of `scenario_ids` only, when given) with columns scenario and round
    added, ordered by scenario and round; no requests directory gives an empty table. Files other
    than round-N.parquet are ignored; a link, or a file that is not Parquet of this schema, is a
    UsageError naming it."""
    base = run_dir / REQUESTS
    if not _is_directory(base):
        return empty_requests()
    wanted = None if scenario_ids is None else set(scenario_ids)
    tables = []
    for scenario_dir in sorted(base.iterdir()):
        scenario_id = scenario_dir.name
        if (wanted is not None and scenario_id not in wanted) or not _SCENARIO_ID.fullmatch(scenario_id):
            continue
        if not _is_directory(scenario_dir):
            continue
        rounds = sorted((int(m.group(1)), m.group(0)) for m in map(_ROUND_FILE.fullmatch, os.listdir(scenario_dir))
                        if m)
        for round_number, name in rounds:
            table = _read_round(run_dir, f"{REQUESTS}/{scenario_id}/{name}")
            if table is None:
                continue
            n = table.num_rows
            tables.append(table.append_column(pa.field("scenario", pa.string()), pa.array([scenario_id] * n, pa.string()))
                          .append_column(pa.field("round", pa.int32()), pa.array([round_number] * n, pa.int32())))
    return pa.concat_tables(tables) if tables else empty_requests()


def read_round_requests(run_dir: Path, scenario_id: str, round_number: int) -> pa.Table | None:
    """One round's requests as written (REQUEST_SCHEMA), None when its file is absent; a link, or a
    file that is not Parquet of this schema, is a UsageError naming it."""
    if not _SCENARIO_ID.fullmatch(scenario_id):
        return None
    for directory in (run_dir / REQUESTS, run_dir / REQUESTS / scenario_id):
        if not _is_directory(directory):
            return None
    return _read_round(run_dir, f"{REQUESTS}/{scenario_id}/round-{round_number}.parquet")


def _is_directory(path: Path) -> bool:
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(status.st_mode):
        raise refused(path, "is a symbolic link")
    return stat.S_ISDIR(status.st_mode)


def _read_round(run_dir: Path, name: str) -> pa.Table | None:
    opened = open_member(run_dir, name)
    if opened is None:                      # removed meanwhile (a run being resumed)
        return None
    source, _ = opened
    with source:
        try:
            parquet = pq.ParquetFile(source)
            problem = _size_problem(parquet.metadata)
            table = None if problem else conform(parquet.read())
        except (pa.ArrowException, ValueError, OSError) as error:
            problem = shown(error)
    problem = problem or _values_problem(table)
    if problem:
        raise UsageError(f"{run_dir / name} is not a round's requests: {problem}",
                         hint="`rbl run --resume` cannot redo it; delete the file to report without it") from None
    return table


def _size_problem(metadata) -> str | None:
    """More rows, or more bytes once decoded, than a round rbl ran can hold: read before the data."""
    if metadata.num_rows > MAX_ROUND_REQUESTS:
        return f"{metadata.num_rows:,} rows, more than the {MAX_ROUND_REQUESTS:,} requests a round sends"
    decoded = sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))
    if decoded > MAX_ROUND_REQUESTS * ROW_BYTES_LIMIT:
        return f"{decoded:,} bytes of rows, more than a round's requests hold"
    return None


def _values_problem(table: pa.Table) -> str | None:
    """Send times within a round (0 to MAX_ROUND_S s), and finite times where there are any."""
    scheduled = table.column("scheduled_s")
    if table.num_rows and not (scheduled.null_count == 0 and pc.all(pc.is_finite(scheduled)).as_py()
                               and pc.min(scheduled).as_py() >= 0
                               and pc.max(scheduled).as_py() <= MAX_ROUND_S):
        return f"a scheduled_s is not a time within a round (0 to {MAX_ROUND_S:,} s)"
    for column in ("lag_ms", "response_ms"):
        if pc.any(pc.invert(pc.is_finite(table.column(column)))).as_py():
            return f"a {column} is not a finite number"
    return None
