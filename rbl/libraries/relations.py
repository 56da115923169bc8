"""Relations between a pattern's parameters that the libraries (or rbl's clients of them) refuse or
silently ignore when broken, which one parameter's type cannot say: a capacity below its threshold,
buckets that do not divide a window, a setting that applies only beside another. `rbl check` refuses
a configuration that breaks one (checks/relations.py); the client services refuse the same jobs.

A relation sees the values of its parameters in one configuration, by name, None where unset:
durations in ns, percentages in points, enums as their names."""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil
from typing import Callable

# gobreaker keeps interval / bucketPeriod buckets: as many as a breaker's window may keep in rbl
MAX_BUCKETS = 100_000


@dataclass(frozen=True)
class Relation:
    params: tuple[str, ...]                  # the parameters it ties; the first is where an error points
    holds: Callable[[dict], bool]
    message: str                             # what is wrong, when it does not hold
    help: str


def _both_or_neither(a: str, b: str) -> Callable[[dict], bool]:
    return lambda v: (v[a] is None) == (v[b] is None)


def _not_both(a: str, b: str) -> Callable[[dict], bool]:
    return lambda v: v[a] is None or v[b] is None


def _needs(a: str, b: str) -> Callable[[dict], bool]:
    return lambda v: v[a] is None or v[b] is not None


def _at_most(low: str, high: str) -> Callable[[dict], bool]:
    return lambda v: v[low] is None or v[high] is None or v[low] <= v[high]


def _gobreaker_buckets(v: dict) -> bool:
    if not v["bucketPeriod"]:
        return True
    return bool(v["interval"]) and ceil(v["interval"] / v["bucketPeriod"]) <= MAX_BUCKETS


def _whole_ms_buckets(v: dict) -> bool:
    return (v["rollingCountTimeout"] / 1_000_000) % v["rollingCountBuckets"] == 0


def _netflix_limits(least: str | None, most: str) -> tuple[Relation, ...]:
    """concurrency-limits only logs a warning for an initialLimit outside its bounds (the limit then
    jumps inside them at the first sample); rbl's JVM client refuses it, and so does `rbl check`."""
    why = "the limit starts at initialLimit and moves between the bounds"
    at_most = Relation(("initialLimit", most), _at_most("initialLimit", most),
                       f"`initialLimit` must be at most `{most}`", why)
    if least is None:
        return (at_most,)
    return (Relation(("initialLimit", least), _at_most(least, "initialLimit"),
                     f"`initialLimit` must be at least `{least}`", why), at_most)


RELATIONS: dict[tuple[str, str], tuple[Relation, ...]] = {
    ("failsafe", "retry"): (
        Relation(("delayMin", "delayMax"), _both_or_neither("delayMin", "delayMax"),
                 "`delayMin` and `delayMax` go together (WithRandomDelay)", "set both, or neither"),
        Relation(("delayMin", "delayMax"), _at_most("delayMin", "delayMax"),
                 "`delayMin` must be at most `delayMax`", "the random delay is drawn from [delayMin, delayMax]"),
        Relation(("maxDelay", "delayMin"), _not_both("maxDelay", "delayMin"),
                 "`maxDelay` (a backoff) and `delayMin`/`delayMax` (a random delay) exclude each other",
                 "keep one kind of delay"),
        Relation(("maxDelay", "delay"), lambda v: v["maxDelay"] is None or 0 < v["delay"] <= v["maxDelay"],
                 "a backoff (`maxDelay`) needs 0 < `delay` <= `maxDelay`",
                 "WithBackoffFactor(delay, maxDelay, delayFactor) grows the delay from `delay` up to `maxDelay`"),
        Relation(("jitterFactor", "jitter"), _not_both("jitterFactor", "jitter"),
                 "`jitter` and `jitterFactor` exclude each other", "keep one of them"),
    ),
    ("failsafe", "adaptive_limiter"): (
        Relation(("initialLimit", "minLimit"), _at_most("minLimit", "initialLimit"),
                 "`initialLimit` must be at least `minLimit`", "WithLimits(minLimit, maxLimit, initialLimit) starts "
                 "the limit at initialLimit, between the two"),
        Relation(("initialLimit", "maxLimit"), _at_most("initialLimit", "maxLimit"),
                 "`initialLimit` must be at most `maxLimit`", "WithLimits(minLimit, maxLimit, initialLimit) starts "
                 "the limit at initialLimit, between the two"),
        Relation(("recentWindowMax", "recentWindowMin"), _at_most("recentWindowMin", "recentWindowMax"),
                 "`recentWindowMax` must be at least `recentWindowMin`",
                 "WithRecentWindow(min, max, minSamples) collects for at least min and at most max"),
        Relation(("initialRejectionFactor", "maxRejectionFactor"),
                 _both_or_neither("initialRejectionFactor", "maxRejectionFactor"),
                 "`initialRejectionFactor` and `maxRejectionFactor` go together (WithQueueing)", "set both, or neither"),
        Relation(("initialRejectionFactor", "maxRejectionFactor"),
                 _at_most("initialRejectionFactor", "maxRejectionFactor"),
                 "`initialRejectionFactor` must be at most `maxRejectionFactor`",
                 "queued executions start to be refused at limit x initialRejectionFactor, all at x maxRejectionFactor"),
    ),
    ("failsafe", "circuit_breaker"): (
        Relation(("failureThresholdingCapacity", "failureThreshold"), _at_most("failureThreshold",
                                                                            "failureThresholdingCapacity"),
                 "`failureThresholdingCapacity` must be at least `failureThreshold`",
                 "failureThreshold failures out of the last failureThresholdingCapacity executions open it"),
        Relation(("failureThresholdingCapacity", "failureThresholdingPeriod"),
                 _not_both("failureThresholdingCapacity", "failureThresholdingPeriod"),
                 "`failureThresholdingCapacity` (count-based) and `failureThresholdingPeriod` (time-based) "
                 "exclude each other", "keep one way of thresholding"),
        Relation(("failureRateThreshold", "failureThresholdingPeriod"),
                 _needs("failureRateThreshold", "failureThresholdingPeriod"),
                 "`failureRateThreshold` needs `failureThresholdingPeriod`",
                 "WithFailureRateThreshold(rate, executions, period) counts over a period: set one"),
        Relation(("failureExecutionThreshold", "failureRateThreshold"),
                 _needs("failureExecutionThreshold", "failureRateThreshold"),
                 "`failureExecutionThreshold` applies only with `failureRateThreshold`",
                 "set failureRateThreshold too, or leave failureExecutionThreshold out"),
        Relation(("successThresholdingCapacity", "successThreshold"),
                 _needs("successThresholdingCapacity", "successThreshold"),
                 "`successThresholdingCapacity` applies only with `successThreshold`",
                 "set successThreshold too, or leave successThresholdingCapacity out"),
        Relation(("successThresholdingCapacity", "successThreshold"), _at_most("successThreshold",
                                                                            "successThresholdingCapacity"),
                 "`successThresholdingCapacity` must be at least `successThreshold`",
                 "successThreshold successes out of successThresholdingCapacity executions close it"),
    ),
    ("failsafe", "rate_limiter"): (
        Relation(("maxExecutions", "period", "limiter"),
                 lambda v: v["limiter"] != "SMOOTH" or v["period"] >= v["maxExecutions"],
                 "a SMOOTH limiter needs `period` / `maxExecutions` of at least 1ns",
                 "it lets one execution through every period / maxExecutions: lengthen the period, or use "
                 "`limiter = BURSTY`"),
    ),
    ("concurrency_limits", "vegas"): _netflix_limits(None, "maxConcurrency"),
    ("concurrency_limits", "gradient2"): _netflix_limits("minLimit", "maxConcurrency"),
    ("concurrency_limits", "aimd"): _netflix_limits("minLimit", "maxLimit"),
    ("gobreaker", "circuit_breaker"): (
        Relation(("bucketPeriod", "interval"), _gobreaker_buckets,
                 f"`bucketPeriod` needs an `interval` above 0 that it divides into at most {MAX_BUCKETS:,} buckets",
                 "gobreaker keeps interval / bucketPeriod buckets of counts (a rolling window)"),
    ),
    ("opossum", "circuit_breaker"): (
        Relation(("rollingCountBuckets", "rollingCountTimeout"), _whole_ms_buckets,
                 "`rollingCountTimeout` must be a whole number of ms per bucket (a multiple of "
                 "`rollingCountBuckets` ms)", "opossum rotates one bucket every rollingCountTimeout / "
                 "rollingCountBuckets ms"),
    ),
}
