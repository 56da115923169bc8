"""An open-loop round's send times, from its load (store/plan_records.py's Load): the rate over
time (the profile) and the arrival process. Computed here, once, so the load generator only
follows a list, and the same scenario and round always get the same schedule (seeded by both).

Profiles, with base = the load's rate and peak = the profile's:
  constant  base throughout;
  spikes    peak during the last `length_s` of every `period_s`, base otherwise (a round starts
            at base, so a warm-up sees the base load);
  steps     evenly from base to peak, one step every `period_s`;
  ramp      linear from base at 0 to peak at the end.
Arrivals: constant (evenly spaced at the current rate) or poisson (a non-homogeneous Poisson
process, drawn by thinning at the highest rate).
"""

from __future__ import annotations

import math
import random
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


def expected_requests(load: Load, capacity_rps: float | None, step_s: float = 0.01) -> float:
    """The integral of the rate over the round (what a schedule holds on average)."""
    rate_at, _ = rate_function(load, capacity_rps)
    duration = load.duration_s
    steps = max(1, int(duration / step_s))
    return sum(rate_at((i + 0.5) * duration / steps) for i in range(steps)) * duration / steps
