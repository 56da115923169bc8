"""The overload papers' metrics of one open-loop round, from its per-request records
(rbl/store/requests.py): what was offered, what was carried, how the rest failed (failed, circuit
broken, timed out, rejected), how long successes took, and how often the latency objective held.

Only measured requests count (warmup false). Response times run from the SCHEDULED send time, so a
load generator that fell behind shows it as latency (no coordinated omission); lagP99Ms says how far
behind it fell. Percentiles interpolate linearly between closest ranks, the definition
rbl/store/metrics.percentile uses for the closed-loop metrics (numpy's default method).

Pure functions of an Arrow table; each returns plain Python values (JSON-ready)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .open_columns import OPEN_LOOP_COLUMNS, RESPONSE_CLASSES, SHARE_COLUMNS  # noqa: F401  (OPEN_LOOP_COLUMNS: its contract)



NEVER_MS = 1e18          # the response time the SLO share gives a request that did not succeed


def _quantile(values: np.ndarray, q: float) -> float | None:
    """rbl/store/metrics.percentile's definition (linear between closest ranks), in ms to the µs."""
    if values.size == 0:
        return None
    return round(float(np.quantile(values, q, method="linear")), 3)


def _values(table: pa.Table, column: str) -> np.ndarray:
    """A column's non-null values as floats."""
    return pc.drop_null(table.column(column)).to_numpy(zero_copy_only=False).astype(float)


def measured_rows(table: pa.Table) -> pa.Table:
    return table.filter(pc.invert(pc.fill_null(table.column("warmup"), False)))


def _successes(table: pa.Table) -> pa.Table:
    return table.filter(pc.equal(table.column("cls"), "success"))


def open_loop_metrics(table: pa.Table, window_s: float = 5.0, slo_ms: float = 100.0,
                      measured_s: float | None = None, start_s: float | None = None) -> dict:
    """The metrics of one round (OPEN_LOOP_COLUMNS, in that order).

    measured_s: how long the measured part of the round lasted (the load's duration_s - warmup_s);
    without it, the span of the measured requests' scheduled times (slightly shorter: the gap after
    the last send is not seen). start_s: when the measured part began (the warm-up); without it, the
    first measured send. Rates are per second of measured_s. A class other than the five counts as
    failed, so the shares always sum to 1.

    p95UnderSloShare: the measured time is cut into consecutive windows of window_s from start_s (the
    last one may be shorter); the share of windows whose p95 response time, over ALL the window's
    requests, is below slo_ms, an unsuccessful request counting as never answered in time (so a
    window meets the objective only when at least 95% of its requests succeeded within it). A window
    without requests is not under the objective (nothing was served in time).

    windowP50Ms, windowP95Ms: each window's p50 and p95 of successful response times (windows as
    above), averaged over the windows with a success: the adaptive mesh papers' RT50 and RT95.

    A round whose requests are all warm-up has offeredRequests 0 and None for every share,
    percentile and ratio (0/0), and rates of 0 only when measured_s says how long it lasted."""
    rows = measured_rows(table)
    offered = rows.num_rows
    scheduled = rows.column("scheduled_s").to_numpy(zero_copy_only=False).astype(float)
    if measured_s is None and offered:
        measured_s = float(scheduled.max() - scheduled.min()) or None
    if start_s is None and offered:
        start_s = float(scheduled.min())
    classes = rows.column("cls").to_pylist()
    counts = dict.fromkeys(RESPONSE_CLASSES, 0)
    for name in classes:
        counts[name if name in counts else "failed"] += 1
    successes = _successes(rows)
    success_ms = np.sort(_values(successes, "response_ms"))
    metrics = {
        "offeredRequests": offered,
        "measuredSeconds": None if measured_s is None else round(measured_s, 6),
        "offeredRate": _rate(offered, measured_s),
        "carriedRate": _rate(counts["success"], measured_s),
        "carriedThroughput": _ratio(counts["success"], offered),
    }
    metrics.update({column: _ratio(counts[name], offered) for name, column in SHARE_COLUMNS.items()})
    metrics.update({"successP50Ms": _quantile(success_ms, 0.50), "successP95Ms": _quantile(success_ms, 0.95),
                    "successP99Ms": _quantile(success_ms, 0.99)})
    metrics["p95UnderSloShare"] = _under_slo_share(rows, window_s, slo_ms, start_s, measured_s) if offered \
        else None
    metrics["lagP99Ms"] = _quantile(_values(rows, "lag_ms"), 0.99)
    requests = _values(rows, "requests")
    metrics["requestsPerCall"] = round(float(requests.mean()), 6) if requests.size else None
    metrics["windowP50Ms"], metrics["windowP95Ms"] = (
        _window_means(successes, window_s, start_s, measured_s) if offered else (None, None))
    return metrics


def _rate(count: int, seconds: float | None) -> float | None:
    return None if not seconds else round(count / seconds, 6)


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def _under_slo_share(rows: pa.Table, window_s: float, slo_ms: float, start_s: float,
                     measured_s: float | None) -> float:
    windows = max(1, math.ceil((measured_s or 0) / window_s - 1e-9))
    times = rows.column("scheduled_s").to_numpy(zero_copy_only=False).astype(float)
    response = pc.fill_null(rows.column("response_ms"), math.nan).to_numpy(zero_copy_only=False).astype(float)
    # an unsuccessful (or unanswered) request never met the objective: it counts as later than any
    # bound (finite, so that interpolating next to it stays a number)
    success = pc.fill_null(pc.equal(rows.column("cls"), "success"), False).to_numpy(zero_copy_only=False)
    late = np.where(success & ~np.isnan(response), response, NEVER_MS)
    index = np.clip(np.floor((times - start_s) / window_s).astype(int), 0, windows - 1)
    under = 0
    for window in range(windows):
        values = late[index == window]
        if values.size and np.quantile(values, 0.95, method="linear") < slo_ms:
            under += 1
    return under / windows


def _window_means(successes: pa.Table, window_s: float, start_s: float,
                  measured_s: float | None) -> tuple[float | None, float | None]:
    """The adaptive mesh papers' RT50 and RT95: each window's p50 and p95 of the successes' response
    times, averaged over the windows that had a success (windows cut as for p95UnderSloShare)."""
    times = successes.column("scheduled_s").to_numpy(zero_copy_only=False).astype(float)
    response = pc.fill_null(successes.column("response_ms"), math.nan).to_numpy(zero_copy_only=False).astype(float)
    answered = ~np.isnan(response)
    if not answered.any():
        return None, None
    windows = max(1, math.ceil((measured_s or 0) / window_s - 1e-9))
    index = np.clip(np.floor((times[answered] - start_s) / window_s).astype(int), 0, windows - 1)
    order = np.argsort(index, kind="stable")           # one pass over the windows' groups, not one per window
    grouped = np.split(response[answered][order], np.flatnonzero(np.diff(index[order])) + 1)
    per_window = [np.quantile(values, (0.5, 0.95), method="linear") for values in grouped]
    p50, p95 = np.mean(per_window, axis=0)
    return round(float(p50), 3), round(float(p95), 3)


def class_time_series(table: pa.Table, bin_s: float = 1.0) -> list[dict]:
    """Requests per bin of scheduled time and response class, warm-up included (the figure shades it):
    [{"t": bin start in s, "success": n, "failed": n, ...}, ...] from t = 0 to the last send. With
    a `round` column (several rounds, rbl/store/requests.read_requests), each count is the mean per
    round."""
    if table.num_rows == 0:
        return []
    scheduled = table.column("scheduled_s").to_numpy(zero_copy_only=False).astype(float)
    rounds = len(pc.unique(table.column("round"))) if "round" in table.column_names else 1
    bins = np.floor(np.maximum(scheduled, 0) / bin_s).astype(int)
    size = int(bins.max()) + 1
    classes = np.array(table.column("cls").to_pylist(), dtype=object)
    series = {name: np.bincount(bins[classes == name], minlength=size) / rounds for name in RESPONSE_CLASSES}
    known = np.isin(classes, RESPONSE_CLASSES)
    series["failed"] = series["failed"] + np.bincount(bins[~known], minlength=size) / rounds   # as in the metrics
    return [{"t": round(b * bin_s, 9), **{name: float(series[name][b]) for name in RESPONSE_CLASSES}}
            for b in range(size)]


def success_cdf(table: pa.Table) -> tuple[list[float], list[float]]:
    """The empirical CDF of the measured successful requests' response_ms: the sorted times and, for
    the i-th (from 1) of n, the probability i/n."""
    values = np.sort(_values(_successes(measured_rows(table)), "response_ms"))
    n = values.size
    return values.tolist(), (np.arange(1, n + 1) / n).tolist()


def response_cdf(table: pa.Table) -> tuple[list[float], list[float]]:
    """The empirical CDF of every measured request's response_ms, whatever its class (a refusal is a
    fast answer too). Over all n measured requests: one never answered (no response_ms, e.g. timed
    out) is counted in n but never reached, so the curve tops out at the share answered."""
    measured = measured_rows(table)
    values = np.sort(_values(measured, "response_ms"))
    n = measured.num_rows
    return values.tolist(), (np.arange(1, values.size + 1) / n).tolist() if n else []


def windowed_percentiles(table: pa.Table, window_s: float, quantiles: tuple[float, ...] = (0.5, 0.95, 0.99)
                         ) -> list[dict]:
    """Per window of scheduled time (from 0, warm-up included), the quantiles of the successful
    requests' response_ms: [{"t": window start in s, "n": successes, 0.5: ms, ...}, ...]; a window
    without successes has None. Several rounds' requests (a `round` column) are pooled per window."""
    if table.num_rows == 0:
        return []
    successes = _successes(table)
    successes = successes.filter(pc.is_valid(successes.column("response_ms")))
    last = float(pc.max(table.column("scheduled_s")).as_py())
    windows = max(1, int(math.floor(max(last, 0) / window_s)) + 1)
    times = successes.column("scheduled_s").to_numpy(zero_copy_only=False).astype(float)
    response = successes.column("response_ms").to_numpy(zero_copy_only=False).astype(float)
    index = np.clip(np.floor(np.maximum(times, 0) / window_s).astype(int), 0, windows - 1)
    series = []
    for window in range(windows):
        values = response[index == window]
        series.append({"t": round(window * window_s, 9), "n": int(values.size),
                       **{q: _quantile(values, q) for q in quantiles}})
    return series
