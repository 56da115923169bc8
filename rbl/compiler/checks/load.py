"""The workload's settings together (rbl/compiler/workload.py): what an open-loop space needs, what
only one kind of load takes, and the profile's parameters, each error at the setting it is about."""

from __future__ import annotations

from ...lang import ast
from ...plan_records import MAX_LOAD_PERIODS, MAX_LOAD_WINDOWS, MAX_ROUND_REQUESTS
from ..axes import single
from ...lang.units import DURATION_UNITS, Value
from ..load_trace import Trace, read_trace
from ..workload import LOAD_SETTINGS, OPEN_ONLY, USERS_ONLY, USERS_PROFILES, Workload
from .context import CheckContext

CLOSED_ONLY = ("users", "successes", "max_requests")
PROFILE_NEEDS = {"constant": (), "ramp": ("peak",), "steps": ("peak", "load.period"),
                 "spikes": ("peak", "load.period", "load.length"), "trace": ("load.trace",)}
EXAMPLE_VALUES = {"load.period": "20s", "load.length": "5s", "load.trace": '"traces/day.csv"'}


def check_load(ctx: CheckContext, seen: dict[str, ast.Bind | ast.Axis], space_head) -> bool:
    """Check the load settings; for a space whose load generator sends (`load = open` or `users`),
    set ctx.workload and return True."""
    kind = ctx.settings.get("load")
    load_keys = [key for key in seen if key in LOAD_SETTINGS]
    if kind is None or kind.v == "closed":
        for key in load_keys:
            ctx.diags.error("E0219", f"`{key}` only applies to open-loop load" + (
                                " or a population of users" if key not in OPEN_ONLY else ""), seen[key].key.span,
                            "the load is closed-loop (virtual users)",
                            help="add `load = open` to send requests at a rate (`load = users` for users who "
                                 "think between requests), or remove it")
        return False
    for key in CLOSED_ONLY:
        if key in seen:
            ctx.diags.error("E0219", f"`{key}` only applies to closed-loop load", seen[key].key.span,
                            f"`load = {kind.v}` has no virtual users of that kind",
                            help="a round sends for `load.duration`, at `load.rate` (`load = open`) or from "
                                 "`load.users` users (`load = users`); remove it, or set `load = closed`")
    ctx.settings["users"] = single(Value("int", 1))
    if kind.v == "users":
        _users_checks(ctx, seen)
        traces = _read_traces(ctx, seen)
    else:
        _wrong_kind(ctx, seen, USERS_ONLY, "open", "`load = open` sends at a rate, whatever the answers",
                    "set `load = users` for users who think between requests, or remove it")
        _one_of(ctx, seen, "load.rate", "load.rps", seen["load"].span,
                'add `load.rate in [80%, 120%]` (of the calibrated capacity) or `load.rps = 200`')
        _profile_checks(ctx, seen)
        traces = _read_traces(ctx, seen)
    values = {}
    for key, setting in LOAD_SETTINGS.items():
        if key in (USERS_ONLY if kind.v == "open" else OPEN_ONLY):
            continue
        if key in ctx.settings:
            values[key] = ctx.settings[key]
        elif setting.default is not None:
            values[key] = single(setting.default)
    if traces and "load.duration" not in seen:
        _trace_duration(ctx, seen, values, traces)
    _warmup_shorter(ctx, seen, values)
    if kind.v == "open":
        _round_size(ctx, seen, values, max((t.highest for t in traces.values()), default=1))
    else:
        _population_size(ctx, seen, values, traces)
    ctx.workload = Workload(tuple(values.items()), tuple(traces.items()), kind.v)
    return True


def _wrong_kind(ctx: CheckContext, seen: dict, keys, kind: str, label: str, hint: str) -> None:
    for key in keys:
        if key in seen:
            ctx.diags.error("E0219", f"`{key}` does not apply to `load = {kind}`", seen[key].key.span, label,
                            help=hint)


def _users_checks(ctx: CheckContext, seen: dict) -> None:
    _wrong_kind(ctx, seen, OPEN_ONLY, "users", "the users' answers and think times set the rate",
                "a population's rate is `load.users` over their think time (`load.think`) and response "
                "time; remove it, or set `load = open` to send at a rate")
    if "load.users" not in seen:
        ctx.diags.error("E0213", "a population of users needs `load.users`", seen["load"].span, "no `load.users`",
                        help="add e.g. `load.users in [20, 50]` (and `load.think = 1s`, the mean think time)")
    profiles = ctx.settings.get("load.profile")
    wrong = [v.v for v in profiles or () if v.v not in USERS_PROFILES]
    if wrong:
        ctx.diags.error("E0219", f"a population of users follows a trace, not {wrong[0]}",
                        seen["load.profile"].value.span, "not constant or trace", help="`load.profile = trace` with `load.trace = \"FILE.csv\"`: "
                        "round(load.users x factor) users are active at each time")
        return
    if profiles is not None and "trace" in {v.v for v in profiles} and "load.trace" not in seen:
        ctx.diags.error("E0213", "the trace profile needs `load.trace`", seen["load.profile"].span, "no `load.trace`",
                        help='add e.g. `load.trace = "traces/day.csv"`')
    elif "load.trace" in seen and (profiles is None or "trace" not in {v.v for v in profiles}):
        ctx.diags.error("E0219", "`load.trace` only applies to the trace profile", seen["load.trace"].key.span,
                        "the profile is constant", help="add `load.profile = trace`, or remove it")


def _population_size(ctx: CheckContext, seen: dict, values: dict, traces: dict[str, Trace]) -> None:
    """The requests a population may send in a round, at most: each user once per think time at the
    shortest (answers take time too, so this is an upper bound only when thinks dominate); with no
    think time the load generator's own bound stops it."""
    users, thinks = values.get("load.users"), values["load.think"]
    shortest_think = min(v.v for v in thinks)
    if users is None or shortest_think == 0:
        return
    longest = max(v.v for v in values["load.duration"])
    requests = max(v.v for v in users) * longest / shortest_think * max([1, *(t.highest for t in traces.values())])
    if requests > MAX_ROUND_REQUESTS:
        culprit = seen.get("load.think") or seen.get("load.duration") or seen["load"]
        ctx.diags.error("E0218", f"a round would send about {float(requests):,.0f} requests, more than "
                                 f"{MAX_ROUND_REQUESTS:,}", culprit.value.span,
                        f"{max(v.v for v in users)} users thinking {_shown_s(shortest_think)} for {_shown_s(longest)}",
                        help="fewer users, a longer think time or a shorter `load.duration`")


def _read_traces(ctx: CheckContext, seen: dict) -> dict[str, Trace]:
    """Each load.trace file, read and checked: its path as written -> its points. A file's error is
    located in the file (line and column), with the spec's `load.trace` beside it."""
    paths = ctx.settings.get("load.trace")
    profile = ctx.settings.get("load.profile")
    if paths is None or profile is None or "trace" not in {v.v for v in profile}:
        return {}
    traces = {}
    for value in paths:
        found = read_trace(str(value.v), ctx.source.name)
        if isinstance(found, Trace):
            traces[str(value.v)] = found
            continue
        at = seen["load.trace"].value.span
        if found.span is None:
            ctx.diags.error("E0230", found.message, at, found.label, help=found.help)
        else:
            ctx.diags.error("E0230", found.message, found.span, found.label,
                            secondary=((at, "the trace this space replays"),), help=found.help)
    return traces


def _trace_duration(ctx: CheckContext, seen: dict, values: dict, traces: dict[str, Trace]) -> None:
    """Without `load.duration`, a round replays its trace to the last point."""
    ends = {trace.end_s for trace in traces.values()}
    if len(ends) > 1 or 0 in ends:
        ctx.diags.error("E0213", "the trace profile needs `load.duration` here", seen["load.trace"].span,
                        "traces of different lengths" if len(ends) > 1 else "the trace's last point is at 0 s",
                        help="add `load.duration = 30m` (a round replays the trace for that long)")
        return
    values["load.duration"] = single(Value("duration", ends.pop() * DURATION_UNITS["s"]))


def _one_of(ctx, seen, share_key: str, rps_key: str, missing_span, help_text: str) -> None:
    if share_key in seen and rps_key in seen:
        ctx.diags.error("E0219", f"`{share_key}` and `{rps_key}` both give the rate", seen[rps_key].key.span,
                        f"`{share_key}` is already set", help="give the rate one way: a share of capacity "
                                                              "or requests per second")
    elif share_key not in seen and rps_key not in seen:
        ctx.diags.error("E0213", f"open-loop load needs a rate (`{share_key}` or `{rps_key}`)", missing_span,
                        "no rate", help=help_text)


def _profile_checks(ctx: CheckContext, seen: dict) -> None:
    profile = ctx.settings.get("load.profile")
    names = [v.v for v in profile] if profile is not None else ["constant"]
    needs = {need for name in names for need in PROFILE_NEEDS[name]}
    at = seen.get("load.profile") or seen["load"]
    for key in ("load.period", "load.length", "load.trace"):
        if key in needs and key not in seen:
            ctx.diags.error("E0213", f"the {'/'.join(names)} profile needs `{key}`", at.span, f"no `{key}`",
                            help=f"add e.g. `{key} = {EXAMPLE_VALUES[key]}`")
        elif key in seen and key not in needs:
            ctx.diags.error("E0219", f"`{key}` only applies to the profiles that use it", seen[key].key.span,
                            f"the profile is {'/'.join(names)}", help="remove it, or set `load.profile`")
    peak_keys = [key for key in ("load.peak", "load.peak_rps") if key in seen]
    if "peak" in needs:
        if "load.rate" in seen and "load.peak_rps" in seen or "load.rps" in seen and "load.peak" in seen:
            key = peak_keys[-1]
            ctx.diags.error("E0219", f"`{key}` and the rate are in different units", seen[key].key.span,
                            "a share of capacity and requests per second",
                            help="with `load.rate`, give `load.peak` (a share); with `load.rps`, `load.peak_rps`")
        elif not peak_keys:
            ctx.diags.error("E0213", f"the {'/'.join(names)} profile needs a peak rate", at.span, "no peak",
                            help="add `load.peak = 140%` (with load.rate) or `load.peak_rps = 300` (with load.rps)")
    else:
        for key in peak_keys:
            ctx.diags.error("E0219", f"`{key}` only applies to the spikes, steps and ramp profiles",
                            seen[key].key.span, "the profile is constant", help="remove it, or set `load.profile`")
    period, length = ctx.settings.get("load.period"), ctx.settings.get("load.length")
    if period is not None and length is not None and "spikes" in names:
        if max(v.v for v in length) >= min(v.v for v in period):
            ctx.diags.error("E0218", "a spike must be shorter than the period it repeats in",
                            seen["load.length"].value.span, "`load.length` is not below `load.period`",
                            help="e.g. `load.length = 5s` with `load.period = 60s`")


def _warmup_shorter(ctx: CheckContext, seen: dict, values: dict) -> None:
    warmup, duration = values["load.warmup"], values["load.duration"]
    if max(v.v for v in warmup) >= min(v.v for v in duration):
        culprit = seen.get("load.warmup") or seen.get("load.duration")
        ctx.diags.error("E0218", "the warm-up must be shorter than the duration", culprit.value.span,
                        "nothing would be measured",
                        help="`load.warmup` is the first part of `load.duration`, left out of the metrics")


def _round_size(ctx: CheckContext, seen: dict, values: dict, trace_factor=1) -> None:
    """What one round may ask for (plan_records' bounds), at its worst over the axes: the requests of
    the highest rate (times a trace's highest factor) for the longest duration, and the windows and
    profile periods in it."""
    duration_key = "load.duration"
    longest = max(v.v for v in values[duration_key])
    at_duration = seen.get(duration_key) or seen["load"]
    duration_label = ((at_duration.value.span, f"for up to {_shown_s(longest)}"),) if duration_key in seen else ()
    for key, limit, what in (("load.window", MAX_LOAD_WINDOWS, "windows"), ("load.period", MAX_LOAD_PERIODS, "periods")):
        if key not in values:
            continue
        shortest = min(v.v for v in values[key])
        if longest / shortest > limit:
            culprit = seen.get(key) or at_duration
            ctx.diags.error("E0218", f"a round of {_shown_s(longest)} holds more than {limit:,} {what} of "
                                     f"{_shown_s(shortest)}", culprit.value.span,
                            f"`{key}` is too short for the duration", secondary=duration_label,
                            help=f"make `{key}` at least {_shown_s(longest / limit)}, or the duration shorter")
    capacity = values.get("load.capacity")
    rates = []                      # (requests per second, the setting that gives it)
    for key in ("load.rps", "load.peak_rps"):
        if key in values:
            rates.append((max(v.v for v in values[key]), key))
    if capacity is not None:
        for key in ("load.rate", "load.peak"):
            if key in values:
                rates.append((max(v.v for v in values[key]) / 100 * max(v.v for v in capacity), key))
    if not rates:
        return                      # shares of a capacity measured at run time: the runner checks them
    rps, key = max(rates)
    rps = max(rps, rps * trace_factor)
    requests = rps * longest / DURATION_UNITS["s"]
    if requests > MAX_ROUND_REQUESTS:
        culprit = seen.get(key) or at_duration
        ctx.diags.error("E0218", f"a round would send {float(requests):,.0f} requests, more than "
                                 f"{MAX_ROUND_REQUESTS:,}", culprit.value.span,
                        f"up to {float(rps):,.0f} requests per second", secondary=duration_label,
                        notes=() if duration_label else (f"`load.duration` is {_shown_s(longest)} by default",),
                        help="lower the rate or shorten `load.duration` (a round's schedule, the load generator's "
                             "records and the round's table are held whole)")


def _shown_s(ns) -> str:
    """A duration given in ns, in words: `24 h`, `90 s`, `1 ns`."""
    for unit, name in (("h", "h"), ("m", "min"), ("s", "s"), ("ms", "ms"), ("us", "µs"), ("ns", "ns")):
        size = DURATION_UNITS.get(unit)
        if size and ns >= size:
            return f"{float(ns / size):g} {name}"
    return f"{float(ns):g} ns"
