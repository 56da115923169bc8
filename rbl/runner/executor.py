"""Executes a plan: every scenario x round in the run's order (run_order.py: Algorithm 1's by
default), one at a time (docs/running.md). A scenario's first `warmup` rounds are run and stored
like the others, flagged `warmup: true`.

Each round runs in the round's frame (round.py) with the driver of its kind: virtual users
(closed_loop.py) or the load generator on a schedule (open_loop.py). A round whose client service
died, hung or refused the job is recorded as failed with the reason; the service is restarted and
the run goes on. A round that finds the target or the proxy gone or replaced stops the run
(ServicesLost), since every later round would measure something else.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..libraries.composition import pattern_names
from ..libraries.istio import CONTROLLED
from ..libraries.self_limiting import self_limiting_pattern
from ..plan_records import RoundKind, round_kind
from ..store.hops import append_hops
from ..store.results import RunDirectory
from ..store.run_order import RunOrder, ordered_runs, rounds_per_scenario
from .backend import RoundFailed, Services
from .closed_loop import ClosedLoopDriver
from .liveness import ServicesLost
from .round import Driver, Observer, RoundFrame, RoundTiming

DEFAULT_ROUND_TIMEOUT = 300.0


@dataclass(frozen=True)
class ExecutionSettings:
    """How the rounds run, decided before the first one."""

    round_timeout: float = DEFAULT_ROUND_TIMEOUT
    order: RunOrder = RunOrder()
    loadgen: Path | None = None            # open-loop plans: the load generator the backend prepared
    capacity_rps: float | None = None      # ... and the target's capacity, for rates given as shares
    observers: tuple[Observer, ...] = ()   # ticked during every round (round.py)


@dataclass
class RunOutcome:
    rounds_run: int = 0
    rounds_skipped: int = 0
    failures: list[dict] = field(default_factory=list)
    timings: list[RoundTiming] = field(default_factory=list)
    violations: dict[str, int] = field(default_factory=dict)     # oracle -> rows of this session breaking it
    stopped: str = ""                    # a plan run until resolved: why it stopped (until_resolved.py)
    more_rounds: int = 0                 # ... and the rounds it added after the first ones


class Executor:
    def __init__(self, run: RunDirectory, services: Services, header: dict, progress,
                 settings: ExecutionSettings = ExecutionSettings()):
        self.run = run
        self.services = services
        self.header = header
        self.progress = progress
        self.settings = settings
        observers = settings.observers
        if has_controllers(header):          # a controller's client: its decisions every interval
            from .controllers import ControllerObserver    # pyarrow: open-loop runs only
            observers = (*observers, ControllerObserver(run.path))
        if has_self_set_limits(header):      # an adaptive limiter's own limit, every load window
            from .controllers import SelfSetLimitObserver
            observers = (*observers, SelfSetLimitObserver(run.path))
        self.frame = RoundFrame(services, header, uuid.uuid4().hex[:8], observers)
        self.outcome = RunOutcome()              # filled as rounds finish, so an interrupt keeps it
        most_users = max((s["users"] for s in run.scenarios()), default=1)
        self.pool = ThreadPoolExecutor(max_workers=most_users, thread_name_prefix="vu")
        rounds_in_run = header["size"] * rounds_per_scenario(header)
        self.drivers: dict[RoundKind, Driver] = {
            RoundKind.CLOSED_LOOP: ClosedLoopDriver(self.pool, settings.round_timeout, rounds_in_run)}
        if settings.loadgen is not None:
            # imported here: pyarrow and numpy take a third of a second, which closed-loop runs need not pay
            from .open_loop import OpenLoopDriver
            self.drivers[RoundKind.OPEN_LOOP] = OpenLoopDriver(settings.loadgen, settings.capacity_rps, run.path,
                                                               rounds_in_run, self._library_version)
        self._versions: dict[str, str | None] = {}

    def execute(self) -> RunOutcome:
        outcome = self.outcome
        try:
            for scenario, round_number in ordered_runs(self.settings.order, self.run.scenarios,
                                                       rounds_per_scenario(self.header)):
                if (scenario["id"], round_number) in self.run.completed:
                    outcome.rounds_skipped += 1
                    self.progress.advance(scenario, round_number, skipped=True)
                    continue
                self.progress.round_started(scenario, round_number)
                self._attempt(scenario, round_number, outcome)
                self.progress.advance(scenario, round_number)
            if "until_resolved" in self.header:
                self._until_resolved(outcome)
        finally:
            self.pool.shutdown(wait=False, cancel_futures=True)
        return outcome

    def _until_resolved(self, outcome: RunOutcome) -> None:
        """More rounds where the answer still needs them, one look after each batch."""
        from .until_resolved import step
        while True:
            decided = step(self.run, self.header)
            if not decided.runs:
                outcome.stopped = decided.reason
                self.progress.note(f"until resolved: stopped, {decided.reason}")
                return
            self.progress.extend(len(decided.runs))
            for scenario, round_number in decided.runs:
                self.progress.round_started(scenario, round_number)
                self._attempt(scenario, round_number, outcome)
                self.progress.advance(scenario, round_number)
                outcome.more_rounds += 1

    def run_round(self, scenario: dict, round_number: int) -> tuple[list[dict], RoundTiming, dict | None]:
        kind = round_kind(scenario)
        if kind not in self.drivers:
            raise RoundFailed("an open-loop round needs the load generator, which the backend did not prepare")
        return self.frame.run(scenario, round_number, self.drivers[kind])

    def _attempt(self, scenario: dict, round_number: int, outcome: RunOutcome) -> None:
        try:
            rows, timing, hops = self.run_round(scenario, round_number)
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
        if hops is not None:                     # before the rows: a round is complete once its rows are in
            append_hops(self.run.path, hops)
        self.run.append_round(rows)
        outcome.rounds_run += 1
        for row in [*rows, *([hops] if hops else [])]:
            for oracle in {v["oracle"] for v in row["oracleViolations"]}:
                outcome.violations[oracle] = outcome.violations.get(oracle, 0) + 1
        outcome.timings.append(timing)

    def _record_failure(self, scenario: dict, round_number: int, reason: str, outcome: RunOutcome) -> None:
        record = {"scenarioId": scenario["id"], "scenarioIndex": scenario["index"], "round": round_number,
                  "client": scenario["client"], "reason": reason, "at": _now()}
        outcome.failures.append(record)
        self.run.record_failure(record)
        self.progress.note(f"scenario {scenario['index'] + 1} round {round_number} failed: {reason}")

    def _recover(self, library: str) -> None:
        """Restart the client service so a dead or hung one does not fail every later round."""
        self.progress.note(f"restarting the {library} client service")
        self.services.restart_client(library)

    def _library_version(self, library: str) -> str | None:
        """The version a client service reports (open-loop rows have no virtual user to say it)."""
        if library not in self._versions:
            self._versions[library] = self.services.client_versions().get(library)
        return self._versions[library]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def has_self_set_limits(header: dict) -> bool:
    """Whether a client of the plan has a limit that moves by itself (rbl/libraries/self_limiting.py),
    in an open-loop plan."""
    return header.get("load", {}).get("kind") == "open" and any(
        self_limiting_pattern(client["library"], client["pattern"]) for client in header["clients"])


def has_controllers(header: dict) -> bool:
    """Whether a client of the plan is a controller (rbl/runner/controllers.py)."""
    return any(name in CONTROLLED for client in header["clients"] for name in pattern_names(client["pattern"]))
