"""What the conformance suite needs to know of each client service: its library, its patterns,
and how a few behaviours are written in the library's native parameters (the catalogue's names
and units, as a plan hands them over), with the waits the library documents for them
(docs/library-semantics.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Profile:
    name: str
    kind: str                    # the catalogue's `client`: how to start it
    library: str
    patterns: tuple[str, ...]
    retry_fixed: Callable[[int, int], dict] | None = None                 # (attempts, wait ms)
    retry_exponential: Callable[[int, int, float], dict] | None = None    # (attempts, first wait ms, multiplier)
    exponential_waits: Callable[[int, int, float], list[float]] | None = None
    breaker: Callable[[int, int], dict] | None = None                     # (consecutive failures, open ms)
    # a neutral retry value this library maps exactly, and the waits it means (None: the suite's own)
    neutral_retry: tuple[str, list[float]] | None = None
    neutral_breaker: bool = True          # consecutive_failures(n) maps exactly onto its breaker
    # the patterns beyond retry and breaker (pattern_checks.py), where the library has them
    timeout: Callable[[int], dict] | None = None                          # (ms)
    bulkhead: Callable[[int], dict] | None = None                         # (concurrent calls), no wait
    # pattern -> (initial = most concurrent calls): a limit that adapts within 1..initial, over short windows
    adaptive_limiters: dict[str, Callable[[int], dict]] | None = None
    adaptive_throttler: Callable[[int], dict] | None = None               # (failure rate threshold, %)
    retry_budget: Callable[[int, int, int], dict] | None = None           # (attempts, max rate %, floor)
    rate_limiter: Callable[[int, int, int], dict] | None = None           # (permits, period ms, wait ms)
    rate_starts: Callable[[int, int, int], float] | None = None           # (permits, period ms, k): earliest k-th start
    hedge: Callable[[int], dict] | None = None                            # (delay ms), one hedge
    fallback: bool = False


def _periods_start(permits: int, period_ms: int, k: int) -> float:
    """Permits handed out per period, the periods back to back from the limiter's creation."""
    return (k - 1) // permits * period_ms


def _float_waits(attempts: int, initial: int, multiplier: float) -> list[float]:
    return [initial * multiplier ** (k - 1) for k in range(1, attempts)]


def _resilience4j_waits(attempts: int, initial: int, multiplier: float) -> list[float]:
    # IntervalFunction.ofExponentialBackoff: x1 = initial, x(k+1) = (long)(x(k) * multiplier)
    waits, wait = [], initial
    for _ in range(1, attempts):
        waits.append(float(wait))
        wait = int(wait * multiplier)
    return waits


TENACITY = Profile(
    "tenacity", "python", "tenacity", ("baseline", "retry"),
    retry_fixed=lambda n, ms: {"stop_after_attempt": n, "wait": "fixed", "wait_fixed": ms / 1000},
    retry_exponential=lambda n, ms, m: {"stop_after_attempt": n, "wait": "exponential", "multiplier": ms / 1000,
                                        "exp_base": m, "min": 0},
    exponential_waits=_float_waits,
)

PYBREAKER = Profile(
    "pybreaker", "python", "pybreaker", ("baseline", "circuit_breaker"),
    breaker=lambda n, ms: {"fail_max": n, "reset_timeout": ms / 1000, "success_threshold": 1},
)

RESILIENCE4J = Profile(
    "resilience4j", "resilience4j", "resilience4j",
    ("baseline", "retry", "circuit_breaker", "timeout", "bulkhead", "rate_limiter", "fallback"),
    retry_fixed=lambda n, ms: {"maxAttempts": n, "intervalFunction": "FIXED", "waitDuration": ms},
    retry_exponential=lambda n, ms, m: {"maxAttempts": n, "intervalFunction": "EXPONENTIAL_BACKOFF",
                                        "initialIntervalMillis": ms, "multiplier": m},
    exponential_waits=_resilience4j_waits,
    # with every call failing, a full count-based window of n calls at a 100% threshold opens it
    breaker=lambda n, ms: {"slidingWindowType": "COUNT_BASED", "slidingWindowSize": n, "minimumNumberOfCalls": n,
                           "failureRateThreshold": 100, "waitDurationInOpenState": ms,
                           "permittedNumberOfCallsInHalfOpenState": 1},
    timeout=lambda ms: {"timeoutDuration": ms},
    bulkhead=lambda n: {"maxConcurrentCalls": n, "maxWaitDuration": 0},
    rate_limiter=lambda n, ms, wait: {"limitForPeriod": n, "limitRefreshPeriod": ms * 1_000_000, "timeoutDuration": wait},
    rate_starts=_periods_start,           # AtomicRateLimiter: limitForPeriod permits per cycle
    fallback=True,
)

COCKATIEL = Profile(
    "cockatiel", "node", "cockatiel", ("baseline", "retry", "circuit_breaker", "timeout", "bulkhead", "fallback"),
    # maxAttempts counts retries; CONSTANT waits initialDelay; NO_JITTER doubles (exponent is ignored)
    retry_fixed=lambda n, ms: {"maxAttempts": n - 1, "backoff": "CONSTANT", "initialDelay": ms},
    retry_exponential=lambda n, ms, m: {"maxAttempts": n - 1, "backoff": "EXPONENTIAL", "generator": "NO_JITTER",
                                        "initialDelay": ms, "maxDelay": 30_000},
    exponential_waits=lambda n, ms, m: _float_waits(n, ms, 2.0),
    breaker=lambda n, ms: {"exceptionsAllowedBeforeBreaking": n, "halfOpenAfter": ms},
    timeout=lambda ms: {"duration": ms, "strategy": "AGGRESSIVE"},
    bulkhead=lambda n: {"limit": n, "queue": 0},
    fallback=True,
    neutral_retry=("retry(attempts: 5, backoff: exponential(initial: 15ms, multiplier: 2))", [15.0, 30.0, 60.0, 120.0]),
)

OPOSSUM = Profile(
    "opossum", "node", "opossum", ("baseline", "circuit_breaker"),
    # every call failing: at volumeThreshold calls the failure rate is 100% > 50%, and it opens
    breaker=lambda n, ms: {"volumeThreshold": n, "errorThresholdPercentage": 50, "resetTimeout": ms,
                           "rollingCountTimeout": 10_000, "rollingCountBuckets": 10, "timeout": 0},
    neutral_breaker=False,                # a failure rate in a rolling window, not consecutive failures
)

FAILSAFE = Profile(
    "failsafe", "go", "failsafe",
    ("baseline", "retry", "circuit_breaker", "timeout", "bulkhead", "adaptive_limiter", "adaptive_throttler",
     "rate_limiter", "hedge", "fallback"),
    retry_fixed=lambda n, ms: {"maxAttempts": n, "delay": ms},
    # WithBackoffFactor(delay, maxDelay, factor): delay * factor^(k-1), capped at maxDelay
    retry_exponential=lambda n, ms, m: {"maxAttempts": n, "delay": ms, "maxDelay": 60_000, "delayFactor": m},
    exponential_waits=_float_waits,
    # n failures of the last n executions; one probe (successThreshold 1) closes or reopens it
    breaker=lambda n, ms: {"failureThreshold": n, "delay": ms, "successThreshold": 1},
    timeout=lambda ms: {"timeout": ms},
    bulkhead=lambda n: {"maxConcurrency": n, "maxWaitTime": 0},
    adaptive_limiters={"adaptive_limiter": lambda n: {"minLimit": 1, "maxLimit": n, "initialLimit": n,
                                                      "recentWindowMin": 20, "recentWindowMinSamples": 5}},
    adaptive_throttler=lambda percent: {"failureRateThreshold": percent, "thresholdingPeriod": 60_000},
    retry_budget=lambda n, rate, floor: {"maxAttempts": n, "budgetMaxRate": rate, "budgetMinConcurrency": floor},
    rate_limiter=lambda n, ms, wait: {"limiter": "BURSTY", "maxExecutions": n, "period": ms, "maxWaitTime": wait},
    rate_starts=_periods_start,           # NewBurstyBuilder: maxExecutions per period
    hedge=lambda ms: {"delay": ms, "maxHedges": 1},
    fallback=True,
)

GOBREAKER = Profile(
    "gobreaker", "go", "gobreaker", ("baseline", "circuit_breaker"),
    # ReadyToTrip: ConsecutiveFailures > n - 1; one request in the half-open state
    breaker=lambda n, ms: {"readyToTrip": "CONSECUTIVE_FAILURES", "consecutiveFailures": n - 1, "timeout": ms,
                           "maxRequests": 1},
)

BACKOFF = Profile(
    "backoff", "go", "backoff", ("baseline", "retry"),
    # maxTries counts the first call; maxElapsedTime 0: no limit (its default, 15 min, refuses longer waits)
    retry_fixed=lambda n, ms: {"maxTries": n, "backOff": "CONSTANT", "interval": ms, "maxElapsedTime": 0},
    retry_exponential=lambda n, ms, m: {"maxTries": n, "backOff": "EXPONENTIAL", "initialInterval": ms, "multiplier": m,
                                        "randomizationFactor": 0, "maxInterval": 60_000, "maxElapsedTime": 0},
    exponential_waits=_float_waits,
)

# Netflix concurrency-limits in the JVM service: each Limit algorithm within 1..n, starting at n (the
# limits move at every sample); AIMD backs off on a sample slower than 100 ms. Vegas takes its no-load
# RTT again from one sample every probeMultiplier x limit samples (30 x 16 x 0.5-1 by default: the
# check's fast phase ends near one), and then takes the slow responses for the norm and its limit
# climbs back: a probe beyond the check's calls leaves the fall to be seen.
CONCURRENCY_LIMITS = Profile(
    "concurrency_limits", "resilience4j", "concurrency_limits", ("baseline", "vegas", "gradient2", "aimd"),
    adaptive_limiters={
        "vegas": lambda n: {"initialLimit": n, "maxConcurrency": n, "probeMultiplier": 1000},
        "gradient2": lambda n: {"initialLimit": n, "minLimit": 1, "maxConcurrency": n},
        "aimd": lambda n: {"initialLimit": n, "minLimit": 1, "maxLimit": n, "timeout": 100},
    },
)

PROFILES = {p.name: p for p in (TENACITY, PYBREAKER, RESILIENCE4J, COCKATIEL, OPOSSUM, FAILSAFE, GOBREAKER, BACKOFF,
                                CONCURRENCY_LIMITS)}
