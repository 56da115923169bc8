"""bench/loadgen_peers.py's arithmetic: what a generator achieved and how late it sent, from send times."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "loadgen_peers.py"
spec = importlib.util.spec_from_file_location("loadgen_peers", SCRIPT)
peers = importlib.util.module_from_spec(spec)
sys.modules["loadgen_peers"] = peers                          # its dataclass looks its module up
spec.loader.exec_module(peers)


def test_a_generator_on_time_achieves_the_rate_with_no_lag():
    rate = 1000
    intended = [i / rate for i in range(3000)]
    f = peers.figures(rate, intended, intended, cpu_s=0.6)
    assert f.achieved == pytest.approx(rate) and f.lag_p50_ms == f.lag_p99_ms == 0
    assert f.cpu_per_1000_ms == pytest.approx(200.0) and f.requests == 3000


def test_a_generator_that_falls_behind_achieves_less_and_its_lag_grows():
    rate = 1000
    intended = [i / rate for i in range(3000)]
    sent = [t * 1.25 for t in intended]                       # it manages 800/s
    f = peers.figures(rate, sent, intended, cpu_s=1.0)
    assert f.achieved == pytest.approx(800, rel=0.01)
    assert f.lag_p99_ms == pytest.approx(0.25 * 2.97 * 1000, rel=0.01)
    assert f.achieved < peers.IN_SCHEDULE * rate


def test_percentile_is_the_nearest_rank():
    values = list(range(1, 101))
    assert peers.percentile(values, 0.5) == 50 and peers.percentile(values, 0.99) == 99
    assert peers.percentile([7.0], 0.99) == 7.0
