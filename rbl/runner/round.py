"""The frame of every round, closed or open loop: check the services, set the fault, configure the
client, read the counters, let a driver drive (ticking observers while it does), read the counters
again, check that the services still run, and have the driver turn what it saw into rows. On a
topology, the frame also keeps what the round did along the chain (hops.py).

Drivers (closed_loop.py, open_loop.py) only drive and make rows from what they drove; they never
call back into the frame. A driver's `start` returns at once with a handle the frame waits on in
short steps, so observers run *during* a round: every `interval_s` the frame ticks each one with
the round's live state (elapsed time, the proxy's and the sidecar's counters so far). That is the
hook an adaptive controller needs to retune a policy while the load runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Protocol

from ..plan_records import ClientKind, Load, client_kind, load_of, target_of
from ..topology import topology_from_record
from .backend import RoundFailed, Services
from .hops import PEAKS, HopSampler, chain_columns, highest, hop_record, increase
from .liveness import BUSY, ServicesLost, probe_target

DRAIN_POLL_S = 0.5
BUSY_GRACE_S = 60.0      # how long a round's start waits for a target still busy (503, or no answer in time)


@dataclass(frozen=True)
class RoundSetup:
    """One round as the frame prepared it for its driver."""

    scenario: dict
    round_number: int
    client: dict                        # the plan header's record of the scenario's client
    client_kind: ClientKind
    load: Load | None                   # an open-loop round's load; None for virtual users
    target_url: str                     # the target's path through the proxy (or the client's sidecar)
    client_address: tuple[str, int]     # where the client service takes jobs and calls
    entry_url: str                      # where open-loop load enters a mesh client's sidecar from here
    instance: str                       # the key of the round's shared pattern instances
    warmup: bool                        # a warm-up round: stored, flagged, left out of the report

    @property
    def library(self) -> str:
        return self.scenario["library"]


@dataclass(frozen=True)
class Counters:
    """The proxy's counters over the round, and a mesh client's sidecar's (None for a library's)."""

    proxy: dict[str, int]
    sidecar: dict[str, int] | None


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class RoundMoment:
    """What an observer sees when the frame ticks it during a round, and what it may do to it."""

    setup: RoundSetup
    elapsed_s: float
    counters: Counters                  # since the round's start, read at this tick
    # the round's requests answered so far (an open-loop round's table, store/requests.py's columns)
    requests: Callable[[], Any] = _nothing
    # the requests the client's sidecar has in flight now (None for a library client)
    queue: Callable[[], int | None] = _nothing
    # put another configuration of the round's client in force: (pattern, config) -> seconds it took
    retune: Callable[[str, dict], float] | None = None
    # the limit a pattern of the round's client set itself, now (rbl/libraries/self_limiting.py; None: none)
    limit: Callable[[], int | None] = _nothing


class Observer(Protocol):
    """Ticked by the frame every `interval_s` while a round's driver drives. An observer may also
    have `round_starts(setup)`, which the frame calls before each round's driving (then it may set
    its interval for that round; None: not ticked in it)."""

    interval_s: float | None

    def tick(self, moment: RoundMoment) -> None: ...


class Driving(Protocol):
    """A round being driven: the frame waits on it in steps and takes its result once done."""

    def wait(self, timeout_s: float) -> bool: ...       # True once the driving is over
    def result(self) -> Any: ...                        # what was driven; raises RoundFailed
    def stop(self) -> None: ...                         # end it early (an interrupt); no-op once over


class Driver(Protocol):
    def start(self, setup: RoundSetup) -> Driving: ...

    def rows(self, setup: RoundSetup, driven: Any, counters: Counters, times: tuple[str, str]) -> list[dict]:
        """The round's rows of results.jsonl, with their oracle violations."""

    def busy_s(self, setup: RoundSetup, driven: Any) -> float:
        """How long the round's own work took (the rest of its wall time is the runner's)."""

    def settle_s(self, setup: RoundSetup) -> float | None:
        """After the round, how long the target may take to work off its queue (None: no wait)."""


@dataclass
class RoundTiming:
    """Where a round's wall time went: the driven work vs the runner's overhead."""

    wall_s: float
    longest_vu_s: float

    @property
    def overhead_s(self) -> float:
        return self.wall_s - self.longest_vu_s


class RoundFrame:
    """Runs one round of a scenario with the driver of its kind, on the run's services."""

    def __init__(self, services: Services, header: dict, session: str, observers: tuple[Observer, ...] = ()):
        self.services = services
        self.header = header
        self.session = session
        self.observers = observers
        self.clients = {c["label"]: c for c in header["clients"]}
        self.topology = topology_from_record(header["topology"]) if "topology" in header else None

    def run(self, scenario: dict, round_number: int, driver: Driver) -> tuple[list[dict], RoundTiming, dict | None]:
        """The round's rows, where its time went, and (for a topology) its record along the chain."""
        begin = time.perf_counter()
        setup = self._prepare(scenario, round_number)
        fault = self.services.fault
        sidecar_before = self.services.client_counters(setup.library)
        hops_before = self.services.hop_counters()
        sampler = HopSampler(self.services.hop_counters) if hops_before is not None else None
        fault.reset_counters()
        started = _now()
        driving = driver.start(setup)
        if sampler is not None:
            sampler.start(hops_before)
        try:
            driven = self._drive(setup, driving, sidecar_before, begin)
        finally:
            driving.stop()
            series = sampler.stop() if sampler is not None else None
            peaks = sampler.peaks if sampler is not None else None
        ended = _now()
        counters = Counters(fault.counters(), _increase(sidecar_before, self.services.client_counters(setup.library)))
        # a service that died or was replaced during the round: its rows measured something else
        self.check_services(setup.library, through_proxy=False)
        settle = driver.settle_s(setup)
        if settle is not None:
            self._drain(settle)
        hops = None
        if self.topology is not None:            # after the drain: the work queued in the round is done
            after = self.services.hop_counters()
            hops = hop_record(self.topology, scenario, setup.client, round_number, increase(hops_before, after),
                              series, highest(peaks or {}, after.get(PEAKS) or {}))
        rows = driver.rows(setup, driven, counters, (started, ended))
        if hops is not None:                     # the round along the chain, in each of its rows
            rows = [{**row, **chain_columns(hops)} for row in rows]
        return rows, RoundTiming(time.perf_counter() - begin, driver.busy_s(setup, driven)), hops

    def _prepare(self, scenario: dict, round_number: int) -> RoundSetup:
        """Services checked, the scenario's fault set and confirmed, the client configured."""
        library = scenario["library"]
        target = target_of(self.header, scenario)
        if "target" in scenario:                 # the target varies: this scenario's budget before the checks
            self.services.use_target(target)
        self.check_services(library, through_proxy=True)
        self.services.fault.apply(scenario["fault"])
        # a mesh client's sidecar takes the configuration's policies (nothing for a library client)
        self.services.configure_client(library, scenario["pattern"], scenario["config"])
        client = self.clients[scenario["client"]]
        return RoundSetup(scenario, round_number, client, client_kind(client), load_of(scenario),
                          self.services.target_url(target["path"], library),
                          self.services.client_address(library),
                          self._entry_url(client, target["path"], library),
                          f"{self.session}/{scenario['id']}/{round_number}",
                          round_number <= self.header.get("warmup", 0))

    def _entry_url(self, client: dict, path: str, library: str) -> str:
        """Only a mesh client's load enters through its sidecar; a library client takes POST /call."""
        return self.services.entry_url(path, library) if client_kind(client) is ClientKind.MESH else ""

    def _drive(self, setup: RoundSetup, driving: Driving, sidecar_before, begin: float):
        """Wait for the driving to end, ticking each observer on its own interval meanwhile."""
        for observer in self.observers:
            starts = getattr(observer, "round_starts", None)
            if starts is not None:
                starts(setup)
        observers = [observer for observer in self.observers if observer.interval_s is not None]
        due = {id(observer): begin + observer.interval_s for observer in observers}
        while True:
            step = min(due.values(), default=time.perf_counter() + 3600.0) - time.perf_counter()
            if driving.wait(max(0.0, step)):
                return driving.result()
            now = time.perf_counter()
            ticked = [observer for observer in observers if due[id(observer)] <= now]
            if ticked:
                counters = Counters(self.services.fault.counters(),
                                    _increase(sidecar_before, self.services.client_counters(setup.library)))
                moment = RoundMoment(setup, now - begin, counters, getattr(driving, "requests_so_far", _nothing),
                                     lambda: self.services.client_queue(setup.library),
                                     lambda pattern, config: self._retune(setup.library, pattern, config),
                                     lambda: self.services.client_limit(setup.library, setup.instance))
                for observer in ticked:
                    observer.tick(moment)
                    due[id(observer)] = now + observer.interval_s

    def _retune(self, library: str, pattern: str, config: dict) -> float:
        began = time.perf_counter()
        self.services.configure_client(library, pattern, config)
        return time.perf_counter() - began

    def check_services(self, library: str, through_proxy: bool) -> None:
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
            deadline = time.monotonic() + BUSY_GRACE_S
            # a target still working off an overloaded round's queue: only a 503 that lasts is a lost target
            while problem is not None and problem.startswith(BUSY) and time.monotonic() < deadline:
                time.sleep(DRAIN_POLL_S)
                problem = probe_target(*probe)
            if problem:
                raise ServicesLost(problem)

    def _drain(self, seconds: float) -> None:
        """Wait until the target has worked off what queued at it (a request through the proxy is
        answered by it again), so the next round starts on an idle target; the next round's own
        check says if it never does."""
        probe = self.services.target_probe()
        if probe is None:
            return
        self.services.fault.clear()
        deadline = time.monotonic() + seconds
        while probe_target(*probe) is not None and time.monotonic() < deadline:
            time.sleep(DRAIN_POLL_S)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _increase(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, int] | None:
    """A sidecar's counters over one round; None for a client without a sidecar."""
    if before is None or after is None:
        return None
    return {name: after[name] - before.get(name, 0) for name in after}
