"""Per-request records of open-loop rounds: the Parquet round files (rbl/store/requests.py) and the
overload metrics computed from them (rbl/store/open_metrics.py), checked against values computed by
hand for small tables."""

from __future__ import annotations

import os
import random

import pyarrow as pa
import pytest

from rbl.errors import UsageError
from rbl.store.metrics import percentile
from rbl.store.open_metrics import (OPEN_LOOP_COLUMNS, _quantile, class_time_series, open_loop_metrics,
                                    success_cdf)
from rbl.store.requests import READ_SCHEMA, REQUEST_SCHEMA, read_requests, round_path, write_round_requests

import numpy as np

# seq, scheduled_s, lag_ms, response_ms, status, cls, requests, flags, warmup (warm-up: the first second)
ROWS = [
    (0, 0.5, 0.0, 10.0, 200, "success", 1, "", True),
    (1, 1.0, 1.0, 20.0, 200, "success", 1, "", False),
    (2, 2.0, 2.0, 40.0, 200, "success", 2, "", False),
    (3, 3.0, 0.0, 5.0, 500, "failed", 3, "", False),
    (4, 6.0, 4.0, 200.0, 200, "success", 1, "", False),
    (5, 7.0, 0.0, 1.0, 503, "circuit_broken", None, "UO", False),
    (6, 8.0, 10.0, None, 0, "timed_out", 1, "UT", False),
    (7, 9.0, 0.0, 0.2, 0, "rejected", 0, "", False),
]


def table(rows=ROWS) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(REQUEST_SCHEMA.names, row)) for row in rows], schema=REQUEST_SCHEMA)


# -- the metrics ------------------------------------------------------------------------------------
def test_metrics_of_a_small_round_match_a_hand_computation():
    m = open_loop_metrics(table(), window_s=5.0, slo_ms=100.0, measured_s=10.0, start_s=1.0)
    assert list(m) == list(OPEN_LOOP_COLUMNS)
    assert m["offeredRequests"] == 7 and m["measuredSeconds"] == 10.0           # the warm-up row is left out
    assert m["offeredRate"] == pytest.approx(0.7) and m["carriedRate"] == pytest.approx(0.3)
    assert m["carriedThroughput"] == pytest.approx(3 / 7) == m["successShare"]
    for share in ("failedShare", "circuitBrokenShare", "timedOutShare", "rejectedShare"):
        assert m[share] == pytest.approx(1 / 7)
    # successes 20, 40, 200: linear between closest ranks, positions 1, 1.9, 1.98
    assert (m["successP50Ms"], m["successP95Ms"], m["successP99Ms"]) == pytest.approx((40.0, 184.0, 196.8))
    # windows [1, 6): 20, 40 and a failure, whose p95 is the failure's (never in time); [6, 11): one
    # success in four requests
    assert m["p95UnderSloShare"] == 0.0
    # lags 0, 0, 0, 1, 2, 4, 10: position 5.94 -> 4 + 0.94 * 6
    assert m["lagP99Ms"] == pytest.approx(9.64)
    assert m["requestsPerCall"] == pytest.approx(8 / 6)                        # the mesh row (null) left out
    # RT50 and RT95 per window, averaged: [1, 6) has successes 20 and 40 (p50 30, p95 39), [6, 11)
    # one of 200 (both 200)
    assert (m["windowP50Ms"], m["windowP95Ms"]) == pytest.approx(((30 + 200) / 2, (39 + 200) / 2))


def test_shares_sum_to_one_and_an_unknown_class_counts_as_failed():
    rows = ROWS + [(8, 9.5, 0.0, 3.0, 418, "teapot", 1, "", False)]
    m = open_loop_metrics(table(rows), measured_s=10.0)
    shares = [m[c] for c in ("successShare", "failedShare", "circuitBrokenShare", "timedOutShare", "rejectedShare")]
    assert sum(shares) == pytest.approx(1.0) and m["failedShare"] == pytest.approx(2 / 8)


def test_without_a_duration_the_span_of_the_measured_sends_is_used():
    m = open_loop_metrics(table())
    assert m["measuredSeconds"] == 8.0 and m["offeredRate"] == pytest.approx(7 / 8)
    # windows [1, 6), [6, 9]; both hold failures: neither is under
    assert m["p95UnderSloShare"] == 0.0
    successes_only = [r for r in ROWS if r[5] == "success"]
    assert open_loop_metrics(table(successes_only), window_s=4.0)["p95UnderSloShare"] == 0.5   # 20, 40 | 200


def window(successes: int, failures: int, success_ms: float = 10.0, start: float = 0.0) -> list[tuple]:
    """One second of requests: `successes` answered in success_ms, then `failures` failed fast."""
    n = successes + failures
    return [(i, start + i / n, 0.0, success_ms if i < successes else 1.0, 200 if i < successes else 503,
             "success" if i < successes else "failed", 1, "", False) for i in range(n)]


def share(rows: list[tuple], slo_ms: float = 100.0) -> float:
    return open_loop_metrics(table(rows), window_s=1.0, slo_ms=slo_ms, measured_s=1.0, start_s=0.0)["p95UnderSloShare"]


def test_the_slo_share_counts_every_request_a_failure_never_in_time():
    # 1 failure in 40 (2.5%): the p95 falls between two successes; 2 in 40 (5%): next to a failure
    assert share(window(39, 1)) == 1.0 and share(window(38, 2)) == 0.0
    # the reproducer: a window that carried 1 request in 250, quickly, is not a window that met the SLO
    assert share(window(1, 249)) == 0.0
    # timed out, circuit broken and rejected requests are unsuccessful too
    for cls in ("timed_out", "circuit_broken", "rejected"):
        rows = [(*r[:5], cls if r[5] == "failed" else r[5], *r[6:]) for r in window(30, 10)]
        assert share(rows) == 0.0


def test_a_window_without_requests_or_successes_is_not_under_the_objective():
    first = window(20, 0)
    assert open_loop_metrics(table(first), window_s=1.0, slo_ms=100.0, measured_s=2.0,
                             start_s=0.0)["p95UnderSloShare"] == 0.5                # the second second is empty
    assert share(window(0, 20)) == 0.0
    # the objective is strict: a window whose p95 equals it is not under
    assert share(window(20, 0, success_ms=100.0)) == 0.0 and share(window(20, 0, success_ms=99.9)) == 1.0


def test_a_round_of_warmup_only_has_no_shares_or_percentiles():
    warm = [(*r[:-1], True) for r in ROWS]
    m = open_loop_metrics(table(warm))
    assert m["offeredRequests"] == 0 and m["measuredSeconds"] is None and m["offeredRate"] is None
    assert all(m[c] is None for c in OPEN_LOOP_COLUMNS if c != "offeredRequests")
    timed = open_loop_metrics(table(warm), measured_s=10.0)
    assert timed["offeredRate"] == 0.0 and timed["carriedRate"] == 0.0 and timed["carriedThroughput"] is None


def test_no_success_gives_no_latency_percentiles():
    rows = [r for r in ROWS if r[5] != "success"]
    m = open_loop_metrics(table(rows), measured_s=10.0)
    assert m["successP50Ms"] is None and m["successP99Ms"] is None and m["carriedThroughput"] == 0.0
    assert m["windowP50Ms"] is None and m["windowP95Ms"] is None
    assert m["p95UnderSloShare"] == 0.0


def test_percentiles_follow_the_closed_loop_definition():
    rng = random.Random(7)
    for n in (1, 2, 5, 101, 1000):
        values = sorted(rng.lognormvariate(3, 1) for _ in range(n))
        for q in (0.5, 0.95, 0.99):
            assert _quantile(np.array(values), q) == pytest.approx(round(percentile(values, q), 3), abs=1e-9)


def test_class_time_series_counts_per_bin_and_averages_over_rounds():
    series = class_time_series(table())
    assert [s["t"] for s in series] == list(range(10))
    assert [s["success"] for s in series] == [1, 1, 1, 0, 0, 0, 1, 0, 0, 0]    # warm-up included
    assert [(s["failed"], s["circuit_broken"], s["timed_out"], s["rejected"]) for s in series[3:10]] == \
        [(1, 0, 0, 0), (0, 0, 0, 0), (0, 0, 0, 0), (0, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1)]
    one = table().append_column("round", pa.array([1] * len(ROWS), pa.int32()))
    other = table([(0, 1.2, 0.0, 9.0, 200, "success", 1, "", False)]).append_column("round", pa.array([2], pa.int32()))
    pooled = class_time_series(pa.concat_tables([one, other]))
    assert [s["success"] for s in pooled[:3]] == [0.5, 1.0, 0.5]
    assert class_time_series(table([])) == []
    assert [s["t"] for s in class_time_series(table(), bin_s=2.5)] == [0.0, 2.5, 5.0, 7.5]


def test_success_cdf_is_of_measured_successes():
    times, probabilities = success_cdf(table())
    assert times == [20.0, 40.0, 200.0] and probabilities == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert success_cdf(table([])) == ([], [])


# -- the round files --------------------------------------------------------------------------------
def test_round_files_are_written_and_read_back_with_scenario_and_round(tmp_path):
    first = write_round_requests(tmp_path, "aaaaaaaaaaaa", 1, table())
    assert first == tmp_path / "requests" / "aaaaaaaaaaaa" / "round-1.parquet" == round_path(tmp_path, "aaaaaaaaaaaa", 1)
    write_round_requests(tmp_path, "aaaaaaaaaaaa", 10, table(ROWS[:2]))
    write_round_requests(tmp_path, "bbbbbbbbbbbb", 2, table(ROWS[:3]))
    read = read_requests(tmp_path)
    assert read.schema == READ_SCHEMA and read.num_rows == 8 + 2 + 3
    assert list(zip(read.column("scenario").to_pylist(), read.column("round").to_pylist()))[7:10] == \
        [("aaaaaaaaaaaa", 1), ("aaaaaaaaaaaa", 10), ("aaaaaaaaaaaa", 10)]       # rounds in number order
    assert read.select(REQUEST_SCHEMA.names).slice(0, 8).equals(table())
    assert read_requests(tmp_path, ["bbbbbbbbbbbb"]).num_rows == 3
    assert read_requests(tmp_path, []).num_rows == 0
    assert sorted(os.listdir(first.parent)) == ["round-1.parquet", "round-10.parquet"]   # no temporary left


def test_a_redone_round_replaces_its_file(tmp_path):
    write_round_requests(tmp_path, "aaaaaaaaaaaa", 1, table())
    write_round_requests(tmp_path, "aaaaaaaaaaaa", 1, table(ROWS[:1]))
    assert read_requests(tmp_path).num_rows == 1


def test_extra_columns_are_dropped_and_types_conformed(tmp_path):
    loose = table().append_column("note", pa.array(["x"] * len(ROWS))).set_column(
        4, "status", pa.array([r[4] for r in ROWS], pa.int64()))
    write_round_requests(tmp_path, "aaaaaaaaaaaa", 1, loose)
    assert read_requests(tmp_path).select(REQUEST_SCHEMA.names).equals(table())


def test_no_requests_directory_reads_as_an_empty_table(tmp_path):
    empty = read_requests(tmp_path)
    assert empty.num_rows == 0 and empty.schema == READ_SCHEMA


def test_bad_writes_are_refused(tmp_path):
    with pytest.raises(ValueError, match="lacks column.*cls"):
        write_round_requests(tmp_path, "aaaaaaaaaaaa", 1, table().drop_columns(["cls"]))
    for bad in ("../x", "a/b", ".hidden", ""):
        with pytest.raises(ValueError, match="cannot name a directory"):
            write_round_requests(tmp_path, bad, 1, table())
    with pytest.raises(ValueError, match="positive integer"):
        write_round_requests(tmp_path, "aaaaaaaaaaaa", 0, table())


def test_damaged_and_planted_files_are_refused_by_name(tmp_path):
    path = write_round_requests(tmp_path, "aaaaaaaaaaaa", 1, table())
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(UsageError, match="round-1.parquet is not a round's requests"):
        read_requests(tmp_path)
    path.unlink()
    (tmp_path / "elsewhere.parquet").write_bytes(b"")
    path.symlink_to(tmp_path / "elsewhere.parquet")
    with pytest.raises(UsageError, match="symbolic link"):
        read_requests(tmp_path)
    path.unlink()
    os.rmdir(path.parent)
    (tmp_path / "requests" / "aaaaaaaaaaaa").symlink_to(tmp_path)
    with pytest.raises(UsageError, match="symbolic link"):
        read_requests(tmp_path)
    with pytest.raises(UsageError, match="aaaaaaaaaaaa is a symbolic link; rbl does not write there"):
        write_round_requests(tmp_path, "aaaaaaaaaaaa", 1, table())


# -- a round's file holds what a round can: values and rows bounded (rbl/plan_records.py) -------------
def _planted(tmp_path, table: pa.Table) -> None:
    """A Parquet file written as rbl would, but with values no round has."""
    import pyarrow.parquet as pq
    path = round_path(tmp_path, "aaaaaaaaaaaa", 1)
    path.parent.mkdir(parents=True)
    pq.write_table(table, path, compression="zstd")


@pytest.mark.parametrize("column, value, words", [
    ("scheduled_s", float("nan"), "scheduled_s is not a time"),
    ("scheduled_s", float("inf"), "scheduled_s is not a time"),
    ("scheduled_s", 1e15, "scheduled_s is not a time"),
    ("scheduled_s", 1e9, "scheduled_s is not a time"),
    ("scheduled_s", -1.0, "scheduled_s is not a time"),
    ("response_ms", float("nan"), "response_ms is not a finite number"),
    ("lag_ms", float("-inf"), "lag_ms is not a finite number"),
])
def test_values_no_round_has_are_refused_by_name(tmp_path, column, value, words):
    """Before: `rbl report` crashed (bincount of a negative or 7 PiB length) on scheduled_s NaN, inf or 1e15,
    and a 5 KB file with scheduled_s 1e9 exhausted its memory."""
    rows = table()
    values = rows.column(column).to_pylist()
    values[1] = value
    _planted(tmp_path, rows.set_column(rows.schema.get_field_index(column), rows.schema.field(column),
                                        pa.array(values, pa.float64())))
    with pytest.raises(UsageError, match=f"round-1.parquet is not a round.s requests: a {words}"):
        read_requests(tmp_path)


def test_more_rows_than_a_round_sends_are_refused_before_they_are_read(tmp_path, monkeypatch):
    """Before: 30M identical rows (1.3 MB of Parquet) exhausted `rbl report`."""
    import rbl.store.requests as requests
    monkeypatch.setattr(requests, "MAX_ROUND_REQUESTS", 1000)
    rows = table(ROWS[1:2] * 1001)
    _planted(tmp_path, rows)
    with pytest.raises(UsageError, match="1,001 rows, more than the 1,000 requests a round sends"):
        read_requests(tmp_path)


def test_the_report_of_a_run_with_a_bad_round_file_is_a_usage_error(tmp_path, cli):
    from .test_overload_figures import make_open_run
    import pyarrow.parquet as pq
    run = make_open_run(tmp_path / "R")
    path = next((run / "requests").glob("*/round-1.parquet"))
    rows = pq.read_table(path)
    scheduled = rows.column("scheduled_s").to_pylist()
    scheduled[0] = float("nan")
    pq.write_table(rows.set_column(1, rows.schema.field("scheduled_s"), pa.array(scheduled, pa.float64())), path)
    code, out, err = cli("report", str(run), "--resamples", "100")
    assert code == 2 and "Traceback" not in out + err
    assert "round-1.parquet is not a round's requests: a scheduled_s is not a time" in " ".join((out + err).split())


def test_windowed_rt50_and_rt95_are_each_windows_percentiles_averaged():
    rng = random.Random(7)
    rows = [(i, rng.uniform(0, 20), 0.0, rng.uniform(1, 300), 200, rng.choice(["success", "success", "failed"]), 1,
             "", False) for i in range(400)]
    m = open_loop_metrics(table(rows), window_s=3.0, measured_s=20.0, start_s=0.0)
    by_window: dict[int, list[float]] = {}
    for row in rows:
        if row[5] == "success":
            by_window.setdefault(min(int(row[1] // 3.0), 6), []).append(row[3])
    assert len(by_window) == 7
    expected = [np.mean([np.quantile(v, q) for v in by_window.values()]) for q in (0.5, 0.95)]
    assert (m["windowP50Ms"], m["windowP95Ms"]) == pytest.approx(expected, abs=1e-3)
