"""Axis ranges and ticks for rbl's own figures (rbl/report/chart/model.py): a linear axis gets about five
ticks at round steps (1, 2, 2.5, 5 times a power of ten), a log axis its powers of ten labelled as
plain numbers (20, 50, 100 ms, not 10^2), with the 2s and 5s between them labelled where the axis
spans under three decades (else they collide) and drawn as unlabelled lines otherwise."""

from __future__ import annotations

import math

LINEAR_TICKS = 5


def tick_text(value: float) -> str:
    """A tick's label: as short as `g` gives, never in exponent form for the ranges figures use."""
    if value == 0:
        return "0"
    text = f"{value:g}"
    if "e" in text:
        magnitude = abs(value)
        text = f"{value:.0f}" if magnitude >= 1 else f"{value:.{min(12, 1 - math.floor(math.log10(magnitude)))}f}"
        text = text.rstrip("0").rstrip(".") if "." in text else text
    return text


def data_range(values: list[float], log: bool, from_zero: bool = False) -> tuple[float, float]:
    """The shown range of an axis holding `values`: a 5% margin either side (on a log axis, in
    decades), zero included when asked (stacks and bars grow from it), never empty."""
    finite = [v for v in values if math.isfinite(v) and (v > 0 or not log)]
    if not finite:
        return (1.0, 10.0) if log else (0.0, 1.0)
    low, high = min(finite), max(finite)
    if log:
        lo, hi = math.log10(low), math.log10(high)
        if hi - lo < 1e-9:
            lo, hi = lo - 0.5, hi + 0.5
        margin = (hi - lo) * 0.05
        return 10 ** (lo - margin), 10 ** (hi + margin)
    if from_zero:
        low, high = min(low, 0.0), max(high, 0.0)
    if high - low < 1e-12 * max(1.0, abs(high)):
        spread = abs(high) * 0.1 or 1.0
        low, high = low - spread, high + spread
    margin = (high - low) * 0.05
    return (low if from_zero and low == 0 else low - margin), (high if from_zero and high == 0 else high + margin)


def _nice_step(span: float, count: int) -> float:
    raw = span / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if factor * power >= raw:
            return factor * power
    return 10 * power


def linear_ticks(low: float, high: float, count: int = LINEAR_TICKS) -> list[float]:
    step = _nice_step(high - low, count)
    first = math.ceil(low / step - 1e-9)
    ticks = []
    k = first
    while k * step <= high + step * 1e-9:
        ticks.append(round(k * step, 12))
        k += 1
    return ticks


def log_ticks(low: float, high: float) -> tuple[list[float], list[float]]:
    """(labelled ticks, unlabelled minor ticks) of a log axis from `low` to `high`."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    narrow = high / low < 1000
    major, minor = [], []
    for power in range(first, last + 1):
        for factor in range(1, 10):
            value = factor * 10.0 ** power
            if not low <= value <= high:
                continue
            if factor == 1 or (narrow and factor in (2, 5)):
                major.append(float(f"{value:.12g}"))
            else:
                minor.append(value)
    if len(major) < 2:                       # under a decade: label the steps between as well
        major = sorted(set(major) | {float(f"{v:.12g}") for v in minor})
        minor = []
    return major, minor
