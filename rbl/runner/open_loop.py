"""The open-loop driver: a round's requests go out on its schedule (load_schedule.py) through the
load generator (load_generator.py), whatever the answers, and the round becomes one row of
overload metrics (store/open_metrics.py) over its per-request table. A population of users
(`load = users`) is driven the same way, the generator pacing its users instead of a schedule.

Where the requests go: a library client's `POST /call` (protocol v1: one call through the
library's pattern per request, one pattern instance for the whole round, as production code shares
one), or straight to a mesh client's sidecar Envoy (the client is plain HTTP; the sidecar holds the
policies). The round's requests go to RUN_DIR/requests/SCENARIO/round-N.parquet; the target is
given time to work off its queue before the next round (DRAIN_MARGIN_S beyond the load's timeout).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import UsageError
from ..store.durable import own_directory, remove_own_directory
from ..store.open_metrics import open_loop_metrics
from ..plan_records import ClientKind, Load, load_of, load_size_problem
from ..store.requests import write_round_requests
from ..store.run_layout import REQUESTS
from .backend import RoundFailed
from .fault_control import fault_counts
from .closed_loop import strategy_for
from .load_generator import LoadFailed, LoadRun, classify, requests_so_far
from .load_schedule import send_offsets
from .oracles import as_records, fault_rate_violation, request_count_violation
from .round import Counters, RoundSetup

DRAIN_MARGIN_S = 30.0     # beyond the load's timeout, for an overloaded target to work off its queue


class LoadRound:
    """One open-loop round while the generator sends its schedule; its result is the request table
    (written to the round's Parquet file) and the generator's summary."""

    def __init__(self, load: LoadRun, work: Path, run_dir: Path, setup: RoundSetup):
        self.load, self.work, self.run_dir, self.setup = load, work, run_dir, setup

    def wait(self, timeout_s: float) -> bool:
        return self.load.wait(timeout_s)

    def requests_so_far(self) -> pa.Table | None:
        """The requests answered so far (a controller's window reads them while the round runs)."""
        try:
            return requests_so_far(self.load.out, self.setup.load.warmup_s,
                                   mesh=self.setup.client_kind is ClientKind.MESH)
        except (OSError, ValueError, pa.ArrowException):
            return None                    # a line being written: the next tick reads it whole

    def result(self) -> tuple[pa.Table, dict]:
        try:
            csv_path, summary = self.load.result()
            table = classify(csv_path, self.setup.load.warmup_s, mesh=self.setup.client_kind is ClientKind.MESH)
            write_round_requests(self.run_dir, self.setup.scenario["id"], self.setup.round_number, table)
            remove_own_directory(self.work)     # never through a link: nothing outside the run is deleted
        except (LoadFailed, OSError, ValueError, UsageError) as error:
            raise RoundFailed(f"open-loop load: {error}") from error
        return table, summary

    def stop(self) -> None:
        self.load.stop()


class OpenLoopDriver:
    """Drives a round with the load generator (DESIGN: open loop, for overload)."""

    def __init__(self, loadgen: Path, capacity_rps: float | None, run_dir: Path, rounds_in_run: int,
                 library_version: Callable[[str], str | None]):
        self.loadgen = loadgen
        self.capacity_rps = capacity_rps
        self.run_dir = run_dir
        self.rounds_in_run = rounds_in_run
        self.library_version = library_version

    def start(self, setup: RoundSetup) -> LoadRound:
        scenario, load = setup.scenario, setup.load
        if setup.client_kind is ClientKind.MESH:      # straight to the sidecar, which holds the policies
            url, body = setup.entry_url, None
        else:
            host, port = setup.client_address
            url = f"http://{host}:{port}/call"
            body = {"strategy": strategy_for(scenario), "target_url": setup.target_url, "successes": 1,
                    "max_requests": scenario["max_requests"], "share": "client", "vu": 1,
                    "instance": setup.instance, "max_duration_ms": max(1, int(load.timeout_s * 1000))}
        try:
            too_big = load_size_problem(load.record, self._capacity(load))     # a share: now its capacity is known
            if too_big:
                raise LoadFailed(f"the round asks for too much: {too_big}")
            seed = f"{scenario['id']}/{setup.round_number}"
            scenario_dir = self.run_dir / REQUESTS / scenario["id"]
            for directory in (scenario_dir.parent, scenario_dir):
                own_directory(directory)
            work = scenario_dir / f"round-{setup.round_number}.work"
            if load.population is not None:       # users who think: the generator paces them itself
                run = LoadRun(self.loadgen, url, None, work, load.timeout_s, load.duration_s, body,
                              population=load.population, seed=_seed_number(seed))
            else:
                run = LoadRun(self.loadgen, url, iter(send_offsets(load, self._capacity(load), seed=seed)), work,
                              load.timeout_s, load.duration_s, body)
            return LoadRound(run, work, self.run_dir, setup)
        except (LoadFailed, OSError, ValueError, UsageError) as error:
            raise RoundFailed(f"open-loop load: {error}") from error

    def _capacity(self, load: Load) -> float | None:
        """The capacity a share of it is taken of: the spec's `load.capacity`, else the calibrated one."""
        return load.capacity_rps if load.capacity_rps is not None else self.capacity_rps

    def settle_s(self, setup: RoundSetup) -> float:
        return setup.load.timeout_s + DRAIN_MARGIN_S

    def busy_s(self, setup: RoundSetup, driven) -> float:
        return setup.load.duration_s

    def rows(self, setup: RoundSetup, driven: tuple[pa.Table, dict], counters: Counters,
             times: tuple[str, str]) -> list[dict]:
        table, summary = driven
        facts = {"startTime": times[0], "endTime": times[1], "capacityRps": self._capacity(setup.load),
                 "scheduleLagMaxMs": summary.get("lag_max_ms"), "libraryVersion": self.library_version(setup.library),
                 "warmup": setup.warmup}
        return [open_round_row(setup.scenario, setup.round_number, table, counters.proxy, counters.sidecar, facts,
                               self.rounds_in_run)]


def _seed_number(seed: str) -> int:
    """A population's think-time seed from the scenario and round (the same each time they run)."""
    return int.from_bytes(hashlib.sha256(seed.encode()).digest()[:7], "big")


def target_columns(scenario: dict) -> dict:
    """A varying target's point, as two flat columns a CSV reader can sort by; none otherwise."""
    target = scenario.get("target")
    return {"targetPath": target["path"], "targetCpus": target.get("cpus")} if isinstance(target, dict) else {}


def open_round_row(scenario: dict, round_number: int, table: pa.Table, counters: dict, sidecar: dict | None,
                   run_facts: dict, rounds_in_run: int) -> dict:
    """The round's row of results.jsonl: the scenario's keys, the overload metrics over the measured
    part, the proxy's (and sidecar's) counters, `run_facts` (times, capacity, versions, warm-up) and
    the round's oracle violations."""
    load, fault = load_of(scenario), scenario["fault"]
    seen = counters.get("downstream_rq_total", 0)
    met, injected = fault_counts(fault, counters)
    row = {
        "userId": 1, "users": 1, "round": round_number, "lib": scenario["library"], "strategy": scenario["pattern"],
        "faultPercentage": fault["rate"], "faultType": fault["kind"],
        "faultStatus": fault.get("status"), "faultDuration": fault.get("duration_ms"),
        **open_loop_metrics(table, load.window_s, load.slo_ms, measured_s=load.measured_s, start_s=load.warmup_s),
        "load": load.record, "config": scenario["config"], "scenarioId": scenario["id"], "scenarioIndex": scenario["index"],
        "client": scenario["client"], "share": "client", "stoppedBy": "duration", **target_columns(scenario),
        "faultRateApplied": round(100 * injected / met, 4) if met else None, "proxyRequests": seen,
        **run_facts, **(sidecar or {}),
    }
    found = [v for v in [fault_rate_violation(fault["rate"], injected, met, rounds_in_run)] if v]
    # a library call reports its requests; the proxy must have seen exactly those (unless a call
    # timed out at the generator, whose requests may still arrive after the round)
    known = table.filter(pc.is_valid(table["requests"]))
    timed_out = pc.sum(pc.equal(table["cls"], "timed_out")).as_py() or 0
    if sidecar is None and known.num_rows == table.num_rows and timed_out == 0:
        count = request_count_violation(pc.sum(known["requests"]).as_py() or 0, seen, uncertain=False)
        found += [count] if count else []
    row["oracleViolations"] = as_records(found)
    return row
