"""What a library-native configuration does, computed from the library's own formulas
(docs/library-semantics.md, which names the source lines): the number of attempts and
the wait before each retry, when a breaker opens and for how long, when a timeout fires, how many
calls a bulkhead admits and how long one beyond them waits. Configurations are the
plan's native dicts (the values the client services receive, in their handoff units)."""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Callable

from ..libraries.istio import CONDITIONS_RETRYING_5XX

# Waits closer than this count as equal: no library's timer honours less than a millisecond, and a
# library that waits whole milliseconds realises 67.5 ms as 67 or 68 (docs/library-semantics.md section 9).
WAIT_TOLERANCE_MS = 0.5
# Waits computed per configuration: `maxAttempts = 10^9` must not make a 10^9-long list. Two
# configurations are compared on their attempt counts and these first waits.
COMPUTED_WAITS = 100
SHOWN_WAITS = 12
JAVA_LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class RetryBehaviour:
    attempts: int
    waits: tuple[float, ...] | None    # None: the waits are random
    random: str = ""                   # what kind of randomness, when waits is None

    def describe(self) -> str:
        if self.waits is None:
            return f"{self.attempts} attempts, random waits ({self.random}): no fixed sequence"
        if not self.waits:
            return f"{self.attempts} attempt, no retry"
        if self.attempts - 1 > len(self.waits):
            return f"{self.attempts} attempts, waits {format_waits(self.waits[:SHOWN_WAITS])[:-3]}, ... ms"
        return f"{self.attempts} attempts, waits {format_waits(self.waits)} (total {format_ms(sum(self.waits))})"


@dataclass(frozen=True)
class BreakerBehaviour:
    opens: str                         # when a closed breaker opens, in words
    consecutive: int | None            # n when it opens after exactly n consecutive failures
    open_for_ms: float
    half_open_permits: int | None      # None: not a fixed number of probes
    slow_calls_over_ms: float | None = None   # faulted calls slower than this count as failures

    def describe(self) -> str:
        probes = "unlimited probes" if self.half_open_permits is None else \
            f"{self.half_open_permits} probe{'s' if self.half_open_permits != 1 else ''}"
        slow = "" if self.slow_calls_over_ms is None else \
            f"; calls over {format_ms(self.slow_calls_over_ms)} count as failures (the delay fault reaches it)"
        return f"opens {self.opens}, open {format_ms(self.open_for_ms)}, then {probes}{slow}"


@dataclass(frozen=True)
class TimeoutBehaviour:
    after_ms: float                    # a call still running this long fails, its request cancelled

    def describe(self) -> str:
        return f"a call still running after {format_ms(self.after_ms)} fails, its request cancelled"


@dataclass(frozen=True)
class BulkheadBehaviour:
    max_concurrent: int
    max_wait_ms: float | None          # how long a call beyond them waits; None: it queues (see queue)
    queue: int = 0                     # calls that may wait, each for as long as it takes (max_wait_ms None)

    def describe(self) -> str:
        beyond = (f"up to {self.queue} more wait as long as it takes, the rest are refused" if self.max_wait_ms is None
                  else "one beyond them is refused at once" if self.max_wait_ms == 0
                  else f"one beyond them waits up to {format_ms(self.max_wait_ms)}, then is refused")
        return f"at most {self.max_concurrent} calls at once; {beyond}"


Behaviour = RetryBehaviour | BreakerBehaviour | TimeoutBehaviour | BulkheadBehaviour


def format_ms(ms: float) -> str:
    return f"{ms:.3f}".rstrip("0").rstrip(".") + " ms"


def retry_numbers(attempts: int) -> range:
    """k = 1, 2, ... for the retries whose waits are computed."""
    return range(1, min(attempts, COMPUTED_WAITS + 1))


def power(base: float, exponent: int) -> float:
    """base ** exponent as a double: infinity where the double overflows, as in Java and C#."""
    try:
        return math.pow(base, exponent)
    except OverflowError:
        return math.inf


def format_waits(waits: tuple[float, ...]) -> str:
    return ", ".join(f"{w:.3f}".rstrip("0").rstrip(".") for w in waits) + " ms"


def equivalent(a: Behaviour, b: Behaviour) -> bool:
    if isinstance(a, RetryBehaviour) and isinstance(b, RetryBehaviour):
        if a.attempts != b.attempts or a.waits is None or b.waits is None:
            return False
        return all(abs(x - y) <= WAIT_TOLERANCE_MS + 1e-9 for x, y in zip(a.waits, b.waits))
    if isinstance(a, BreakerBehaviour) and isinstance(b, BreakerBehaviour):
        return (a.consecutive is not None and a.consecutive == b.consecutive
                and abs(a.open_for_ms - b.open_for_ms) <= WAIT_TOLERANCE_MS + 1e-9
                and a.half_open_permits == b.half_open_permits
                and a.slow_calls_over_ms == b.slow_calls_over_ms)
    if isinstance(a, TimeoutBehaviour) and isinstance(b, TimeoutBehaviour):
        return abs(a.after_ms - b.after_ms) <= WAIT_TOLERANCE_MS + 1e-9
    if isinstance(a, BulkheadBehaviour) and isinstance(b, BulkheadBehaviour):
        return a == b
    return False


# ---- Resilience4j (section 1) ----------------------------------------------------------------

def resilience4j_retry(c: dict, fault_delay_ms: float | None = None) -> RetryBehaviour:
    attempts, kind = c["maxAttempts"], c["intervalFunction"]
    retries = retry_numbers(attempts)
    cap = c.get("maxIntervalMillis")
    if kind == "FIXED":
        return RetryBehaviour(attempts, tuple(float(c["waitDuration"]) for _ in retries))
    if kind == "EXPONENTIAL_EXACT":     # rbl's closed form: k -> round(initial * m^(k-1)), capped
        waits = [java_round(c["initialIntervalMillis"] * power(c["multiplier"], k - 1)) for k in retries]
        return RetryBehaviour(attempts, tuple(float(w if cap is None else min(w, cap)) for w in waits))
    if kind == "EXPONENTIAL_BACKOFF":   # ofExponentialBackoff: x -> (long)(x * m), step by step
        waits, wait = [], c["initialIntervalMillis"]
        for _ in retries:
            waits.append(float(wait if cap is None else min(wait, cap)))
            wait = java_long(wait * c["multiplier"])
        return RetryBehaviour(attempts, tuple(waits))
    return RetryBehaviour(attempts, None, f"{kind}, randomization factor {c['randomizationFactor']}")


def java_round(x: float) -> int:
    """Java's Math.round(double): the nearest long, halves rounded up."""
    return java_long(math.floor(x + 0.5)) if math.isfinite(x) else java_long(x)


def java_long(x: float) -> int:
    """Java's (long) cast of a double: toward zero, saturating at the long's range."""
    if math.isnan(x):
        return 0
    return max(-JAVA_LONG_MAX - 1, min(JAVA_LONG_MAX, int(x) if math.isfinite(x) else (JAVA_LONG_MAX if x > 0 else -JAVA_LONG_MAX - 1)))


def resilience4j_circuit_breaker(c: dict, fault_delay_ms: float | None = None) -> BreakerBehaviour:
    threshold, size = c["failureRateThreshold"], c["slidingWindowSize"]
    minimum = min(c["minimumNumberOfCalls"], size) if c["slidingWindowType"] == "COUNT_BASED" \
        else c["minimumNumberOfCalls"]
    if c["slidingWindowType"] == "COUNT_BASED" and threshold == 100 and minimum == size:
        consecutive, opens = size, f"after {size} consecutive failures"
    else:
        window = f"the last {size} calls" if c["slidingWindowType"] == "COUNT_BASED" else f"the last {size} s"
        consecutive, opens = None, f"at a failure rate >= {threshold}% over {window} (at least {minimum} calls)"
    slow = None
    # a call slower than slowCallDurationThreshold (strict >) is slow; delayed calls reach it
    if fault_delay_ms is not None and fault_delay_ms >= c["slowCallDurationThreshold"]:
        slow = float(c["slowCallDurationThreshold"])
    return BreakerBehaviour(opens, consecutive, float(c["waitDurationInOpenState"]),
                            c["permittedNumberOfCallsInHalfOpenState"], slow)


# ---- Polly v7 (section 2; the seed paper's client) ---------------------------------------------

def polly_retry(c: dict, fault_delay_ms: float | None = None) -> RetryBehaviour:
    attempts, sleep = c["retryCount"] + 1, c["sleepDuration"]
    retries = retry_numbers(attempts)
    kind = c["sleepDurationType"]
    if kind == "FIXED":
        return RetryBehaviour(attempts, tuple(float(sleep) for _ in retries))
    if kind == "EXPONENTIAL_EXACT":     # provider k => sleepDuration * pow^(k-1), in double
        return RetryBehaviour(attempts, tuple(sleep * power(c["exponentialBackoffPow"], k - 1) for k in retries))
    # the paper's provider: n => Math.Pow(ExponentialBackoffPow, n) * SleepDuration, pow a C# float
    pow32 = struct.unpack("f", struct.pack("f", c["exponentialBackoffPow"]))[0]
    return RetryBehaviour(attempts, tuple(power(pow32, k) * sleep for k in retries))


def polly_circuit_breaker(c: dict, fault_delay_ms: float | None = None) -> BreakerBehaviour:
    n = c["exceptionsAllowedBeforeBreaking"]
    return BreakerBehaviour(f"after {n} consecutive failures", n, float(c["durationOfBreaking"]), 1)


# ---- Cockatiel (section 5) -----------------------------------------------------------------------

def cockatiel_retry(c: dict, fault_delay_ms: float | None = None) -> RetryBehaviour:
    attempts = c["maxAttempts"] + 1       # maxAttempts counts retries
    retries = retry_numbers(attempts)
    if c["backoff"] == "CONSTANT":
        return RetryBehaviour(attempts, tuple(float(c["initialDelay"]) for _ in retries))
    generator = c.get("generator", "DECORRELATED_JITTER")
    if generator == "NO_JITTER":          # min(maxDelay, initialDelay * 2^(k-1)); `exponent` is ignored
        return RetryBehaviour(attempts, tuple(float(min(c["maxDelay"], c["initialDelay"] * power(2, k - 1)))
                                              for k in retries))
    if generator == "DECORRELATED_JITTER":
        return RetryBehaviour(attempts, None, f"ExponentialBackoff's decorrelated jitter, exponent "
                                              f"{c.get('exponent', 2)}, initialDelay {c['initialDelay']} ms, "
                                              f"maxDelay {c['maxDelay']} ms")
    return RetryBehaviour(attempts, None, f"ExponentialBackoff's {generator.lower().replace('_', ' ')} "
                                          f"under min(maxDelay, initialDelay * 2^(k-1))")


def cockatiel_circuit_breaker(c: dict, fault_delay_ms: float | None = None) -> BreakerBehaviour:
    n = c["exceptionsAllowedBeforeBreaking"]       # new ConsecutiveBreaker(n)
    return BreakerBehaviour(f"after {n} consecutive failures", n, float(c["halfOpenAfter"]), 1)


# ---- tenacity and pybreaker (section 7) ---------------------------------------------------------

def tenacity_retry(c: dict, fault_delay_ms: float | None = None) -> RetryBehaviour:
    attempts, kind = c["stop_after_attempt"], c["wait"]
    retries = retry_numbers(attempts)
    if kind == "none":
        return RetryBehaviour(attempts, tuple(0.0 for _ in retries))
    if kind == "fixed":
        return RetryBehaviour(attempts, tuple(c["wait_fixed"] * 1000.0 for _ in retries))
    if kind == "random_exponential":
        return RetryBehaviour(attempts, None, "wait_random_exponential: uniform in [0, the exponential wait]")
    # wait_exponential: max(max(0, min), min(multiplier * exp_base^(k-1), max)), in seconds
    cap = c.get("max", math.inf)
    return RetryBehaviour(attempts, tuple(
        max(max(0, c["min"]), min(c["multiplier"] * power(c["exp_base"], k - 1), cap)) * 1000.0 for k in retries))


def pybreaker_circuit_breaker(c: dict, fault_delay_ms: float | None = None) -> BreakerBehaviour:
    n = c["fail_max"]
    # pybreaker lets every caller through while half-open; success_threshold successes close it
    probes = 1 if c["success_threshold"] == 1 else None
    return BreakerBehaviour(f"after {n} consecutive failures", n, c["reset_timeout"] * 1000.0, probes)


# ---- opossum, failsafe-go, gobreaker, cenkalti/backoff (docs/library-semantics.md, Node.js and Go) ----

def opossum_circuit_breaker(c: dict, fault_delay_ms: float | None = None) -> BreakerBehaviour:
    # fail(): opens when fires >= volumeThreshold and failures / fires * 100 > errorThresholdPercentage
    return BreakerBehaviour(f"when at least {c['volumeThreshold']} calls are in its {c['rollingCountTimeout']} ms "
                            f"window and over {c['errorThresholdPercentage']:g}% of them failed", None,
                            float(c["resetTimeout"]), 1)


def failsafe_retry(c: dict, fault_delay_ms: float | None = None) -> RetryBehaviour:
    attempts = c["maxAttempts"]
    if "delayMin" in c or "delayMax" in c:
        return RetryBehaviour(attempts, None, "WithRandomDelay: uniform in [delayMin, delayMax]")
    if c.get("jitter") or c.get("jitterFactor"):
        return RetryBehaviour(attempts, None, "WithJitter / WithJitterFactor around the configured delay")
    delay = float(c["delay"])
    if "maxDelay" in c and c["maxDelay"] and delay:
        # lastDelay = min(maxDelay, lastDelay * delayFactor), from delay
        return RetryBehaviour(attempts, tuple(min(float(c["maxDelay"]), delay * power(c["delayFactor"], k - 1))
                                              for k in retry_numbers(attempts)))
    return RetryBehaviour(attempts, tuple(delay for _ in retry_numbers(attempts)))


def failsafe_circuit_breaker(c: dict, fault_delay_ms: float | None = None) -> BreakerBehaviour:
    n = c["failureThreshold"]
    capacity = c.get("failureThresholdingCapacity", n)
    probes = c.get("successThresholdingCapacity", c.get("successThreshold", c.get("failureExecutionThreshold", capacity)))
    if "failureRateThreshold" in c:
        return BreakerBehaviour(f"at a failure rate of {c['failureRateThreshold']:g}% over at least "
                                f"{c.get('failureExecutionThreshold', 1)} executions in {c['failureThresholdingPeriod']} ms",
                                None, float(c["delay"]), probes)
    if "failureThresholdingPeriod" in c:
        return BreakerBehaviour(f"after {n} failures within {c['failureThresholdingPeriod']} ms", None,
                                float(c["delay"]), probes)
    if capacity == n:
        return BreakerBehaviour(f"after {n} consecutive failures", n, float(c["delay"]), probes)
    return BreakerBehaviour(f"after {n} failures of the last {capacity} executions", None, float(c["delay"]), probes)


def gobreaker_circuit_breaker(c: dict, fault_delay_ms: float | None = None) -> BreakerBehaviour:
    probes = max(1, c["maxRequests"])             # MaxRequests 0 means 1
    if c["readyToTrip"] == "CONSECUTIVE_FAILURES":
        n = c["consecutiveFailures"] + 1          # ConsecutiveFailures > consecutiveFailures
        cleared = f" within one {c['interval']} ms interval" if c["interval"] else ""
        return BreakerBehaviour(f"after {n} consecutive failures{cleared}", None if cleared else n,
                                float(c["timeout"]), probes)
    return BreakerBehaviour(f"at a failure ratio of at least {c['failureRatio']:g} over at least "
                            f"{c['minRequests']} requests", None, float(c["timeout"]), probes)


def backoff_retry(c: dict, fault_delay_ms: float | None = None) -> RetryBehaviour:
    attempts = c["maxTries"] or JAVA_LONG_MAX     # 0: no limit
    if c["backOff"] == "CONSTANT":
        return RetryBehaviour(attempts, tuple(float(c["interval"]) for _ in retry_numbers(attempts)))
    if c["randomizationFactor"]:
        return RetryBehaviour(attempts, None, f"ExponentialBackOff: each wait within +-{c['randomizationFactor']:g} "
                                              f"of initialInterval * multiplier^(k-1)")
    # currentInterval starts at initialInterval (uncapped) and becomes min(maxInterval, current * multiplier)
    waits, current = [], float(c["initialInterval"])
    for _ in retry_numbers(attempts):
        waits.append(current)
        current = min(float(c["maxInterval"]), current * c["multiplier"])
    return RetryBehaviour(attempts, tuple(waits))


def istio_retry(c: dict, fault_delay_ms: float | None = None) -> RetryBehaviour:
    """Istio's HTTPRetry in the sidecar Envoy: attempts + 1 tries of an upstream 5xx when retryOn
    names 5xx (or the status); Istio's default conditions retry failed connections only. The waits
    are Envoy's full jitter: uniform in [0, min(backoff * 2^(k-1), 10 * backoff))."""
    tokens = set((c.get("retryOn") or "").split(","))
    retried = c["attempts"] if tokens & set(CONDITIONS_RETRYING_5XX) or any(t.isascii() and t.isdigit() for t in tokens) else 0
    if retried == 0:
        return RetryBehaviour(1, ())
    base = c.get("backoff", 25)
    return RetryBehaviour(retried + 1, None, f"Envoy's full jitter below min({base} ms * 2^(k-1), {10 * base} ms)")


# ---- timeouts and bulkheads (sections 1, 2, 3, 11, 15) --------------------------------------------

def timeout_after(name: str) -> Callable[..., TimeoutBehaviour]:
    """A timeout whose bound is the parameter `name`, in ms (every library rbl runs cancels the request)."""
    return lambda c, fault_delay_ms=None: TimeoutBehaviour(float(c[name]))


def bulkhead_waiting(limit: str, wait: str) -> Callable[..., BulkheadBehaviour]:
    """A bulkhead whose call beyond the limit waits up to a time (ms) for a place."""
    return lambda c, fault_delay_ms=None: BulkheadBehaviour(int(c[limit]), float(c[wait]))


def bulkhead_queueing(limit: str, queue: str) -> Callable[..., BulkheadBehaviour]:
    """A bulkhead that lets a number of calls wait (for as long as it takes); 0 refuses at once."""
    def behaviour(c: dict, fault_delay_ms: float | None = None) -> BulkheadBehaviour:
        queued = int(c.get(queue, 0))
        return BulkheadBehaviour(int(c[limit]), None if queued else 0.0, queued)
    return behaviour


SEMANTICS: dict[tuple[str, str], Callable[..., Behaviour]] = {
    ("resilience4j", "retry"): resilience4j_retry,
    ("resilience4j", "circuit_breaker"): resilience4j_circuit_breaker,
    ("polly", "retry"): polly_retry,
    ("polly", "circuit_breaker"): polly_circuit_breaker,
    ("cockatiel", "retry"): cockatiel_retry,
    ("cockatiel", "circuit_breaker"): cockatiel_circuit_breaker,
    ("tenacity", "retry"): tenacity_retry,
    ("pybreaker", "circuit_breaker"): pybreaker_circuit_breaker,
    ("opossum", "circuit_breaker"): opossum_circuit_breaker,
    ("failsafe", "retry"): failsafe_retry,
    ("failsafe", "circuit_breaker"): failsafe_circuit_breaker,
    ("gobreaker", "circuit_breaker"): gobreaker_circuit_breaker,
    ("backoff", "retry"): backoff_retry,
    ("istio", "retry"): istio_retry,
    ("resilience4j", "timeout"): timeout_after("timeoutDuration"),
    ("failsafe", "timeout"): timeout_after("timeout"),
    ("cockatiel", "timeout"): timeout_after("duration"),
    ("polly", "timeout"): timeout_after("timeout"),
    ("istio", "timeout"): timeout_after("timeout"),
    ("resilience4j", "bulkhead"): bulkhead_waiting("maxConcurrentCalls", "maxWaitDuration"),
    ("failsafe", "bulkhead"): bulkhead_waiting("maxConcurrency", "maxWaitTime"),
    ("cockatiel", "bulkhead"): bulkhead_queueing("limit", "queue"),
    ("polly", "bulkhead"): bulkhead_queueing("maxParallelization", "maxQueuingActions"),
}


def behaviour_of(library: str, pattern: str, config: dict, fault_delay_ms: float | None = None) -> Behaviour | None:
    """The behaviour of one native configuration; None for a library or pattern rbl has no formulas for."""
    semantics = SEMANTICS.get((library, pattern))
    return None if semantics is None else semantics(config, fault_delay_ms)
