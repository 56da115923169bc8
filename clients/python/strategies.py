"""Resilience patterns built from the real tenacity and pybreaker libraries.

A pattern turns "send one request" into "one call": `wrap(fn)` returns a function that invokes
`fn` through the library. Parameters arrive library-native (names and units as in the catalogue:
tenacity durations in seconds, pybreaker `reset_timeout` in seconds), exactly as the plan holds
them, so what the spec says is what the library gets.
"""

from __future__ import annotations

import time
from importlib.metadata import PackageNotFoundError, version
from typing import Callable

import pybreaker
import tenacity

from .job_limits import guarded_sleep
from ..protocol import JobError

Call = Callable[[], object]


class RequestFailed(Exception):
    """A request that did not return 2xx (or could not connect): what the patterns react to."""


def _identity(fn: Call) -> Call:
    return fn


# The largest value a parameter may have, as rbl's catalogue bounds it (rbl/libraries/catalogue.py
# CEILINGS; tests/test_parameter_bounds.py checks they agree): a duration (seconds), a factor, a count.
MAX_SECONDS = 1e6
MAX_MILLISECONDS = MAX_SECONDS * 1000    # the mesh policies' durations, which the job gives in ms
MAX_FACTOR = 1e9
MAX_COUNT = 2**31 - 1


def _params(params: dict, allowed: dict[str, type | tuple], positive: tuple[str, ...] = (),
            durations: tuple[str, ...] = (), max_count: int = MAX_COUNT, max_duration: float = MAX_SECONDS) -> dict:
    """The job's parameters, checked: known names, their types, and each number within its bounds
    (`positive` ones above 0, the others at least 0; `durations` at most max_duration)."""
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise JobError(f"unknown parameter(s) {', '.join(unknown)[:200]}; expected {', '.join(allowed)}")
    for name, value in params.items():
        kinds = allowed[name]
        if isinstance(value, bool) and kinds is not bool:
            raise JobError(f"`{name}` must be a number, got {value!r}")
        if not isinstance(value, kinds):
            raise JobError(f"`{name}` has the wrong type: {repr(value)[:60]}")
        if kinds is not bool and kinds is not str:
            high = max_count if kinds is int else max_duration if name in durations else MAX_FACTOR
            _in_range(name, value, name in positive, high)
    return params


def _in_range(name: str, value: float, positive: bool, high: float) -> None:
    # the JSON decoder already refused inf and NaN
    if not (value > 0 if positive else value >= 0) or value > high:
        raise JobError(f"`{name}` must be {'above' if positive else 'at least'} 0 and at most {high:g}, "
                       f"got {value!r}")


_NUMBER = (int, float)
TENACITY_RETRY = {"stop_after_attempt": int, "wait": str, "wait_fixed": _NUMBER, "multiplier": _NUMBER,
                  "exp_base": _NUMBER, "min": _NUMBER, "max": _NUMBER}


def tenacity_retry(params: dict) -> Callable[[Call], Call]:
    p = _params(params, TENACITY_RETRY, positive=("stop_after_attempt", "exp_base"),
                durations=("wait_fixed", "multiplier", "min", "max"))
    waits = {
        "none": lambda: tenacity.wait_none(),
        "fixed": lambda: tenacity.wait_fixed(p.get("wait_fixed", 1)),
        "exponential": lambda: tenacity.wait_exponential(**_exponential(p)),
        "random_exponential": lambda: tenacity.wait_random_exponential(**_exponential(p)),
    }
    kind = p.get("wait", "exponential")
    if kind not in waits:
        raise JobError(f"`wait` must be one of {', '.join(waits)}, got {kind!r}")
    retrying = tenacity.Retrying(stop=tenacity.stop_after_attempt(p.get("stop_after_attempt", 3)),
                                 wait=waits[kind](), retry=tenacity.retry_if_exception_type(RequestFailed),
                                 reraise=True, sleep=guarded_sleep)   # waits end at the job's limits

    def wrap(fn: Call) -> Call:
        # copy(): a Retrying carries per-call state; one copy per call keeps threads apart
        return lambda: retrying.copy()(fn)
    return wrap


def _exponential(p: dict) -> dict:
    args = {"multiplier": p.get("multiplier", 1), "exp_base": p.get("exp_base", 2), "min": p.get("min", 0)}
    if "max" in p:
        args["max"] = p["max"]
    return args


PYBREAKER_CIRCUIT_BREAKER = {"fail_max": int, "reset_timeout": _NUMBER, "success_threshold": int,
                             "throw_new_error_on_trip": bool}


def pybreaker_circuit_breaker(params: dict) -> Callable[[Call], Call]:
    p = _params(params, PYBREAKER_CIRCUIT_BREAKER, positive=("fail_max", "success_threshold", "reset_timeout"),
                durations=("reset_timeout",))
    breaker = pybreaker.CircuitBreaker(fail_max=p.get("fail_max", 5), reset_timeout=p.get("reset_timeout", 60),
                                       success_threshold=p.get("success_threshold", 1),
                                       throw_new_error_on_trip=p.get("throw_new_error_on_trip", True))
    return lambda fn: (lambda: breaker.call(fn))


def call_ending(error: BaseException, started_ns: int, sent_requests: bool) -> dict | None:
    """How a library pattern ended a failed call (clients/protocol.py), or None when the target's
    answer did: pybreaker's refusal while open is a circuit breaker's rejection (the error it raises
    on the failure that trips it, after a request, is not)."""
    if isinstance(error, pybreaker.CircuitBreakerError) and not sent_requests:
        return {"rejected": "circuit_breaker", "wait_us": (time.perf_counter_ns() - started_ns) // 1000}
    return None


def baseline(params: dict) -> Callable[[Call], Call]:
    _params(params, {})
    return _identity


# The mesh client's policies are its sidecar's: here they only check the job names the sidecar's
# parameters (so a job meant for another library is refused) and send the request as it is.
_PERCENT = (float, int)            # a share in percent points (not `is _NUMBER`: no duration)
_FACTOR = (int, float)             # a plain number (neither a duration nor a share)
ISTIO_POLICIES = {
    "retry": {"attempts": int, "perTryTimeout": _NUMBER, "retryOn": str, "backoff": _NUMBER},
    "circuit_breaker": {"maxConnections": int, "http1MaxPendingRequests": int, "http2MaxRequests": int,
                        "maxRequestsPerConnection": int, "maxRetries": int},
    "outlier_detection": {"consecutive5xxErrors": int, "consecutiveGatewayErrors": int, "interval": _NUMBER,
                          "baseEjectionTime": _NUMBER, "maxEjectionPercent": int, "minHealthPercent": int},
    "timeout": {"timeout": _NUMBER},
    "retry_budget": {"percent": _PERCENT, "minRetryConcurrency": int, "budgetInterval": _NUMBER},
    "adaptive_concurrency": {"concurrencyUpdateInterval": _NUMBER, "sampleAggregatePercentile": _PERCENT,
                             "maxConcurrencyLimit": int, "minConcurrencyLimit": int, "minRttCalcInterval": _NUMBER,
                             "minRttRequestCount": int, "minRttJitter": _PERCENT, "minConcurrency": int,
                             "minRttBuffer": _PERCENT},
    "admission_control": {"samplingWindow": _NUMBER, "aggression": _FACTOR, "srThreshold": _PERCENT,
                          "rpsThreshold": int, "maxRejectionProbability": _PERCENT},
}
for _allowed in ISTIO_POLICIES.values():
    _allowed["host"] = str           # where a topology's sidecars enforce the policy (their business, not the job's)


def sidecar_policy(allowed: dict) -> Callable[[dict], Callable[[Call], Call]]:
    def build(params: dict) -> Callable[[Call], Call]:
        # Istio's uint32 counts (its own validation); every number of a policy that is not a count is a duration
        durations = tuple(name for name, kind in allowed.items() if kind is _NUMBER)
        _params(params, allowed, durations=durations, max_count=2**32 - 1, max_duration=MAX_MILLISECONDS)
        for name, kind in allowed.items():
            if kind is _PERCENT and params.get(name, 0) > 100:
                raise JobError(f"`{name}` must be at most 100 (percent), got {params[name]!r}")
        return _identity
    return build


LIBRARIES: dict[str, dict[str, Callable[[dict], Callable[[Call], Call]]]] = {
    "tenacity": {"baseline": baseline, "retry": tenacity_retry},
    "pybreaker": {"baseline": baseline, "circuit_breaker": pybreaker_circuit_breaker},
    "istio": {"baseline": baseline, **{name: sidecar_policy(allowed) for name, allowed in ISTIO_POLICIES.items()}},
}


def library_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"
