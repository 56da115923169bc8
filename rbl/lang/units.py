"""Units and typed values: the only place that knows what `20ms`, `1.5s` and `40%` mean.

Durations are exact fractions of nanoseconds, percentages exact fractions of percent points, so
ranges like `0%..80% step 20%` and `0.1s..0.3s step 0.1s` never drift.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

DURATION_UNITS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
# How a duration may be handed to a client (the `as` clause of a parameter declaration).
HANDOFF_DURATION_UNITS = ("ns", "us", "ms", "s")
# How a percentage may be handed over: as percent points (default) or as a ratio in [0, 1].
HANDOFF_PERCENT_UNITS = ("percent", "ratio")

# `service`: the name of a service of the space's topology (checked against it: checks/topology.py)
TYPE_NAMES = ("int", "float", "duration", "percent", "bool", "string", "service")

# The magnitudes rbl accepts. Numbers and counts fit a signed 64-bit integer (Java's long, what
# every client's JSON parser holds exactly) and durations 10^6 hours; beyond that a value is a
# typo, and exact arithmetic on it (waits, range lengths, str()) would be slow or overflow floats.
MAX_MAGNITUDE = 2**63 - 1
MAX_DURATION_NS = 10**6 * DURATION_UNITS["h"]
# Digits in one numeric literal: more cannot be a value in range (Python also refuses to convert
# integers of more than 4300 digits).
MAX_DIGITS = 64


class UnitError(ValueError):
    """A literal with a unit rbl does not know, or a value a handoff unit cannot carry exactly."""


@dataclass(frozen=True, slots=True)
class Value:
    """A typed constant. `type` is one of TYPE_NAMES or "enum"; `v` holds an exact payload:
    int for int, Fraction for float/duration(ns)/percent(points), str for string/enum, bool."""

    type: str
    v: object

    def __str__(self) -> str:
        return format_value(self)


def out_of_range(value: Value) -> str | None:
    """Why a numeric value is too large for rbl, or None when it is not."""
    if value.type == "duration":
        if abs(value.v) > MAX_DURATION_NS:
            return f"durations are at most {MAX_DURATION_NS // DURATION_UNITS['h']}h"
    elif value.type in ("int", "float", "percent") and abs(value.v) > MAX_MAGNITUDE:
        return f"numbers are at most {MAX_MAGNITUDE} (2^63-1)"
    return None


def parse_number(text: str) -> Fraction:
    return Fraction(text.replace("_", ""))


def parse_quantity(text: str) -> Value:
    """`20ms` -> Value("duration", 20_000_000 ns). Raises UnitError for an unknown unit."""
    index = len(text)
    while index > 0 and not text[index - 1].isdigit():
        index -= 1
    magnitude, unit = text[:index], text[index:]
    if unit not in DURATION_UNITS:
        raise UnitError(unit)
    return Value("duration", parse_number(magnitude) * DURATION_UNITS[unit])


def parse_percent(text: str) -> Value:
    return Value("percent", parse_number(text.rstrip("%")))


def _decimal(x: Fraction) -> str | None:
    """Exact decimal text of x if it has a finite expansion, else None."""
    if x.denominator == 1:
        return str(x.numerator)
    d = x.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d != 1:
        return None
    sign = "-" if x < 0 else ""
    x = abs(x)
    whole = x.numerator // x.denominator
    frac = x - whole
    digits = ""
    while frac:
        frac *= 10
        digits += str(frac.numerator // frac.denominator)
        frac -= frac.numerator // frac.denominator
    return f"{sign}{whole}.{digits}"


def format_fraction(x: Fraction) -> str:
    text = _decimal(x)
    return text if text is not None else f"{float(x):.6g}"


def format_duration(ns: Fraction) -> str:
    for unit in ("s", "ms", "us", "ns"):
        amount = ns / DURATION_UNITS[unit]
        if amount.denominator == 1 and (amount != 0 or unit == "ms"):
            return f"{amount.numerator}{unit}"
    for unit in ("s", "ms", "us", "ns"):
        text = _decimal(ns / DURATION_UNITS[unit])
        if text is not None and abs(ns / DURATION_UNITS[unit]) >= 1:
            return f"{text}{unit}"
    return f"{format_fraction(ns)}ns"


def format_value(value: Value) -> str:
    """The rbl source text for a value (used in messages, `rbl import` output and plans)."""
    t, v = value.type, value.v
    if t == "duration":
        return format_duration(v)
    if t == "percent":
        return f"{format_fraction(v)}%"
    if t == "float":
        text = format_fraction(v)
        return text if "." in text or "e" in text else f"{text}.0"
    if t == "int":
        return str(v)
    if t == "bool":
        return "true" if v else "false"
    if t == "string":
        escaped = str(v).replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    return str(v)  # enum


def native_number(x: Fraction) -> int | float:
    """JSON number for an exact value: an int when whole, else the nearest float."""
    return x.numerator if x.denominator == 1 else float(x)


def taken_back(native: object, base: str, unit: str | None) -> Value:
    """The typed value a client receives `native` as (handoff's inverse), for a parameter of type base."""
    if base in ("duration", "percent", "float"):
        amount = Fraction(str(native))
        if base == "duration":
            return Value(base, amount * DURATION_UNITS[unit or "ms"])
        return Value(base, amount * 100 if unit == "ratio" else amount)
    return Value(base, native)


def handoff(value: Value, unit: str | None) -> object:
    """The library-native JSON value for a typed value (e.g. 20ms `as ms` -> 20)."""
    t, v = value.type, value.v
    if t == "duration":
        unit = unit or "ms"
        amount = v / DURATION_UNITS[unit]
        if unit == "s":
            return native_number(amount) if amount.denominator == 1 else float(amount)
        if amount.denominator != 1:
            raise UnitError(f"{format_fraction(amount)}{unit} is not a whole number of {unit}")
        return amount.numerator
    if t == "percent":
        if unit == "ratio":
            return native_number(v / 100)
        return native_number(v)
    if t == "float":
        return float(v)
    return v
