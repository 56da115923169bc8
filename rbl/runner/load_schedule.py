"""An open-loop round's send times, from its load (store/plan_records.py's Load): the rate over
time (the profile) and the arrival process. Computed here, once, so the load generator only
follows a list, and the same scenario and round always get the same schedule (seeded by both).

Profiles, with base = the load's rate and peak = the profile's:
  constant  base throughout;
  spikes    peak during the last `length_s` of every `period_s`, base otherwise (a round starts
            at base, so a warm-up sees the base load);
  steps     evenly from base to peak, one step every `period_s`;
  ramp      linear from base at 0 to peak at the end;
  trace     base times the trace's factor, linear between its points (compiler/load_trace.py).
Arrivals: constant (evenly spaced at the current rate; for a trace, one request each time the
expected count passes another half, so a rate of 0 sends nothing) or poisson (a non-homogeneous
Poisson process, drawn by thinning at the highest rate).
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from typing import Callable, Iterator

from ..plan_records import Load

NS = 1_000_000_000


def rate_rps(rate: dict, capacity_rps: float | None) -> float:
    """A load record's rate in requests per second (a share needs the capacity)."""
    if "rps" in rate:
        return float(rate["rps"])
    if capacity_rps is None:
        raise ValueError("a rate given as a share of capacity needs the target's capacity")
    return rate["share"] * capacity_rps


def rate_function(load: Load, capacity_rps: float | None) -> tuple[Callable[[float], float], float]:
    """(rate at time t in seconds, the highest rate) for a load record."""
    base = rate_rps(load.rate, capacity_rps)
    profile, duration = load.profile, load.duration_s
    if profile["kind"] == "constant":
        return (lambda t: base), base
    if profile["kind"] == "trace":
        times = [float(t) for t, _ in profile["points"]]
        rates = [base * float(factor) for _, factor in profile["points"]]
        return (lambda t: _between(times, rates, t)), max(rates)
    peak = rate_rps(profile["peak"], capacity_rps)
    highest = max(base, peak)
    if profile["kind"] == "spikes":
        period, length = float(profile["period_s"]), float(profile["length_s"])
        return (lambda t: peak if t % period >= period - length else base), highest
    if profile["kind"] == "steps":
        period = float(profile["period_s"])
        steps = max(1, math.ceil(duration / period))      # at most plan_records.MAX_LOAD_PERIODS; no list of them

        def level(t: float) -> float:
            step = min(int(t // period), steps - 1)
            return base + (peak - base) * step / (steps - 1) if steps > 1 else base
        return level, highest
    if profile["kind"] == "ramp":
        return (lambda t: base + (peak - base) * min(t / duration, 1.0)), highest
    raise ValueError(f"unknown load profile {profile['kind']!r}")


def send_offsets(load: Load, capacity_rps: float | None, seed: str) -> Iterator[int]:
    """Each request's send time in ns from the round's start, in order, up to the load's duration."""
    rate_at, highest = rate_function(load, capacity_rps)
    duration = load.duration_s
    if highest <= 0:
        return
    if load.arrivals == "constant" and load.profile["kind"] == "trace":
        yield from _evenly_along(_trace_segments(load, capacity_rps), duration)
        return
    if load.arrivals == "constant":
        t = 0.0
        while t < duration:
            yield round(t * NS)
            t += 1.0 / rate_at(t)
        return
    draw = random.Random(seed)
    t = 0.0
    while True:
        t += draw.expovariate(highest)
        if t >= duration:
            return
        if draw.random() * highest < rate_at(t):     # thinning: keep with probability rate(t)/highest
            yield round(t * NS)


def _between(times: list[float], rates: list[float], t: float) -> float:
    """The rate at t on the line through the trace's points (held flat before the first and after the last)."""
    i = bisect_right(times, t)
    if i == 0:
        return rates[0]
    if i == len(times):
        return rates[-1]
    t0, t1, r0, r1 = times[i - 1], times[i], rates[i - 1], rates[i]
    return r0 + (r1 - r0) * (t - t0) / (t1 - t0)


def _trace_segments(load: Load, capacity_rps: float | None) -> list[tuple[float, float, float, float]]:
    """The trace's rate as (start, end, rate at start, rate at end) pieces covering 0..duration."""
    base = rate_rps(load.rate, capacity_rps)
    points = [(float(t), base * float(factor)) for t, factor in load.profile["points"]]
    times = [0.0] + [t for t, _ in points if 0 < t < load.duration_s] + [load.duration_s]
    rates = [_between([t for t, _ in points], [r for _, r in points], t) for t in times]
    return [(times[i], times[i + 1], rates[i], rates[i + 1]) for i in range(len(times) - 1) if times[i + 1] > times[i]]


def _evenly_along(segments: list[tuple[float, float, float, float]], duration: float) -> Iterator[int]:
    """Send times where the expected count (the integral of a piecewise-linear rate) reaches 0.5, 1.5,
    2.5, ...: evenly spaced at the rate of the moment, solved exactly within each piece."""
    done, wanted = 0.0, 0.5                          # requests expected before the piece; the next send's count
    for start, end, r0, r1 in segments:
        length = end - start
        slope = (r1 - r0) / length
        area = (r0 + r1) / 2 * length
        while wanted <= done + area:
            need = wanted - done                     # r0 x + slope x^2 / 2 = need, for x in [0, length]
            root = r0 * r0 + 2 * slope * need
            x = 2 * need / (r0 + math.sqrt(max(root, 0.0))) if r0 > 0 or slope > 0 else length
            t = start + min(max(x, 0.0), length)
            if t >= duration:
                return
            yield round(t * NS)
            wanted += 1.0
        done += area


def expected_requests(load: Load, capacity_rps: float | None, step_s: float = 0.01) -> float:
    """The integral of the rate over the round (what a schedule holds on average)."""
    rate_at, _ = rate_function(load, capacity_rps)
    duration = load.duration_s
    steps = max(1, int(duration / step_s))
    return sum(rate_at((i + 0.5) * duration / steps) for i in range(steps)) * duration / steps
