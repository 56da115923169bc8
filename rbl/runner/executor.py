"""Executes a plan: every scenario x round in the run's order (run_order.py: Algorithm 1's by
default), one at a time (docs/running.md). A scenario's first `warmup` rounds are run and stored
like the others, flagged `warmup: true`.

Per round: set the scenario's fault and confirm it, reset the proxy's counters, start `u`
virtual users at once (one POST /run each to the client service), wait for all of them, read the
counters, compute the metrics centrally, check the oracles (oracles.py) and append the round's
rows to results.jsonl. An open-loop scenario's round (one with a `load`) sends its schedule through
the load generator instead of virtual users and stores one row of overload metrics (open_loop.py),
then waits until the target has worked off its queue.
A round whose client service died, hung or refused the job is recorded as failed with the
reason; the service is restarted and the run goes on. Before each round the runner checks that
its target and proxy still run and that a request through the proxy reaches its own target, and
after each round that they still run: if not, the round fails and the run stops (ServicesLost),
since every later round would measure something else.
"""

from __future__ import annotations

import http.client
import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..libraries.composition import policies_of
from ..store.metrics import runs_measured_patterns, vu_metrics
from ..store.results import RunDirectory
from ..store.run_order import RunOrder, ordered_runs, rounds_per_scenario
from .backend import Services
from . import mesh_oracles
from .liveness import ServicesLost, probe_target
from .pattern_oracles import pattern_violations
from .oracles import (Violation, as_records, fault_rate_violation, request_count_violation,
                      user_violations)

DEFAULT_ROUND_TIMEOUT = 300.0
VU_TIME_SHARE = 0.9       # of the round timeout, given to a virtual user's loop (see protocol.py)
DRAIN_MARGIN_S = 30.0     # beyond the load's timeout, for an overloaded target to work off its queue
DRAIN_POLL_S = 0.5


class RoundFailed(Exception):
    """A round could not be completed; the message is the reason recorded in failures.jsonl."""


@dataclass
class RoundTiming:
    """Where a round's wall time went: the virtual users' own work vs the runner's overhead."""

    wall_s: float
    longest_vu_s: float

    @property
    def overhead_s(self) -> float:
        return self.wall_s - self.longest_vu_s


@dataclass
class RunOutcome:
    rounds_run: int = 0
    rounds_skipped: int = 0
    failures: list[dict] = field(default_factory=list)
    timings: list[RoundTiming] = field(default_factory=list)
    violations: dict[str, int] = field(default_factory=dict)     # oracle -> rows of this session breaking it


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def strategy_for(scenario: dict) -> list[dict]:
    """The protocol's strategy list: empty for the baseline, else each pattern (several for a composed
    client, outermost first, as written) with its part of the configuration."""
    return [{"pattern": name, "params": params}
            for name, params in policies_of(scenario["pattern"], scenario["config"]).items()]


def post_job(address: tuple[str, int], job: dict, timeout: float) -> tuple[dict, str, str]:
    """One virtual user: POST /run and wait for its observations (with start/end timestamps)."""
    started = _now()
    connection = http.client.HTTPConnection(*address, timeout=timeout)
    try:
        connection.request("POST", "/run", body=json.dumps(job), headers={"content-type": "application/json"})
        response = connection.getresponse()
        body = response.read()
    except TimeoutError as error:
        raise RoundFailed(f"virtual user {job['vu']}: no answer from the client service within {timeout:g} s") from error
    except (OSError, http.client.HTTPException) as error:
        raise RoundFailed(f"virtual user {job['vu']}: the client service connection failed: {error}") from error
    finally:
        connection.close()
    if response.status != 200:
        raise RoundFailed(f"virtual user {job['vu']}: the client service answered HTTP {response.status}: "
                          f"{body.decode(errors='replace')[:300]}")
    try:
        observation = json.loads(body)
    except (ValueError, RecursionError):
        observation = None
    if not isinstance(observation, dict):
        raise RoundFailed(f"virtual user {job['vu']}: the client service answered something that is not "
                          f"a JSON object: {body[:100]!r}")
    return observation, started, _now()


class Executor:
    def __init__(self, run: RunDirectory, services: Services, header: dict, progress,
                 round_timeout: float = DEFAULT_ROUND_TIMEOUT, order: RunOrder = RunOrder()):
        self.run = run
        self.order = order
        self.services = services
        self.header = header
        self.progress = progress
        self.round_timeout = round_timeout
        self.clients = {c["label"]: c for c in header["clients"]}
        self.session = uuid.uuid4().hex[:8]
        self.loadgen: Path | None = None          # open-loop plans: the load generator (run.py sets it)
        self.capacity_rps: float | None = None    # ... and the target's capacity, for rates given as shares
        self._versions: dict[str, str | None] = {}   # library -> the version its client reports (open loop)
        self.outcome = RunOutcome()              # filled as rounds finish, so an interrupt keeps it
        most_users = max((s["users"] for s in run.scenarios()), default=1)
        self.pool = ThreadPoolExecutor(max_workers=most_users, thread_name_prefix="vu")

    def execute(self) -> RunOutcome:
        outcome = self.outcome
        try:
            for scenario, round_number in ordered_runs(self.order, self.run.scenarios, rounds_per_scenario(self.header)):
                if (scenario["id"], round_number) in self.run.completed:
                    outcome.rounds_skipped += 1
                    self.progress.advance(scenario, round_number, skipped=True)
                    continue
                self.progress.round_started(scenario, round_number)
                self._attempt(scenario, round_number, outcome)
                self.progress.advance(scenario, round_number)
        finally:
            self.pool.shutdown(wait=False, cancel_futures=True)
        return outcome

    def _attempt(self, scenario: dict, round_number: int, outcome: RunOutcome) -> None:
        try:
            rows, timing = self.run_round(scenario, round_number)
        except RoundFailed as failure:
            self._record_failure(scenario, round_number, str(failure), outcome)
            self._recover(scenario["library"])
            return
        except ServicesLost as lost:
            self._record_failure(scenario, round_number, lost.message, outcome)
            lost.message += "; the run stops"
            lost.hint = (f"the rows of the finished rounds are kept; find out what stopped or replaced the "
                         f"service, then continue with `rbl run --resume {self.run.path}`")
            raise
        self.run.append_round(rows)
        outcome.rounds_run += 1
        for row in rows:
            for oracle in {v["oracle"] for v in row["oracleViolations"]}:
                outcome.violations[oracle] = outcome.violations.get(oracle, 0) + 1
        outcome.timings.append(timing)

    def _record_failure(self, scenario: dict, round_number: int, reason: str, outcome: RunOutcome) -> None:
        record = {"scenarioId": scenario["id"], "scenarioIndex": scenario["index"], "round": round_number,
                  "client": scenario["client"], "reason": reason, "at": _now()}
        outcome.failures.append(record)
        self.run.record_failure(record)
        self.progress.note(f"scenario {scenario['index'] + 1} round {round_number} failed: {reason}")

    def _check_services(self, library: str, through_proxy: bool) -> None:
        """The target, the proxy and this round's client service still run as the runner's own
        children; with `through_proxy`, a request through the proxy also reaches the run's own target."""
        for owner, why in self.services.lost_services():
            if owner is None:
                raise ServicesLost(why)
            if owner == library:
                raise RoundFailed(why)          # a client service is restarted, as when it dies mid-round
        probe = self.services.target_probe() if through_proxy else None
        if probe is not None:
            self.services.fault.clear()          # the last round's fault would abort or delay the probe
            problem = probe_target(*probe)
            if problem:
                raise ServicesLost(problem)

    def _recover(self, library: str) -> None:
        """Restart the client service so a dead or hung one does not fail every later round."""
        self.progress.note(f"restarting the {library} client service")
        self.services.restart_client(library)

    def run_round(self, scenario: dict, round_number: int) -> tuple[list[dict], RoundTiming]:
        if "load" in scenario:
            return self.run_open_round(scenario, round_number)
        begin = time.perf_counter()
        client = self.clients[scenario["client"]]
        fault = self.services.fault
        self._check_services(scenario["library"], through_proxy=True)
        fault.apply(scenario["fault"])
        # a mesh client's sidecar takes the configuration's policies (nothing for a library client)
        self.services.configure_client(scenario["library"], scenario["pattern"], scenario["config"])
        sidecar_before = self.services.client_counters(scenario["library"])
        fault.reset_counters()
        address = self.services.client_address(scenario["library"])
        base_job = {"strategy": strategy_for(scenario), "target_url": self.services.target_url(self.header["target"]["path"], scenario["library"]),
                    "successes": scenario["successes"], "max_requests": scenario["max_requests"],
                    "share": client.get("share", "user"),
                    "instance": f"{self.session}/{scenario['id']}/{round_number}",
                    # the client ends a virtual user's loop itself before the runner gives up on it
                    "max_duration_ms": int(self.round_timeout * 1000 * VU_TIME_SHARE)}
        futures = [self.pool.submit(post_job, address, {**base_job, "vu": vu}, self.round_timeout)
                   for vu in range(1, scenario["users"] + 1)]
        results, errors = [], []
        for future in futures:
            try:
                results.append(future.result())
            except RoundFailed as error:
                errors.append(str(error))
        if errors:
            raise RoundFailed(errors[0] + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
        counters = fault.counters()
        sidecar = _increase(sidecar_before, self.services.client_counters(scenario["library"]))
        # a service that died or was replaced during the round: its rows measured something else
        self._check_services(scenario["library"], through_proxy=False)
        try:
            rows = [self._row(scenario, round_number, client, counters, *result, sidecar=sidecar) for result in results]
            for row in rows:
                row["warmup"] = round_number <= self.header.get("warmup", 0)
            self._check_oracles(scenario, client, rows, [result[0] for result in results], counters, sidecar)
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise RoundFailed(f"the client service answered an observation rbl cannot read "
                              f"({type(error).__name__}: {error})") from error
        longest = max((r[0]["total_us"] for r in results), default=0) / 1e6
        return rows, RoundTiming(time.perf_counter() - begin, longest)

    def run_open_round(self, scenario: dict, round_number: int) -> tuple[list[dict], RoundTiming]:
        """An open-loop round (open_loop.py): one row, the round's overload metrics."""
        # imported here: pyarrow and numpy take a third of a second, which closed-loop runs need not pay
        from .open_loop import LoadFailed, open_round, open_round_row
        begin = time.perf_counter()
        library, load = scenario["library"], scenario["load"]
        self._check_services(library, through_proxy=True)
        self.services.fault.apply(scenario["fault"])
        self.services.configure_client(library, scenario["pattern"], scenario["config"])
        sidecar_before = self.services.client_counters(library)
        self.services.fault.reset_counters()
        target_url = self.services.target_url(self.header["target"]["path"], library)
        if sidecar_before is not None:          # mesh: straight to the sidecar, which holds the policies
            url, body = target_url, None
        else:
            host, port = self.services.client_address(library)
            url = f"http://{host}:{port}/call"
            body = {"strategy": strategy_for(scenario), "target_url": target_url, "successes": 1,
                    "max_requests": scenario["max_requests"], "share": "client", "vu": 1,
                    "instance": f"{self.session}/{scenario['id']}/{round_number}",
                    "max_duration_ms": max(1, int(load["timeout_s"] * 1000))}
        started = _now()
        try:
            table, summary, _ = open_round(self.loadgen, scenario, round_number, self.run.path, url, body,
                                           self.capacity_rps)
        except (LoadFailed, OSError, ValueError) as error:
            raise RoundFailed(f"open-loop load: {error}") from error
        ended = _now()
        counters = self.services.fault.counters()
        sidecar = _increase(sidecar_before, self.services.client_counters(library))
        self._check_services(library, through_proxy=False)
        self._drain(float(load["timeout_s"]) + DRAIN_MARGIN_S)
        if library not in self._versions:
            self._versions[library] = self.services.client_versions().get(library)
        row = open_round_row(scenario, round_number, table, counters, sidecar,
                             {"startTime": started, "endTime": ended, "capacityRps": self.capacity_rps,
                              "scheduleLagMaxMs": summary.get("lag_max_ms"), "libraryVersion": self._versions[library],
                              "warmup": round_number <= self.header.get("warmup", 0)},
                             rounds_in_run=self.header["size"] * rounds_per_scenario(self.header))
        return [row], RoundTiming(time.perf_counter() - begin, float(load["duration_s"]))

    def _drain(self, seconds: float) -> None:
        """After an open-loop round, wait until the target has worked off what queued at it (a
        request through the proxy is answered by it again), so the next round starts on an idle
        target; the next round's own check says if it never does."""
        probe = self.services.target_probe()
        if probe is None:
            return
        self.services.fault.clear()
        deadline = time.monotonic() + seconds
        while probe_target(*probe) is not None and time.monotonic() < deadline:
            time.sleep(DRAIN_POLL_S)

    def _check_oracles(self, scenario: dict, client: dict, rows: list[dict], observations: list[dict],
                       counters: dict, sidecar: dict | None = None) -> None:
        """Each row's oracleViolations: its user's, then the round's (every user shares them)."""
        fault = scenario["fault"]
        seen = counters.get("downstream_rq_total", 0)
        injected = counters.get("fault.aborts_injected" if fault["kind"] == "abort" else "fault.delays_injected", 0)
        rounds_in_run = self.header["size"] * rounds_per_scenario(self.header)
        shared: list[Violation] = []
        rate = fault_rate_violation(fault["rate"], injected, seen, rounds_in_run)
        if rate:
            shared.append(rate)
        uncertain = any(call.get("cut_short") or any(request[2] == 0 for request in call["requests"])
                        for o in observations for call in o["calls"])
        if sidecar is not None:
            shared += mesh_oracles.round_violations(scenario, rows, seen, sidecar, uncertain)
        else:
            count = request_count_violation(sum(row["totalRequests"] for row in rows), seen, uncertain)
            shared += [count] if count else []
        for row, observation in zip(rows, observations):
            own = (mesh_oracles.call_violations(observation["calls"]) if sidecar is not None
                   else user_violations(scenario, client.get("share", "user"), observation)
                   + pattern_violations(scenario, client.get("share", "user"), observation))
            found = own + shared
            row["oracleViolations"] = as_records(found)

    def _row(self, scenario, round_number, client, counters, observation, started, ended, sidecar=None) -> dict:
        fault = scenario["fault"]
        seen = counters.get("downstream_rq_total", 0)
        injected = counters.get("fault.aborts_injected" if fault["kind"] == "abort" else "fault.delays_injected", 0)
        return {
            "userId": observation["vu"], "startTime": started, "endTime": ended,
            "users": scenario["users"], "round": round_number,
            "lib": scenario["library"], "strategy": scenario["pattern"],
            "faultPercentage": fault["rate"], "faultType": fault["kind"],
            "faultStatus": fault.get("status"), "faultDuration": fault.get("duration_ms"),
            **vu_metrics(observation, sidecar=sidecar is not None, patterns=runs_measured_patterns(scenario["pattern"])),
            "config": scenario["config"],
            "scenarioId": scenario["id"], "scenarioIndex": scenario["index"],
            "client": scenario["client"], "share": client.get("share", "user"),
            "libraryVersion": observation.get("version"),
            "stoppedBy": observation.get("stopped_by"),
            "faultRateApplied": round(100 * injected / seen, 4) if seen else None,
            "proxyRequests": seen,
            "warmup": False,
            **(sidecar or {}),
        }


def _increase(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, int] | None:
    """A sidecar's counters over one round; None for a client without a sidecar."""
    if before is None or after is None:
        return None
    return {name: after[name] - before.get(name, 0) for name in after}
