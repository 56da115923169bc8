"""What the original ResilienceBench client services did with a pattern's JSON parameters.

`rbl import` reproduces these, not rbl's catalogue defaults: each original client read only some
keys, hard-coded others, and filled a missing key with its language's default. Read from the
clients of ppgia-unifor/resilience-bench at f7800cb (docs/library-semantics.md, section 8).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Fixed:
    """A parameter the original client always set itself, whatever its JSON said."""
    value: str          # rbl source text
    why: str            # the one-line comment written beside it


@dataclass(frozen=True)
class OriginalClient:
    source: str                               # where the behaviour was read
    reads: dict[str, str]                     # rbl parameter -> the original's field type
    fixed: dict[str, Fixed] = field(default_factory=dict)
    library_defaults: dict[str, str] = field(default_factory=dict)   # left to the library: rbl text
    inert: frozenset[str] = frozenset()       # unread parameters rbl also ignores under `fixed`
    missing: str = ""                         # what the original did with a key its JSON lacked
    missing_values: dict[str, str] = field(default_factory=dict)     # rbl text of that value, if exact
    caveat: str = ""                          # a difference rbl cannot reproduce
    # values the original's library version refused (the client then failed): name -> (least, why)
    refused_below: dict[str, tuple[float, str]] = field(default_factory=dict)


JAVA_INTEGER, JAVA_DOUBLE, JAVA_FLOAT = "a Java Integer", "a Java Double", "a Java Float"
CS_INT, CS_FLOAT = "a C# int", "a C# float"
JS_NUMBER = "a JavaScript number"

_R4J = "clients/resilience4j (Resilience4j 1.7.1)"
_POLLY = "clients/polly (Polly 7.2.2)"
_COCKATIEL = "clients/cockatiel (cockatiel ^3.0.0)"
_JAVA_MISSING = ("the original client failed on a missing key (a null Integer unboxed: "
                 "NullPointerException), so no published run used one")
_CS_MISSING = "the original client's C# model filled a missing key with 0"
_JS_MISSING = "the original client passed `undefined` for a missing key"
_COCKATIEL_CAVEAT = ("the original cockatiel client caught every request error inside the function its "
                     "policy ran, so its policy never saw a failure and never retried or opened; rbl's "
                     "client lets the policy see failures, as the pattern intends")

ORIGINAL_CLIENTS: dict[tuple[str, str], OriginalClient] = {
    ("resilience4j", "retry"): OriginalClient(
        _R4J + " retry/BackendServiceWithRetry.java",
        reads={"maxAttempts": JAVA_INTEGER, "initialIntervalMillis": JAVA_INTEGER, "multiplier": JAVA_DOUBLE},
        fixed={"intervalFunction": Fixed("EXPONENTIAL_BACKOFF", "the original client always used "
                                         "IntervalFunction.ofExponentialBackoff(initialIntervalMillis, multiplier)")},
        inert=frozenset({"waitDuration", "randomizationFactor"}),
        missing=_JAVA_MISSING,
        refused_below={"multiplier": (1.0, "Resilience4j 1.7.1's ofExponentialBackoff refused a multiplier "
                                           "below 1 (IllegalArgumentException), so the original client failed; "
                                           "rbl's Resilience4j 2.4.0 runs it as shrinking waits")}),
    ("resilience4j", "circuit_breaker"): OriginalClient(
        _R4J + " circuitBreaker/BackendServiceWithCircuitBreaker.java",
        reads={"failureRateThreshold": JAVA_FLOAT, "slidingWindowSize": JAVA_INTEGER,
               "minimumNumberOfCalls": JAVA_INTEGER, "waitDurationInOpenState": JAVA_INTEGER,
               "permittedNumberOfCallsInHalfOpenState": JAVA_INTEGER, "slowCallRateThreshold": JAVA_INTEGER,
               "slowCallDurationThreshold": JAVA_INTEGER},
        library_defaults={"slidingWindowType": "COUNT_BASED", "automaticTransitionFromOpenToHalfOpenEnabled": "false",
                          "maxWaitDurationInHalfOpenState": "0ms"},
        missing=_JAVA_MISSING),
    ("polly", "retry"): OriginalClient(
        _POLLY + " Controllers/RetryController.cs",
        reads={"retryCount": CS_INT, "sleepDuration": CS_INT, "exponentialBackoffPow": CS_FLOAT},
        fixed={"sleepDurationType": Fixed("EXPONENTIAL_BACKOFF", "the original client always waited "
                                          "exponentialBackoffPow^k * sleepDuration before retry k")},
        missing=_CS_MISSING,
        missing_values={"retryCount": "0", "sleepDuration": "0ms", "exponentialBackoffPow": "0.0"}),
    ("polly", "circuit_breaker"): OriginalClient(
        _POLLY + " Controllers/CircuitBreakerController.cs",
        reads={"exceptionsAllowedBeforeBreaking": CS_INT, "durationOfBreaking": CS_INT},
        missing=_CS_MISSING,
        missing_values={"durationOfBreaking": "0ms"}),    # 0 breaks allowed: Polly refused to build
    ("cockatiel", "retry"): OriginalClient(
        _COCKATIEL + " pattern/retry/RetryController.ts",
        reads={"maxAttempts": JS_NUMBER, "exponent": JS_NUMBER, "initialDelay": JS_NUMBER, "maxDelay": JS_NUMBER},
        fixed={"backoff": Fixed("EXPONENTIAL", "the original client always used new ExponentialBackoff(...)"),
               "generator": Fixed("DECORRELATED_JITTER", "ExponentialBackoff's default generator: random waits")},
        missing=_JS_MISSING,
        caveat=_COCKATIEL_CAVEAT),
    ("cockatiel", "circuit_breaker"): OriginalClient(
        _COCKATIEL + " pattern/circuitBreaker/CircuitBreakerController.ts",
        reads={"exceptionsAllowedBeforeBreaking": JS_NUMBER, "halfOpenAfter": JS_NUMBER},
        missing=_JS_MISSING,
        caveat=_COCKATIEL_CAVEAT),
}

WHOLE_NUMBER_TYPES = (JAVA_INTEGER, CS_INT)
