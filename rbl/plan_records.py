"""Typed views of a plan's records, decided once: the kind of round a scenario runs (closed or open
loop), the kind of client it calls through (a library, or a mesh sidecar), and a scenario's `load`
record (compiler/workload.py writes it as JSON) read by attribute.

Every "is this round open loop?" and "is this a mesh client?" in rbl asks here, so a new kind of
round or client is added in this one module, not tested for by probing dicts all over the code.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Mapping

LOAD_KEY = "load"              # a scenario's load record; in a plan's header, the load's settings
MESH_SERVICE = "mesh"          # the catalogue's `client` of a library enforced by a sidecar (Istio)
# The calls a client service may hold at once under open-loop load: the load generator's
# connections at most (runner/load_generator.py), whichever backend starts the client.
OPEN_LOOP_CONNECTIONS = 2048


# What one open-loop round may ask for, checked where each is decided: by the compiler (located
# errors, compiler/checks/load.py), on a plan file (store/plan_file.py) and by the runner once the
# capacity a share is of is known; the load generator's schedule, its CSV and the round's Parquet
# rows never hold more than MAX_ROUND_REQUESTS.
MAX_ROUND_REQUESTS = 2_000_000   # highest rate x duration (20 s at 100,000 req/s): a list, a CSV, a table in memory
MAX_LOAD_PERIODS = 100_000       # duration / period: a profile's spikes or steps
MAX_LOAD_WINDOWS = 100_000       # duration / window: the windows of p95UnderSloShare
MAX_ROUND_S = 86_400             # load.duration's own bound: no request is scheduled later


def load_size_problem(record: Mapping[str, Any], capacity_rps: float | None = None) -> str | None:
    """Why an open-loop `load` record asks for more than a round may (the bounds above), or None.
    A rate given as a share is checked when a capacity is known: the record's, else `capacity_rps`."""
    duration = record["duration_s"]
    if record.get("kind") == "users":
        return _population_problem(record)
    profile = record["profile"]
    if (profile["kind"] == "trace") != ("points" in profile):
        return "profile: a trace profile has points, and only a trace profile"
    if "points" in profile:
        times = [t for t, _ in profile["points"]]
        if any(later <= earlier for earlier, later in zip(times, times[1:])):
            return "profile.points: the trace's times must increase"
        if not any(factor > 0 for _, factor in profile["points"]):
            return "profile.points: every factor of the trace is 0"
    if duration / record["window_s"] > MAX_LOAD_WINDOWS:
        return (f"duration {duration:g} s over window_s {record['window_s']:g} s is more than "
                f"{MAX_LOAD_WINDOWS:,} windows")
    period = profile.get("period_s")
    if period is not None and duration / period > MAX_LOAD_PERIODS:
        return f"duration {duration:g} s over period_s {period:g} s is more than {MAX_LOAD_PERIODS:,} periods"
    capacity = record.get("capacity_rps", capacity_rps)
    rates = [record["rate"], *([profile["peak"]] if "peak" in profile else [])]
    highest = [r["rps"] if "rps" in r else None if capacity is None else r["share"] * capacity for r in rates]
    if "points" in profile and None not in highest:      # a trace: its factors multiply the rate
        highest = [rate * max(1, max(factor for _, factor in profile["points"])) for rate in highest]
    if None not in highest and max(highest) * duration > MAX_ROUND_REQUESTS:
        return (f"{_rate(max(highest))} req/s for {duration:g} s is {max(highest) * duration:,.0f} requests in a round, "
                f"more than {MAX_ROUND_REQUESTS:,}")
    return None


def _population_problem(record: Mapping[str, Any]) -> str | None:
    duration, think_s = record["duration_s"], record["think_ms"] / 1000
    points = (record.get("profile") or {}).get("points", ())
    if any(later <= earlier for (earlier, _), (later, _) in zip(points, points[1:])):
        return "profile.points: the trace's times must increase"
    if duration / record["window_s"] > MAX_LOAD_WINDOWS:
        return (f"duration {duration:g} s over window_s {record['window_s']:g} s is more than "
                f"{MAX_LOAD_WINDOWS:,} windows")
    if think_s > 0 and record["users"] * duration / think_s > MAX_ROUND_REQUESTS:
        return (f"{record['users']} users thinking {record['think_ms']:g} ms for {duration:g} s would send about "
                f"{record['users'] * duration / think_s:,.0f} requests in a round, more than {MAX_ROUND_REQUESTS:,}")
    return None


def _rate(rps: float) -> str:
    return f"{rps:,.0f}" if rps >= 100 else f"{rps:g}"


class RoundKind(Enum):
    CLOSED_LOOP = "closed"     # virtual users, each calling until its successes (the paper's rounds)
    OPEN_LOOP = "open"         # requests sent on a schedule whatever the answers (overload)


class ClientKind(Enum):
    LIBRARY = "library"        # a client service calls the target through a resilience library
    MESH = "mesh"              # a plain HTTP client behind a sidecar Envoy that holds the policies


CONSTANT_PROFILE: Mapping[str, Any] = {"kind": "constant"}


@dataclass(frozen=True)
class Population:
    """`load = users`: HTTPMon's closed population, each user thinking an exponential time (of mean
    think_ms) between an answer and its next request."""

    users: int
    think_ms: float
    trace: tuple[tuple[float, float], ...] = ()   # (seconds, factor): round(users x factor) users active


@dataclass(frozen=True)
class Load:
    """An open-loop scenario's load (compiler/workload.py's record): when requests are sent, how
    long, and how its answers are judged."""

    rate: Mapping[str, float] | None     # {"rps": N} or {"share": S} of the target's capacity; None: users
    arrivals: str | None                 # "constant" or "poisson"; None: users
    profile: Mapping[str, Any]           # {"kind": "constant" | "spikes" | "steps" | "ramp" | "trace", ...}
    duration_s: float
    warmup_s: float
    timeout_s: float
    window_s: float
    slo_ms: float
    capacity_rps: float | None           # `load.capacity`: the target's capacity, given instead of calibrated
    record: Mapping[str, Any]            # the plan's record as written (stored in the round's row)
    population: "Population | None" = None   # `load = users`: the users instead of a rate

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "Load":
        points = tuple((float(t), float(f)) for t, f in (record.get("profile") or {}).get("points", ()))
        population = Population(int(record["users"]), float(record["think_ms"]), points) \
            if record.get("kind") == "users" else None
        return cls(rate=record.get("rate"), arrivals=record.get("arrivals"),
                   profile=record.get("profile", CONSTANT_PROFILE),
                   duration_s=float(record["duration_s"]), warmup_s=float(record["warmup_s"]),
                   timeout_s=float(record["timeout_s"]), window_s=float(record["window_s"]),
                   slo_ms=float(record["slo_ms"]), capacity_rps=record.get("capacity_rps"), record=record,
                   population=population)

    @property
    def measured_s(self) -> float:
        """The part of the round its metrics cover: after the warm-up."""
        return self.duration_s - self.warmup_s

    def rates_given_as_share(self) -> bool:
        """Whether a rate (the base, or a profile's peak) needs the target's capacity."""
        return self.rate is not None and ("share" in self.rate or "share" in (self.profile.get("peak") or {}))


def load_of(scenario: Mapping[str, Any]) -> Load | None:
    """A scenario's load, None for a closed-loop one. (An open-loop plan's header holds the load's
    settings as the spec gave them, not a load: ask round_kind of it.)"""
    raw = scenario.get(LOAD_KEY)
    return Load.from_record(raw) if isinstance(raw, Mapping) else None


def round_kind(record: Mapping[str, Any]) -> RoundKind:
    """The kind of round a scenario runs; for a plan header, the kind of its rounds (a plan's
    scenarios are all of one kind: store/plan_file.py checks it)."""
    return RoundKind.OPEN_LOOP if LOAD_KEY in record else RoundKind.CLOSED_LOOP


def target_of(header: Mapping[str, Any], scenario: Mapping[str, Any]) -> dict:
    """The target a scenario runs on: the plan's (path and resources), with the scenario's own point
    in place of the plan's first where the target varies (rbl/compiler/target_dimension.py)."""
    target = {key: value for key, value in header["target"].items() if key != "axes"}
    point = scenario.get("target")
    return {**target, **point} if isinstance(point, Mapping) else target


def target_varies(header: Mapping[str, Any]) -> bool:
    return "axes" in header.get("target", {})


def is_open_loop(record: Mapping[str, Any]) -> bool:
    return round_kind(record) is RoundKind.OPEN_LOOP


def client_kind(client: Mapping[str, Any]) -> ClientKind:
    """The kind of a plan's client (an entry of the header's `clients`)."""
    return ClientKind.MESH if client.get("service") == MESH_SERVICE else ClientKind.LIBRARY
