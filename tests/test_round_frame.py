"""The round's frame (rbl/runner/round.py) ticks observers *while* a driver drives, on the real
services of the local backend: in a closed-loop round of virtual users and in an open-loop round of
the load generator. An observer sees the round's live counters: a tick that came after the round,
or that read counters only once the load was over, would not see them grow."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from rbl.backends.local.backend import LocalBackend, LocalOptions
from rbl.compiler.expand import iter_scenario_lines
from rbl.compiler.pipeline import compile_source
from rbl.compiler.plan import plan_header
from rbl.runner.round import RoundMoment
from rbl.runner.run import RunSettings, start_run

from .test_run import rows

# each request waits 30 ms at the proxy: a user's 25 successes take about 0.75 s
CLOSED = """space frame_closed {
  rounds = 1
  users = 2
  successes = 25
  max_requests = 100
  target = "/status/200"
  fault.kind = delay
  fault.duration = 30ms
  fault.rate = 100%
  client tenacity.baseline {}
}
"""

OPEN = """space frame_open {
  rounds = 1
  load = open
  load.rps = 40
  load.duration = 3s
  load.warmup = 1s
  load.timeout = 2s
  target = "/status/200"
  client istio.baseline {}
}
"""


class Recorder:
    """An observer that keeps what each tick saw, with the wall time of the tick."""

    def __init__(self, interval_s: float):
        self.interval_s = interval_s
        self.moments: list[tuple[float, RoundMoment]] = []

    def tick(self, moment: RoundMoment) -> None:
        self.moments.append((time.monotonic(), moment))
        # what an adaptive controller reads at its tick: the requests answered so far, the sidecar's queue
        self.live = getattr(self, "live", []) + [(moment.requests(), moment.queue())]


def run_with(tmp_path: Path, spec: str, observer: Recorder) -> list[dict]:
    space = compile_source(spec, "frame.rbl").space
    code = start_run(plan_header(space), iter_scenario_lines(space), tmp_path / "out",
                     LocalBackend(LocalOptions(proxy="builtin", seed=1)), Console(stderr=True, quiet=True),
                     RunSettings(observers=(observer,)))
    assert code == 0
    return rows(tmp_path / "out")


def seen_by_proxy(moment: RoundMoment) -> int:
    return moment.counters.proxy.get("downstream_rq_total", 0)


def assert_ticked_during_the_round(observer: Recorder, total_requests: int, at_least: int) -> None:
    assert len(observer.moments) >= at_least, [m.elapsed_s for _, m in observer.moments]
    elapsed = [moment.elapsed_s for _, moment in observer.moments]
    assert elapsed == sorted(elapsed)
    seen = [seen_by_proxy(moment) for _, moment in observer.moments]
    assert seen == sorted(seen)                        # counters since the round's start, read at each tick
    # at least two ticks while requests were still arriving: their counts grew, and stayed below the round's
    during = [count for count in seen if 0 < count < total_requests]
    assert len(set(during)) >= 2, seen


def test_an_observer_ticks_during_a_closed_loop_round(tmp_path):
    observer = Recorder(interval_s=0.1)
    found = run_with(tmp_path, CLOSED, observer)
    assert {row["round"] for row in found} == {1} and len(found) == 2
    total = found[0]["proxyRequests"]
    assert total >= 50
    assert_ticked_during_the_round(observer, total, at_least=4)
    moment = observer.moments[0][1]
    assert moment.setup.scenario["library"] == "tenacity" and moment.setup.load is None
    assert moment.counters.sidecar is None              # a library client has no sidecar


def test_an_observer_ticks_during_an_open_loop_round_and_sees_the_sidecar(tmp_path):
    observer = Recorder(interval_s=0.25)
    (row,) = run_with(tmp_path, OPEN, observer)
    total = row["proxyRequests"]
    assert total >= 100                                  # 40/s for 3 s
    assert_ticked_during_the_round(observer, total, at_least=6)
    moment = observer.moments[-1][1]
    assert moment.setup.load is not None and moment.setup.load.duration_s == 3
    # the mesh client's sidecar counters, live too: requests it sent upstream by then
    assert moment.counters.sidecar is not None
    assert max(m.counters.sidecar.get("sidecarUpstreamRequests", 0) for _, m in observer.moments) > 0, \
        observer.moments[-1][1].counters.sidecar
    # and the round's requests as they are answered, growing while the load runs, beside the live queue
    answered = [table.num_rows if table is not None else 0 for table, _ in observer.live]
    assert answered == sorted(answered) and 0 < max(answered) <= total and len(set(answered)) >= 3, answered
    assert all(isinstance(queue, int) and queue >= 0 for _, queue in observer.live)


class OneRoundOnly(Recorder):
    """Ticked in the rounds it chooses: round_starts may leave it out of a round (interval None)."""

    def round_starts(self, setup) -> None:
        self.interval_s = 0.25 if setup.round_number == 2 else None


def test_an_observer_may_leave_itself_out_of_a_round(tmp_path):
    observer = OneRoundOnly(interval_s=0.25)
    run_with(tmp_path, OPEN.replace("rounds = 1", "rounds = 2"), observer)
    assert observer.moments and {moment.setup.round_number for _, moment in observer.moments} == {2}
