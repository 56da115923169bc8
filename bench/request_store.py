"""How to store an open-loop round's per-request records (rbl/store/requests.py): size on disk and
write/read speed of N synthetic rows of REQUEST_SCHEMA, as Parquet (zstd, snappy, none), CSV and
JSON Lines. Rows look like an overloaded round: Poisson send times at 2,000 req/s, log-normal
response times with a timed-out tail, a mix of the five response classes, 1-3 requests per call.

Each format is written to a file (fsync'd) and read back whole into an Arrow table (CSV and JSON
Lines with pyarrow's own multithreaded readers, the fastest readers at hand; JSON Lines written
with the json module, as a Python runner would). Prints bytes per row and rows per second; the
best of `--repeat` runs of each (a busy machine only slows runs down).

Measured on the project's 2-core machine while other jobs ran (best of 2), 1,000,000 rows:
  parquet-zstd      13.3 B/row   write  1.25 M rows/s   read  1.99 M rows/s
  parquet-snappy    17.7 B/row   write  1.57 M rows/s   read  3.39 M rows/s
  parquet-none      22.2 B/row   write  1.68 M rows/s   read  5.40 M rows/s
  csv               55.4 B/row   write  0.63 M rows/s   read  1.23 M rows/s
  jsonl            160.5 B/row   write  0.07 M rows/s   read  0.45 M rows/s
rbl stores zstd: a quarter smaller than snappy, 4x smaller than CSV, 12x smaller than JSON Lines,
and still written and read faster than either text format; a round of 40,000 requests (20 s at
2,000 req/s) is about 0.5 MB and reads in about 20 ms.

python3 bench/request_store.py [--rows 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rbl.store.requests import REQUEST_SCHEMA, RESPONSE_CLASSES  # noqa: E402


def synthetic(rows: int, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    scheduled = np.cumsum(rng.exponential(1 / 2000, rows))
    lag = rng.exponential(0.3, rows)
    cls = rng.choice(np.array(RESPONSE_CLASSES, dtype=object), rows, p=[0.8, 0.08, 0.05, 0.04, 0.03])
    response = np.round(rng.lognormal(3.0, 0.8, rows) + lag, 3)
    answered = cls != "timed_out"
    status = np.where(cls == "success", 200, np.where(cls == "failed", 500, np.where(cls == "circuit_broken", 503, 0)))
    requests = rng.integers(1, 4, rows).astype(np.int32)
    flags = np.where(cls == "circuit_broken", "UO", np.where(cls == "timed_out", "UT", ""))
    return pa.table({
        "seq": pa.array(np.arange(rows, dtype=np.int64)),
        "scheduled_s": pa.array(np.round(scheduled, 6)),
        "lag_ms": pa.array(np.round(lag, 3)),
        "response_ms": pa.array(response, mask=~answered),
        "status": pa.array(status.astype(np.int32)),
        "cls": pa.array(cls.tolist(), pa.string()),
        "requests": pa.array(np.where(cls == "rejected", 0, requests).astype(np.int32)),
        "flags": pa.array(flags.tolist(), pa.string()),
        "warmup": pa.array(scheduled < 5.0),
    }, schema=REQUEST_SCHEMA)


def _fsynced(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _write_parquet(compression):
    def write(table, path):
        pq.write_table(table, path, compression=compression)
    return write


def _write_jsonl(table, path):
    with path.open("w", encoding="utf-8") as out:
        for row in table.to_pylist():
            out.write(json.dumps(row) + "\n")


FORMATS = {
    "parquet-zstd": (_write_parquet("zstd"), pq.read_table),
    "parquet-snappy": (_write_parquet("snappy"), pq.read_table),
    "parquet-none": (_write_parquet("none"), pq.read_table),
    "csv": (lambda table, path: pacsv.write_csv(table, path),
            lambda path: pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types=REQUEST_SCHEMA))),
    "jsonl": (_write_jsonl, lambda path: pajson.read_json(path, parse_options=pajson.ParseOptions(
        explicit_schema=REQUEST_SCHEMA))),
}


def measure(table: pa.Table, repeat: int) -> list[tuple[str, float, float, float]]:
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        for name, (write, read) in FORMATS.items():
            path = Path(scratch) / name
            writes, reads = [], []
            for _ in range(repeat):
                start = time.perf_counter()
                write(table, path)
                _fsynced(path)
                writes.append(time.perf_counter() - start)
                start = time.perf_counter()
                back = read(path)
                reads.append(time.perf_counter() - start)
            assert back.num_rows == table.num_rows, name
            results.append((name, path.stat().st_size / table.num_rows, table.num_rows / min(writes),
                            table.num_rows / min(reads)))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    table = synthetic(args.rows)
    print(f"{args.rows} rows of {len(REQUEST_SCHEMA)} columns; best of {args.repeat}")
    for name, per_row, write_rate, read_rate in measure(table, args.repeat):
        print(f"  {name:15} {per_row:6.1f} B/row   write {write_rate / 1e6:5.2f} M rows/s   "
              f"read {read_rate / 1e6:5.2f} M rows/s")


if __name__ == "__main__":
    main()
