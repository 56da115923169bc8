"""The adaptive retry paper's Table IV at small scale: examples/transient-overload.rbl on real sidecar
Envoys, a CPU-bound target in two replicas under cgroup budgets, 60% of its capacity with spikes to
140%. What the run measured is printed (pytest -s), whichever way it falls.

The paper's ordering (the AIMD retry above Istio's default 2 x 25 ms) is printed, not asserted: at
this scale it is not stable. Three 20-s rounds on one machine gave the default 13%, 21% and 95% of
its requests and the AIMD retry 39%, 12% and 56%; which configuration a spike tips into a queue that
outlasts it decides each round. What holds in every round is asserted: the controller halves its
retries in the spikes and adds them back after, and the per-try timeout it derives (target /
attempts) never falls to where every try times out, as the grid's 1 ms does.
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

# one round of 20 s with two spikes (3 s in every 10 s), windows of 2 s
SHORT = ("--rounds", "1", "--set", "load.duration=20s", "--set", "load.period=10s", "--set", "load.length=3s")
WINDOW_S = 2.0


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
    assert 7 <= len(decisions) <= 11, [d["elapsedS"] for d in decisions]
    # a spike's failures halve the retries, a calm window adds one back
    assert any(d["value"] < d["previous"] for d in decisions), decisions
    assert any(d["value"] > d["previous"] for d in decisions), decisions
    assert all(row["oracleViolations"] == [] for row in rows.values())


def test_the_aimd_retry_is_measured_against_the_static_grid(transient):
    run, rows = transient
    carried = {label: row["carriedThroughput"] for label, row in rows.items()}
    statics = {label: value for label, value in carried.items() if label != "aimd"}
    best = max(statics, key=statics.get)
    print("\ncarried throughput:", ", ".join(f"{label} {value:.1%}" for label, value in
                                            sorted(carried.items(), key=lambda item: -item[1])))
    # The round's own noise: two configurations met the same spikes window by window, so the spread
    # of their per-window differences says how far apart one round leaves two equal ones (twice the
    # standard error of the mean difference).
    for other in dict.fromkeys([best, "2 x 25 ms"]):
        aimd, theirs = window_carried(run, rows["aimd"]), window_carried(run, rows[other])
        windows = min(len(aimd), len(theirs))
        gaps = aimd[:windows] - theirs[:windows]
        noise = 2 * float(np.std(gaps, ddof=1)) / np.sqrt(windows)
        print(f"aimd {carried['aimd']:.1%} against {other} {carried[other]:.1%}: "
              f"{100 * (carried['aimd'] - carried[other]):+.1f} points, the round's noise {100 * noise:.1f} points "
              f"over {windows} windows")
    # a 1 ms try almost never answers this target (0.1-1.4% of the requests here), and the AIMD
    # retry's per-try timeout (100 ms / attempts) never comes down to it
    one_ms = {label: value for label, value in statics.items() if label.endswith(" x 1 ms")}
    assert len(one_ms) == 3 and max(one_ms.values()) < 0.05, one_ms
    assert carried["aimd"] > 0.03 + max(one_ms.values()), carried
