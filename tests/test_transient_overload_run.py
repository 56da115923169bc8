"""The adaptive retry paper's Table IV at small scale: examples/transient-overload.rbl on real sidecar
Envoys, a CPU-bound target in two replicas under cgroup budgets, 60% of its capacity with spikes to
140%; timed-out tries are retried (retryOn 5xx) and the target drops the work of a try its caller
gave up on (target.drop_abandoned), the example's two choices that let the retries matter on one hop.
What the run measured is printed (pytest -s), and the paper's ordering is asserted: the AIMD retry
carries more than Istio's default 2 x 25 ms, and no less than the grid's best static configuration
beyond the round's noise.

Without the two choices the ordering did not hold from one round to the next: one spike left a
backlog of abandoned work at the target that outlasted the round, and then every configuration
carried 11-13% (the 1 ms ones 0%; one run here); with Istio's default conditions a timed-out try is
not retried, so `attempts` changed nothing, and the grid's 25 and 50 ms rows, one configuration
measured six times, carried 60-79% in one round.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest

from rbl.store.controllers import read_decisions
from rbl.store.requests import read_requests

from .conftest import REPO, run_rbl

# one round of 40 s with four spikes (3 s in every 10 s), windows of 2 s
SHORT = ("--rounds", "1", "--set", "load.duration=40s", "--set", "load.period=10s", "--set", "load.length=3s")
WINDOW_S = 2.0
DEFAULT = "2 x 25 ms"          # Istio's default retry


@pytest.fixture(scope="module")
def transient(tmp_path_factory) -> tuple[Path, dict[str, dict]]:
    work = tmp_path_factory.mktemp("transient")
    done = run_rbl("run", str(REPO / "examples" / "transient-overload.rbl"), "-o", "run", *SHORT, cwd=work,
                   timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "NOT enforced" not in done.stdout + done.stderr       # the budgets make the spikes overload
    rows = [json.loads(line) for line in (work / "run" / "results.jsonl").read_text().splitlines()]
    return work / "run", {_label(row): row for row in rows}


def _label(row: dict) -> str:
    if row["client"] != "static":
        return row["client"]
    return f"{row['config']['attempts']} x {row['config']['perTryTimeout']:g} ms"


def window_carried(run: Path, row: dict) -> np.ndarray:
    """The carried share (successes / requests sent) of each 2-s window of the round, by send time."""
    requests = read_requests(run)
    mine = requests.filter(pc.and_(pc.equal(requests["scenario"], row["scenarioId"]), pc.invert(requests["warmup"])))
    times = mine["scheduled_s"].to_numpy()
    success = np.asarray(mine["cls"].to_pylist()) == "success"
    index = ((times - times.min()) // WINDOW_S).astype(int)
    return np.bincount(index, weights=success) / np.maximum(np.bincount(index), 1)


def test_the_aimd_retry_retunes_the_route_while_the_spikes_come(transient):
    run, rows = transient
    decisions = [d for d in read_decisions(run) if d["scenarioId"] == rows["aimd"]["scenarioId"]]
    # one every 2 s of the 44-s round (its 4-s warm-up too)
    assert 16 <= len(decisions) <= 23, [d["elapsedS"] for d in decisions]
    # a spike's failures halve the retries, a calm window adds one back
    assert any(d["value"] < d["previous"] for d in decisions), decisions
    assert any(d["value"] > d["previous"] for d in decisions), decisions
    assert all(row["oracleViolations"] == [] for row in rows.values())


def round_noise(run: Path, rows: dict[str, dict], one: str, other: str) -> float:
    """How far apart one round leaves two configurations that met the same spikes window by window:
    twice the standard error of the mean of their per-window differences in carried share."""
    mine, theirs = window_carried(run, rows[one]), window_carried(run, rows[other])
    windows = min(len(mine), len(theirs))
    gaps = mine[:windows] - theirs[:windows]
    return 2 * float(np.std(gaps, ddof=1)) / np.sqrt(windows)


def test_the_aimd_retry_carries_more_than_istios_default_and_about_the_best_static(transient):
    run, rows = transient
    carried = {label: row["carriedThroughput"] for label, row in rows.items()}
    statics = {label: value for label, value in carried.items() if label != "aimd"}
    best = max(statics, key=statics.get)
    print("\ncarried throughput:", ", ".join(f"{label} {value:.1%}" for label, value in
                                            sorted(carried.items(), key=lambda item: -item[1])))
    noise = {other: round_noise(run, rows, "aimd", other) for other in dict.fromkeys([best, DEFAULT])}
    for other, spread in noise.items():
        print(f"aimd {carried['aimd']:.1%} against {other} {carried[other]:.1%}: "
              f"{100 * (carried['aimd'] - carried[other]):+.1f} points, the round's noise {100 * spread:.1f} points")
    # the paper: 53.27% against 4.41% for the default, about a point above the best static
    assert carried["aimd"] > carried[DEFAULT], carried
    assert carried["aimd"] >= carried[best] - noise[best], (carried, noise)
    # the retries matter (timed-out tries are retried): 5 of them storm in the spikes and carry less
    # than 1 at the same per-try timeout (0.9-38% against 45-56% in three runs here); with Istio's
    # default conditions the two were the same configuration
    for timeout in (25, 50):
        assert carried[f"5 x {timeout} ms"] < carried[f"1 x {timeout} ms"], carried
