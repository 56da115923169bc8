"""The workload of a space: closed loop (the seed paper's virtual users, the default), open loop
(requests sent at a rate for a duration, whatever the answers; the service-mesh papers' load), or a
population of users (HTTPMon's, as the service-mesh papers also ran: each user thinks an exponential
time, sends, waits for the answer, thinks again, for a duration). The last two are sent by the load
generator, request by request, and measured alike.

Open-loop settings are `load.*` space settings; every one may be an axis, so the load is one more
dimension L of the space: Size(S) = |F| x |U| x |L| x sum |CONF_i| (|U| is 1 in open loop). Each
point of L becomes a scenario's `load` record (load_record), the plan's and the runner's contract:

  {"kind": "users", "users": 50, "think_ms": 1000, "duration_s": 20, "warmup_s": 5, "timeout_s": 10,
   "window_s": 5, "slo_ms": 100}
  {"kind": "open", "rate": {"share": 1.2} | {"rps": 200}, "arrivals": "constant" | "poisson",
   "duration_s": 20, "warmup_s": 5, "timeout_s": 10, "window_s": 5, "slo_ms": 100,
   "profile": {"kind": "constant"}
            | {"kind": "spikes", "peak": RATE, "period_s": 20, "length_s": 5}
            | {"kind": "steps", "peak": RATE, "period_s": 10}
            | {"kind": "ramp", "peak": RATE}
            | {"kind": "trace", "source": "FILE.csv", "points": [[SECONDS, FACTOR], ...]}}

A rate as a share is of the target's calibrated capacity (`rbl calibrate`), resolved when the
run starts (or fixed by `load.capacity`). A trace's factors multiply the rate (load_trace.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Iterator

from .axes import Axis, iter_product
from .load_trace import Trace
from ..lang.types import Bound, ParamType
from ..lang.units import DURATION_UNITS, Value, native_number

LOAD_KINDS = ("closed", "open", "users")
MAX_POPULATION = 2048                 # the connections the backends let a client hold (OPEN_LOOP_CONNECTIONS)
ARRIVALS = ("constant", "poisson")
PROFILES = ("constant", "spikes", "steps", "ramp", "trace")
MAX_RPS = 1_000_000
MAX_SHARE = Fraction(10_000)          # 100x the capacity: beyond that a share is a typo


def _positive(base: str, at_most: Fraction | None = None) -> ParamType:
    bounds = [Bound(">", Value(base, Fraction(0)))]
    if at_most is not None:
        bounds.append(Bound("<=", Value(base, at_most)))
    return ParamType(base, bounds=tuple(bounds))


_SECOND = Fraction(DURATION_UNITS["s"])
_DURATION = _positive("duration", 24 * 3600 * _SECOND)
_SHARE = _positive("percent", MAX_SHARE)
_RPS = ParamType("int", bounds=(Bound(">=", Value("int", 1)), Bound("<=", Value("int", MAX_RPS))))


@dataclass(frozen=True)
class LoadSetting:
    type: ParamType
    default: Value | None
    doc: str


# Each may be an axis. Defaults apply only to an open-loop space.
LOAD_SETTINGS: dict[str, LoadSetting] = {
    "load.rate": LoadSetting(_SHARE, None, "arrival rate as a share of the target's calibrated capacity"),
    "load.rps": LoadSetting(_RPS, None, "arrival rate in requests per second (instead of load.rate)"),
    "load.arrivals": LoadSetting(ParamType("enum", ARRIVALS), Value("enum", "constant"),
                                 "constant (evenly spaced) or poisson (exponential gaps, seeded) arrivals"),
    "load.duration": LoadSetting(_DURATION, Value("duration", 30 * _SECOND), "how long a round sends requests"),
    "load.warmup": LoadSetting(ParamType("duration", bounds=(Bound(">=", Value("duration", Fraction(0))),)),
                               Value("duration", Fraction(0)),
                               "first part of each round, sent but left out of the metrics"),
    "load.profile": LoadSetting(ParamType("enum", PROFILES), Value("enum", "constant"),
                                "constant, spikes (to load.peak for load.length every load.period), steps "
                                "(evenly from the rate to load.peak, each load.period long), ramp (linear) or "
                                "trace (the rate times load.trace's factors over time)"),
    "load.trace": LoadSetting(ParamType("string"), None, "the trace profile's CSV file (`seconds,factor` per line, "
                                                          "relative to the spec): factors of the rate over time"),
    "load.peak": LoadSetting(_SHARE, None, "the profile's highest rate, as a share of capacity"),
    "load.peak_rps": LoadSetting(_RPS, None, "the profile's highest rate in requests per second"),
    "load.period": LoadSetting(_DURATION, None, "spikes: time from one spike's start to the next; steps: step length"),
    "load.length": LoadSetting(_DURATION, None, "spikes: how long each spike lasts"),
    "load.timeout": LoadSetting(_DURATION, Value("duration", 10 * _SECOND),
                                "a request not answered within it counts as timed out"),
    "load.window": LoadSetting(_DURATION, Value("duration", 5 * _SECOND),
                               "window length for the share of time the p95 met load.slo"),
    "load.slo": LoadSetting(_DURATION, Value("duration", Fraction(100 * DURATION_UNITS["ms"])),
                            "the response-time target of the p95 per window"),
    "load.capacity": LoadSetting(_RPS, None, "the target's capacity in requests per second, instead of "
                                             "the calibrated one (for load.rate shares)"),
    "load.users": LoadSetting(ParamType("int", bounds=(Bound(">=", Value("int", 1)),
                                                       Bound("<=", Value("int", MAX_POPULATION)))), None,
                              "load = users: how many users send, each after its think time"),
    "load.think": LoadSetting(ParamType("duration", bounds=(Bound(">=", Value("duration", Fraction(0))),
                                                            Bound("<=", Value("duration", 3600 * _SECOND)))),
                              Value("duration", _SECOND),
                              "load = users: the mean of each user's exponential think time"),
}
# which load settings each kind of load takes (the rest are errors there)
USERS_ONLY = ("load.users", "load.think")
OPEN_ONLY = tuple(key for key in LOAD_SETTINGS if key not in USERS_ONLY and key not in (
    "load.duration", "load.warmup", "load.timeout", "load.window", "load.slo", "load.profile", "load.trace"))
USERS_PROFILES = ("constant", "trace")     # a population follows a trace: round(users x factor) users active


@dataclass(frozen=True)
class Workload:
    """The load dimension of a space the load generator sends (open loop, or a population of users):
    each load setting's values (one, or an axis)."""

    settings: tuple[tuple[str, Axis], ...]     # (key, values) in LOAD_SETTINGS order, present ones only
    traces: tuple[tuple[str, Trace], ...] = ()  # each load.trace value (its path as written) and its points
    kind: str = "open"                         # "open" (a rate) or "users" (a population that thinks)

    @property
    def size(self) -> int:
        size = 1
        for _, values in self.settings:
            size *= len(values)
        return size

    @property
    def axes(self) -> tuple[str, ...]:
        return tuple(key for key, values in self.settings if len(values) > 1)

    def records(self) -> Iterator[dict]:
        """Every point of the load dimension as a scenario's `load` record, first setting slowest."""
        keys = [key for key, _ in self.settings]
        traces = dict(self.traces)
        for combo in iter_product([values for _, values in self.settings]):
            values = dict(zip(keys, combo))
            yield users_record(values, traces) if self.kind == "users" else load_record(values, traces)


def _seconds(value: Value) -> int | float:
    return native_number(value.v / _SECOND)


def _rate(values: dict, share_key: str, rps_key: str) -> dict | None:
    if share_key in values:
        return {"share": native_number(values[share_key].v / 100)}
    if rps_key in values:
        return {"rps": values[rps_key].v}
    return None


def load_record(values: dict[str, Value], traces: dict[str, Trace] | None = None) -> dict:
    """One point of the load dimension (setting -> value) as the plan's `load` record (`traces`: the
    points of each load.trace file, read by the checks)."""
    profile = {"kind": values["load.profile"].v}
    if profile["kind"] == "trace":
        trace = (traces or {})[values["load.trace"].v]
        profile.update(source=trace.source, points=trace.record())
    elif profile["kind"] != "constant":
        profile["peak"] = _rate(values, "load.peak", "load.peak_rps")
        if profile["kind"] in ("spikes", "steps"):
            profile["period_s"] = _seconds(values["load.period"])
        if profile["kind"] == "spikes":
            profile["length_s"] = _seconds(values["load.length"])
    record = {"kind": "open", "rate": _rate(values, "load.rate", "load.rps"),
              "arrivals": values["load.arrivals"].v, "duration_s": _seconds(values["load.duration"]),
              "warmup_s": _seconds(values["load.warmup"]), "profile": profile,
              "timeout_s": _seconds(values["load.timeout"]), "window_s": _seconds(values["load.window"]),
              "slo_ms": native_number(values["load.slo"].v / DURATION_UNITS["ms"])}
    if "load.capacity" in values:
        record["capacity_rps"] = values["load.capacity"].v
    return record


def _common(values: dict[str, Value]) -> dict:
    return {"duration_s": _seconds(values["load.duration"]), "warmup_s": _seconds(values["load.warmup"]),
            "timeout_s": _seconds(values["load.timeout"]), "window_s": _seconds(values["load.window"]),
            "slo_ms": native_number(values["load.slo"].v / DURATION_UNITS["ms"])}


def users_record(values: dict[str, Value], traces: dict[str, Trace] | None = None) -> dict:
    """One point of a population's load dimension as the plan's `load` record; with a trace, its
    points say what share of the users is active when."""
    record = {"kind": "users", "users": values["load.users"].v,
              "think_ms": native_number(values["load.think"].v / DURATION_UNITS["ms"]), **_common(values)}
    if values["load.profile"].v == "trace":
        trace = (traces or {})[values["load.trace"].v]
        record["profile"] = {"kind": "trace", "source": trace.source, "points": trace.record()}
    return record


def describe_load(record: dict) -> str:
    """`120% of capacity, spikes to 140% (5 s every 20 s), poisson, 30 s`: a load in one phrase."""
    if record.get("kind") == "users":
        profile = record.get("profile") or {}
        trace = f", active by trace {profile['source']}" if profile.get("kind") == "trace" else ""
        return f"{record['users']} users thinking {record['think_ms']:g} ms{trace}, {record['duration_s']:g} s"

    def rate(r: dict) -> str:
        return f"{r['share'] * 100:g}% of capacity" if "share" in r else f"{r['rps']} req/s"
    profile = record["profile"]
    text = rate(record["rate"])
    if profile["kind"] == "spikes":
        text += f", spikes to {rate(profile['peak'])} ({profile['length_s']:g} s every {profile['period_s']:g} s)"
    elif profile["kind"] == "steps":
        text += f", steps to {rate(profile['peak'])} ({profile['period_s']:g} s each)"
    elif profile["kind"] == "ramp":
        text += f", ramp to {rate(profile['peak'])}"
    elif profile["kind"] == "trace":
        highest = max(factor for _, factor in profile["points"])
        text += f", trace {profile['source']} ({len(profile['points'])} points, up to {highest:g}x)"
    return f"{text}, {record['arrivals']}, {record['duration_s']:g} s"
