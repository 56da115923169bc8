"""Neutral value -> a library's native parameters, exactly (docs/library-semantics.md sections 6-7).

Each mapper returns the native parameters plus the gaps: what the library cannot express, each
with the closest native setting, which is what the mapper used. A configuration with gaps is an
error unless the spec opted into approximation (`approximate = true`); then the gaps are recorded
in the plan. Parameters a mapper leaves out take the catalogue's defaults.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

from ..lang.units import handoff
from .model import Neutral, NeutralBreaker, NeutralBulkhead, NeutralRetry, NeutralTimeout

# R4j counts a call slower than this as slow; a breaker opened by failures alone must never see one.
NEVER_SLOW_MS = 86_400_000


@dataclass(frozen=True)
class Gap:
    what: str          # what the library cannot express
    closest: str       # the native setting used instead


@dataclass(frozen=True)
class Mapped:
    native: dict       # parameter name -> the value the client receives
    gaps: tuple[Gap, ...]
    mapped: tuple[str, ...] = ()   # the names the mapping set (the others are catalogue defaults)


class _Native:
    """Collects native parameters and the gaps found on the way."""

    def __init__(self, library: str):
        self.library = library
        self.params: dict = {}
        self.gaps: list[Gap] = []

    def whole_ms(self, name: str, ms: Fraction, minimum: int = 0) -> int:
        """A duration handed in whole milliseconds."""
        value = max(minimum, int(ms + Fraction(1, 2)) if ms.denominator != 1 else int(ms))
        if value != ms:
            why = f"at least {minimum} ms" if ms < minimum else "whole milliseconds"
            self.gaps.append(Gap(f"{self.library} takes `{name}` in {why}, not {_ms(ms)}", f"{name} = {value}ms"))
        self.params[name] = value
        return value

    def seconds(self, name: str, ms: Fraction) -> None:
        self.params[name] = float(ms / 1000) if (ms / 1000).denominator != 1 else int(ms / 1000)

    def only_one_probe(self, breaker: NeutralBreaker, how: str) -> None:
        if breaker.half_open_permits != 1:
            self.gaps.append(Gap(f"{self.library} lets one probe call decide ({how}), "
                                 f"not half_open_permits: {breaker.half_open_permits}", "half_open_permits: 1"))


def _ms(ms: Fraction) -> str:
    return f"{float(ms):g}ms"


def _resilience4j(neutral: Neutral, out: _Native) -> None:
    if isinstance(neutral, NeutralRetry):
        out.params["maxAttempts"] = neutral.attempts
        backoff = neutral.backoff
        if backoff.kind == "exponential":
            # the closed form, not ofExponentialBackoff's step-wise truncation
            out.params["intervalFunction"] = "EXPONENTIAL_EXACT"
            out.whole_ms("initialIntervalMillis", backoff.initial_ms, minimum=1)
            out.params["multiplier"] = float(backoff.multiplier)
            if backoff.max_ms is not None:
                out.whole_ms("maxIntervalMillis", backoff.max_ms, minimum=1)
        else:
            out.params["intervalFunction"] = "FIXED"
            out.whole_ms("waitDuration", backoff.initial_ms)
        return
    n = neutral.consecutive_failures
    out.params.update({"slidingWindowType": "COUNT_BASED", "slidingWindowSize": n, "minimumNumberOfCalls": n,
                       "failureRateThreshold": 100, "slowCallRateThreshold": 100,
                       "slowCallDurationThreshold": NEVER_SLOW_MS,
                       "permittedNumberOfCallsInHalfOpenState": neutral.half_open_permits})
    out.whole_ms("waitDurationInOpenState", neutral.open_for_ms, minimum=1)


def _polly(neutral: Neutral, out: _Native) -> None:
    if isinstance(neutral, NeutralRetry):
        out.params["retryCount"] = neutral.attempts - 1
        backoff = neutral.backoff
        if backoff.kind == "exponential":
            # provider k => sleepDuration * pow^(k-1); the paper's EXPONENTIAL_BACKOFF (pow^k) is one step ahead
            out.params["sleepDurationType"] = "EXPONENTIAL_EXACT"
            out.whole_ms("sleepDuration", backoff.initial_ms)
            out.params["exponentialBackoffPow"] = float(backoff.multiplier)
            if backoff.max_ms is not None:
                out.gaps.append(Gap(f"polly's client has no cap on its waits (max: {_ms(backoff.max_ms)})",
                                    "no cap"))
        else:
            out.params["sleepDurationType"] = "FIXED"
            out.whole_ms("sleepDuration", backoff.initial_ms)
        return
    out.params["exceptionsAllowedBeforeBreaking"] = neutral.consecutive_failures
    out.whole_ms("durationOfBreaking", neutral.open_for_ms)
    out.only_one_probe(neutral, "one probe per open duration")


def _cockatiel(neutral: Neutral, out: _Native) -> None:
    if isinstance(neutral, NeutralRetry):
        out.params["maxAttempts"] = neutral.attempts - 1          # cockatiel counts retries
        out.params["backoff"] = "CONSTANT"
        backoff = neutral.backoff
        if backoff.kind == "exponential" and backoff.multiplier == 2:
            # noJitterGenerator: min(maxDelay, initialDelay * 2^(k-1)), base 2 hard-coded
            out.params.update(backoff="EXPONENTIAL", generator="NO_JITTER")
            largest = max(neutral.waits(), default=0.0)
            cap = backoff.max_ms if backoff.max_ms is not None else Fraction(max(30_000, math.ceil(largest)))
            out.whole_ms("maxDelay", cap)
        elif backoff.kind == "exponential":
            out.gaps.append(Gap("cockatiel's exponential backoff is random (decorrelated jitter) or, without "
                                "jitter, doubles: it cannot wait initial * multiplier^(k-1) for a multiplier "
                                f"of {float(backoff.multiplier):g}",
                                f"backoff = CONSTANT, initialDelay = {_ms(backoff.initial_ms)}"))
        out.whole_ms("initialDelay", backoff.initial_ms)
        return
    out.params["exceptionsAllowedBeforeBreaking"] = neutral.consecutive_failures
    out.whole_ms("halfOpenAfter", neutral.open_for_ms)
    out.only_one_probe(neutral, "later callers wait for the probe")


def _tenacity(neutral: Neutral, out: _Native) -> None:
    out.params["stop_after_attempt"] = neutral.attempts
    backoff = neutral.backoff
    if backoff.kind == "none":
        out.params["wait"] = "none"
    elif backoff.kind == "constant":
        out.params["wait"] = "fixed"
        out.seconds("wait_fixed", backoff.initial_ms)
    else:
        # wait_exponential: multiplier * exp_base^(k-1), in seconds
        out.params.update({"wait": "exponential", "exp_base": float(backoff.multiplier), "min": 0})
        out.seconds("multiplier", backoff.initial_ms)
        if backoff.max_ms is not None:
            out.seconds("max", backoff.max_ms)


def _pybreaker(neutral: Neutral, out: _Native) -> None:
    out.params.update({"fail_max": neutral.consecutive_failures, "success_threshold": 1})
    if neutral.open_for_ms <= 0:
        out.gaps.append(Gap("pybreaker needs a reset_timeout above 0", "reset_timeout = 1ms"))
        out.seconds("reset_timeout", Fraction(1))
    else:
        out.seconds("reset_timeout", neutral.open_for_ms)
    out.only_one_probe(neutral, "one trial call closes or reopens it")


def _ms_value(ms: Fraction) -> int | float:
    """A duration for a client that takes fractional milliseconds (Node.js, Go)."""
    return int(ms) if ms.denominator == 1 else float(ms)


# a cap for exponential backoffs that need one to grow at all: one day, the longest a job may run
NO_CAP_MS = 86_400_000


def _exponential_cap(neutral: NeutralRetry) -> Fraction:
    backoff = neutral.backoff
    if backoff.max_ms is not None:
        return backoff.max_ms
    return Fraction(max(NO_CAP_MS, math.ceil(min(max(neutral.waits(), default=0.0), 1e15))))


def _opossum(neutral: Neutral, out: _Native) -> None:
    n = neutral.consecutive_failures
    # the nearest: at least n calls in the rolling window, every one of them failed
    out.params.update({"volumeThreshold": n, "errorThresholdPercentage": 99.9, "timeout": 0})
    out.gaps.append(Gap("opossum opens on a failure rate over a rolling window (errorThresholdPercentage of at "
                        f"least volumeThreshold calls in rollingCountTimeout), not after {n} consecutive failures: "
                        "an earlier success in the window keeps it closed",
                        f"volumeThreshold = {n}, errorThresholdPercentage = 99.9%"))
    out.whole_ms("resetTimeout", neutral.open_for_ms)
    out.only_one_probe(neutral, "the first call after resetTimeout decides")


def _failsafe(neutral: Neutral, out: _Native) -> None:
    if isinstance(neutral, NeutralRetry):
        out.params["maxAttempts"] = neutral.attempts          # WithMaxAttempts counts the first call
        backoff = neutral.backoff
        if backoff.kind == "exponential" and backoff.initial_ms > 0:
            # WithBackoffFactor(delay, maxDelay, factor): min(maxDelay, delay * factor^(k-1)), in nanoseconds
            cap = _exponential_cap(neutral)
            # failsafe-go needs delay <= maxDelay: a first wait above the cap waits the cap, as does every
            # later one (the neutral multiplier is at least 1)
            out.params.update({"delay": _ms_value(min(backoff.initial_ms, cap)),
                               "delayFactor": float(backoff.multiplier),
                               "maxDelay": _ms_value(cap)})
        else:
            out.params["delay"] = _ms_value(backoff.initial_ms if backoff.kind != "none" else Fraction(0))
        return
    # n failures of the last n executions is n consecutive failures; successThreshold p permits p probes
    out.params.update({"failureThreshold": neutral.consecutive_failures, "delay": _ms_value(neutral.open_for_ms),
                       "successThreshold": neutral.half_open_permits})


def _gobreaker(neutral: Neutral, out: _Native) -> None:
    # ReadyToTrip trips when ConsecutiveFailures > consecutiveFailures; counts never cleared (interval 0)
    out.params.update({"readyToTrip": "CONSECUTIVE_FAILURES", "consecutiveFailures": neutral.consecutive_failures - 1,
                       "interval": 0, "maxRequests": neutral.half_open_permits})
    if neutral.open_for_ms <= 0:
        out.gaps.append(Gap("gobreaker stays open for a timeout above 0 (0 means its default, 60 s)", "timeout = 1ms"))
        out.params["timeout"] = 1
    else:
        out.params["timeout"] = _ms_value(neutral.open_for_ms)


def _backoff(neutral: Neutral, out: _Native) -> None:
    # maxTries counts the first call; maxElapsedTime 0: no limit (its default, 15 minutes, ends retries)
    out.params.update({"maxTries": neutral.attempts, "maxElapsedTime": 0})
    backoff = neutral.backoff
    if backoff.kind == "exponential":
        cap = _exponential_cap(neutral)
        out.params.update({"backOff": "EXPONENTIAL", "initialInterval": _ms_value(backoff.initial_ms),
                           "multiplier": float(backoff.multiplier), "randomizationFactor": 0,
                           "maxInterval": _ms_value(cap)})
        if cap < backoff.initial_ms:
            out.gaps.append(Gap(f"an ExponentialBackOff's first wait is initialInterval uncapped "
                                f"({_ms(backoff.initial_ms)} > max {_ms(cap)})", f"initialInterval = {_ms(backoff.initial_ms)}"))
    else:
        out.params.update({"backOff": "CONSTANT",
                           "interval": _ms_value(backoff.initial_ms if backoff.kind == "constant" else Fraction(0))})


def _waits_text(neutral: NeutralRetry) -> str:
    waits = neutral.waits()
    shown = ", ".join(f"{w:g}" for w in waits[:4]) + (", ..." if len(waits) > 4 else "")
    return f"{shown} ms"


def _istio(neutral: Neutral, out: _Native) -> None:
    """A retry only (Istio's circuit breaker is a connection-pool limit, not a failure count):
    attempts exactly; the waits are Envoy's, random (full jitter), whatever the neutral backoff."""
    out.params["attempts"] = neutral.attempts - 1            # Istio counts retries
    out.params["retryOn"] = "5xx"                            # any 5xx, reset or failed connection
    backoff = neutral.backoff
    base = backoff.initial_ms if backoff.kind != "none" else Fraction(1)
    out.whole_ms("backoff", base, minimum=1)
    if neutral.attempts > 1:
        out.gaps.append(Gap(f"Envoy's retry waits are random: before retry k, uniform in [0, min(backoff * 2^(k-1), "
                            f"10 * backoff)), not the waits {_waits_text(neutral)}",
                            f"backoff = {_ms(Fraction(out.params['backoff']))} (Envoy's base)"))


# -- timeout and bulkhead: one mapper per library that has the pattern ---------------------------------
def _timeout_as(name: str, **fixed) -> Callable[[NeutralTimeout, _Native], None]:
    """A library whose timeout takes one duration in whole milliseconds (and `fixed` settings)."""
    def mapper(neutral: NeutralTimeout, out: _Native) -> None:
        out.whole_ms(name, neutral.after_ms, minimum=1)
        out.params.update(fixed)
    return mapper


def _bulkhead_as(limit: str, wait: str) -> Callable[[NeutralBulkhead, _Native], None]:
    def mapper(neutral: NeutralBulkhead, out: _Native) -> None:
        out.params[limit] = neutral.max_concurrent
        out.whole_ms(wait, neutral.max_wait_ms)
    return mapper


def _queued_bulkhead(limit: str, queue: str) -> Callable[[NeutralBulkhead, _Native], None]:
    """A bulkhead that queues a number of calls (each waiting as long as it takes), not up to a time."""
    def mapper(neutral: NeutralBulkhead, out: _Native) -> None:
        out.params.update({limit: neutral.max_concurrent, queue: 0})
        if neutral.max_wait_ms > 0:
            out.gaps.append(Gap(f"{out.library}'s bulkhead queues a number of calls, each waiting as long as it "
                                f"takes, not up to a time (max_wait: {_ms(neutral.max_wait_ms)})",
                                f"{queue} = 0 (no wait)"))
    return mapper


PATTERN_MAPPERS: dict[str, dict[str, Callable]] = {
    # AGGRESSIVE: the call fails at the bound whatever the request does (rbl's request stops too)
    "timeout": {"resilience4j": _timeout_as("timeoutDuration"), "failsafe": _timeout_as("timeout"),
                "cockatiel": _timeout_as("duration", strategy="AGGRESSIVE"), "istio": _timeout_as("timeout"),
                "polly": _timeout_as("timeout", timeoutStrategy="OPTIMISTIC")},
    "bulkhead": {"resilience4j": _bulkhead_as("maxConcurrentCalls", "maxWaitDuration"),
                 "failsafe": _bulkhead_as("maxConcurrency", "maxWaitTime"),
                 "cockatiel": _queued_bulkhead("limit", "queue"),
                 "polly": _queued_bulkhead("maxParallelization", "maxQueuingActions")},
}


MAPPERS: dict[str, Callable[[Neutral, _Native], None]] = {
    "resilience4j": _resilience4j,
    "polly": _polly,
    "cockatiel": _cockatiel,
    "tenacity": _tenacity,
    "pybreaker": _pybreaker,
    "opossum": _opossum,
    "failsafe": _failsafe,
    "gobreaker": _gobreaker,
    "backoff": _backoff,
    "istio": _istio,
}
# the neutral retry and circuit breaker each library can take, when not both
MAPPED_PATTERNS = {"istio": ("retry",)}


def neutral_patterns(library: str) -> tuple[str, ...]:
    """The neutral patterns rbl maps onto `library`."""
    if library not in MAPPERS:
        return ()
    return (*MAPPED_PATTERNS.get(library, ("retry", "circuit_breaker")),
            *(pattern for pattern, mappers in PATTERN_MAPPERS.items() if library in mappers))


def map_neutral(library: str, pattern_def, neutral: Neutral) -> Mapped:
    """The native configuration for `neutral` in `library` (whose catalogue pattern is
    pattern_def): mapped parameters first, then the catalogue defaults of the others."""
    out = _Native(library)
    (PATTERN_MAPPERS[neutral.pattern][library] if neutral.pattern in PATTERN_MAPPERS else MAPPERS[library])(neutral, out)
    mapped = tuple(out.params)
    for definition in pattern_def.params.values():
        if definition.name not in out.params and definition.default is not None:
            out.params[definition.name] = handoff(definition.default, definition.handoff)
    return Mapped(out.params, tuple(out.gaps), mapped)
