"""The neutral model: one retry or circuit breaker described by behaviour, not by a library's knobs.

Retry (docs/library-semantics.md section 6): `attempts` counts the first call; the wait before retry k
(k = 1 .. attempts-1) is `initial * multiplier^(k-1)`, capped at `max`, exactly (no step-wise
truncation). Circuit breaker (same section): opens after `consecutive_failures(n)`, stays open `open_for`,
then lets `half_open_permits` probe calls through; a failed probe opens it again. Timeout: a call
still running `after` it started fails and its request is cancelled. Bulkhead: at most
`max_concurrent` calls at once; one beyond them waits up to `max_wait` for a place, then is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from .semantics import power, retry_numbers

NS_PER_MS = 1_000_000


@dataclass(frozen=True)
class Backoff:
    kind: str                          # "none", "constant" or "exponential"
    initial_ms: Fraction = Fraction(0)  # constant: every wait; exponential: the first wait
    multiplier: Fraction = Fraction(1)
    max_ms: Fraction | None = None      # exponential: the cap (None: unbounded)

    def wait_ms(self, retry: int) -> float:
        """The wait before retry number `retry` (1-based)."""
        if self.kind == "none":
            return 0.0
        if self.kind == "constant":
            return float(self.initial_ms)
        wait = float(self.initial_ms) * power(float(self.multiplier), retry - 1)
        return wait if self.max_ms is None else min(wait, float(self.max_ms))


@dataclass(frozen=True)
class NeutralRetry:
    attempts: int
    backoff: Backoff

    pattern = "retry"

    def waits(self) -> tuple[float, ...]:
        return tuple(self.backoff.wait_ms(k) for k in retry_numbers(self.attempts))


@dataclass(frozen=True)
class NeutralBreaker:
    consecutive_failures: int
    open_for_ms: Fraction
    half_open_permits: int = 1

    pattern = "circuit_breaker"


@dataclass(frozen=True)
class NeutralTimeout:
    after_ms: Fraction

    pattern = "timeout"


@dataclass(frozen=True)
class NeutralBulkhead:
    max_concurrent: int
    max_wait_ms: Fraction

    pattern = "bulkhead"


Neutral = NeutralRetry | NeutralBreaker | NeutralTimeout | NeutralBulkhead


def from_values(pattern: str, values: dict) -> Neutral:
    """A neutral value from one configuration of flattened parameters (see signatures.py):
    {"attempts": Value, "backoff": Value(enum kind), "backoff.initial": Value(duration), ...}."""
    def ms(name: str) -> Fraction:
        return Fraction(values[name].v) / NS_PER_MS

    if pattern == "retry":
        kind = values["backoff"].v
        if kind == "constant":
            backoff = Backoff("constant", ms("backoff.delay"))
        elif kind == "exponential":
            backoff = Backoff("exponential", ms("backoff.initial"), Fraction(values["backoff.multiplier"].v),
                              ms("backoff.max") if "backoff.max" in values else None)
        else:
            backoff = Backoff("none")
        return NeutralRetry(values["attempts"].v, backoff)
    if pattern == "timeout":
        return NeutralTimeout(ms("after"))
    if pattern == "bulkhead":
        return NeutralBulkhead(values["max_concurrent"].v, ms("max_wait"))
    return NeutralBreaker(values["open_when.count"].v, ms("open_for"), values["half_open_permits"].v)
