"""Library-neutral values: each library's formulas (docs/library-semantics.md sections 1-4 and 7) and
the mapping from the neutral model onto native parameters, which must reproduce the neutral waits."""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import pytest
import tenacity
from hypothesis import given, settings, strategies as st

from rbl.libraries.catalogue import builtin_libraries
from rbl.neutral.mapping import map_neutral
from rbl.neutral.model import Backoff, NeutralBreaker, NeutralRetry
from rbl.neutral.semantics import behaviour_of, equivalent

LIBRARIES = builtin_libraries()


def waits(library: str, config: dict) -> tuple[float, ...]:
    return behaviour_of(library, "retry", config).waits


def mapped(library: str, neutral) -> tuple[dict, tuple]:
    result = map_neutral(library, LIBRARIES[library].patterns[neutral.pattern], neutral)
    return result.native, result.gaps


# -- the formulas, against the worked example of docs/library-semantics.md section 7 --------------------
@pytest.mark.parametrize("sleep,expected,total", [
    (20, (30, 45, 67.5, 101.25, 151.875), 395.625),
    (40, (60, 90, 135, 202.5, 303.75), 791.25),
    (60, (90, 135, 202.5, 303.75, 455.625), 1186.875),
])
def test_polly_paper_provider_waits_pow_to_the_k(sleep, expected, total):
    config = {"retryCount": 5, "sleepDurationType": "EXPONENTIAL_BACKOFF", "exponentialBackoffPow": 1.5,
              "sleepDuration": sleep}
    assert waits("polly", config) == pytest.approx(expected)
    assert sum(waits("polly", config)) == pytest.approx(total)


@pytest.mark.parametrize("initial,multiplier,attempts,expected", [
    (20, 1.5, 6, (20, 30, 45, 67, 100)),
    (40, 1.5, 6, (40, 60, 90, 135, 202)),
    (60, 1.5, 6, (60, 90, 135, 202, 303)),
    (20, 1.2, 10, (20, 24, 28, 33, 39, 46, 55, 66, 79)),     # the drift: 79 against the ideal 86
])
def test_resilience4j_of_exponential_backoff_truncates_step_by_step(initial, multiplier, attempts, expected):
    config = {"maxAttempts": attempts, "intervalFunction": "EXPONENTIAL_BACKOFF", "initialIntervalMillis": initial,
              "multiplier": multiplier}
    assert waits("resilience4j", config) == expected


def test_resilience4j_exact_interval_function_is_the_rounded_closed_form():
    config = {"maxAttempts": 10, "intervalFunction": "EXPONENTIAL_EXACT", "initialIntervalMillis": 20,
              "multiplier": 1.2, "maxIntervalMillis": 60}
    ideal = [20 * 1.2 ** (k - 1) for k in range(1, 10)]
    assert waits("resilience4j", config) == tuple(min(round(w + 1e-9), 60) for w in ideal)


def test_polly_count_excludes_the_first_call_and_resilience4j_includes_it():
    assert behaviour_of("polly", "retry", {"retryCount": 5, "sleepDurationType": "FIXED", "sleepDuration": 10,
                                           "exponentialBackoffPow": 1.5}).attempts == 6
    assert behaviour_of("resilience4j", "retry", {"maxAttempts": 6, "intervalFunction": "FIXED",
                                                  "waitDuration": 10}).attempts == 6


@pytest.mark.parametrize("multiplier,exp_base,minimum,maximum", [(0.02, 1.5, 0, None), (0.01, 2, 0.015, 0.05)])
def test_tenacity_formula_matches_the_real_wait_exponential(multiplier, exp_base, minimum, maximum):
    config = {"stop_after_attempt": 7, "wait": "exponential", "multiplier": multiplier, "exp_base": exp_base,
              "min": minimum, **({"max": maximum} if maximum is not None else {})}
    real = tenacity.wait_exponential(multiplier=multiplier, exp_base=exp_base, min=minimum,
                                     **({"max": maximum} if maximum is not None else {}))
    expected = tuple(real(SimpleNamespace(attempt_number=k)) * 1000 for k in range(1, 7))
    assert waits("tenacity", config) == pytest.approx(expected)


def test_random_waits_are_never_equivalent():
    config = {"stop_after_attempt": 3, "wait": "random_exponential", "multiplier": 0.01, "exp_base": 2, "min": 0}
    random = behaviour_of("tenacity", "retry", config)
    assert random.waits is None and not equivalent(random, random)


# -- the mapping ---------------------------------------------------------------------------------------
LISTING4_NEUTRAL = NeutralRetry(6, Backoff("exponential", Fraction(20), Fraction(3, 2)))


def test_the_neutral_waits_are_initial_times_multiplier_to_the_k_minus_1():
    assert LISTING4_NEUTRAL.waits() == (20, 30, 45, 67.5, 101.25)
    assert sum(LISTING4_NEUTRAL.waits()) == 263.75


def test_mapping_of_the_listing4_retry_per_library():
    r4j, gaps = mapped("resilience4j", LISTING4_NEUTRAL)
    assert not gaps
    assert (r4j["maxAttempts"], r4j["intervalFunction"], r4j["initialIntervalMillis"], r4j["multiplier"]) == \
        (6, "EXPONENTIAL_EXACT", 20, 1.5)
    polly, gaps = mapped("polly", LISTING4_NEUTRAL)
    assert not gaps
    assert (polly["retryCount"], polly["sleepDurationType"], polly["sleepDuration"], polly["exponentialBackoffPow"]) \
        == (5, "EXPONENTIAL_EXACT", 20, 1.5)
    python, gaps = mapped("tenacity", LISTING4_NEUTRAL)
    assert not gaps
    assert (python["stop_after_attempt"], python["wait"], python["multiplier"], python["exp_base"]) == \
        (6, "exponential", 0.02, 1.5)
    assert waits("polly", polly) == pytest.approx((20, 30, 45, 67.5, 101.25))
    assert waits("tenacity", python) == pytest.approx((20, 30, 45, 67.5, 101.25))
    assert waits("resilience4j", r4j) == (20, 30, 45, 68, 101)      # whole ms, within half a ms


def test_mapping_of_a_consecutive_failures_breaker_per_library():
    breaker = NeutralBreaker(2, Fraction(40), 1)
    r4j, _ = mapped("resilience4j", breaker)
    assert {k: r4j[k] for k in ("slidingWindowType", "slidingWindowSize", "minimumNumberOfCalls",
                                "failureRateThreshold", "waitDurationInOpenState",
                                "permittedNumberOfCallsInHalfOpenState")} == \
        {"slidingWindowType": "COUNT_BASED", "slidingWindowSize": 2, "minimumNumberOfCalls": 2,
         "failureRateThreshold": 100, "waitDurationInOpenState": 40, "permittedNumberOfCallsInHalfOpenState": 1}
    assert r4j["slowCallDurationThreshold"] >= 3_600_000       # never slow: only failures open it
    assert mapped("polly", breaker)[0] == {"exceptionsAllowedBeforeBreaking": 2, "durationOfBreaking": 40}
    pybreaker, _ = mapped("pybreaker", breaker)
    assert (pybreaker["fail_max"], pybreaker["reset_timeout"], pybreaker["success_threshold"]) == (2, 0.04, 1)
    behaviours = [behaviour_of(lib, "circuit_breaker", mapped(lib, breaker)[0])
                  for lib in ("resilience4j", "polly", "pybreaker", "cockatiel")]
    assert all(equivalent(behaviours[0], b) for b in behaviours[1:])


@pytest.mark.parametrize("library,neutral,fragment", [
    ("polly", NeutralRetry(4, Backoff("exponential", Fraction(10), Fraction(2), Fraction(50))), "no cap"),
    ("resilience4j", NeutralRetry(4, Backoff("constant", Fraction(25, 2))), "waitDuration = 13ms"),
    ("cockatiel", LISTING4_NEUTRAL, "backoff = CONSTANT"),
    ("pybreaker", NeutralBreaker(2, Fraction(40), 3), "half_open_permits: 1"),
    ("polly", NeutralBreaker(2, Fraction(40), 2), "half_open_permits: 1"),
    ("resilience4j", NeutralBreaker(2, Fraction(0), 1), "waitDurationInOpenState = 1ms"),
])
def test_what_a_library_cannot_express_is_a_gap_with_the_closest_setting(library, neutral, fragment):
    _, gaps = mapped(library, neutral)
    assert gaps and any(fragment in gap.closest for gap in gaps), gaps


@settings(max_examples=300, deadline=None)
@given(attempts=st.integers(1, 10), initial=st.integers(1, 500), multiplier=st.sampled_from(["1", "1.2", "1.5", "2", "3"]),
       cap=st.one_of(st.none(), st.integers(1, 5000)), kind=st.sampled_from(["none", "constant", "exponential"]))
def test_every_exact_mapping_reproduces_the_neutral_waits(attempts, initial, multiplier, cap, kind):
    backoff = Backoff(kind, Fraction(initial), Fraction(multiplier), Fraction(cap) if cap else None) \
        if kind == "exponential" else Backoff(kind, Fraction(initial) if kind == "constant" else Fraction(0))
    neutral = NeutralRetry(attempts, backoff)
    ideal = neutral.waits()
    for library in ("resilience4j", "polly", "tenacity", "cockatiel"):
        native, gaps = mapped(library, neutral)
        if gaps:
            # only what the mapping table says is inexpressible
            assert (library, kind, multiplier) in {("cockatiel", "exponential", m) for m in ("1", "1.2", "1.5", "3")} \
                or (library == "polly" and cap), gaps
            continue
        got = waits(library, native)
        assert len(got) == len(ideal)
        assert all(abs(g - w) <= 0.5 + 1e-9 for g, w in zip(got, ideal)), (library, got, ideal)


def test_cockatiel_doubles_exactly_without_jitter():
    neutral = NeutralRetry(5, Backoff("exponential", Fraction(20), Fraction(2)))
    native, gaps = mapped("cockatiel", neutral)
    assert not gaps and (native["backoff"], native["generator"]) == ("EXPONENTIAL", "NO_JITTER")
    assert waits("cockatiel", native) == (20.0, 40.0, 80.0, 160.0)
    capped, _ = mapped("cockatiel", NeutralRetry(5, Backoff("exponential", Fraction(20), Fraction(2), Fraction(50))))
    assert waits("cockatiel", capped) == (20.0, 40.0, 50.0, 50.0)


# -- timeout and bulkhead ----------------------------------------------------------------------------
def test_a_neutral_timeout_maps_onto_each_library_that_has_one():
    from rbl.neutral.model import NeutralTimeout
    after = NeutralTimeout(Fraction(80))
    assert mapped("resilience4j", after) == ({"timeoutDuration": 80}, ())
    assert mapped("failsafe", after) == ({"timeout": 80}, ())
    assert mapped("cockatiel", after) == ({"duration": 80, "strategy": "AGGRESSIVE"}, ())
    assert mapped("polly", after) == ({"timeout": 80, "timeoutStrategy": "OPTIMISTIC"}, ())
    assert mapped("istio", after) == ({"timeout": 80}, ())
    native, gaps = mapped("resilience4j", NeutralTimeout(Fraction(1, 2)))
    assert native == {"timeoutDuration": 1} and "at least 1 ms" in gaps[0].what


def test_a_neutral_bulkhead_is_exact_where_the_library_waits_for_a_time_and_flagged_where_it_queues():
    from rbl.neutral.model import NeutralBulkhead
    waiting = NeutralBulkhead(4, Fraction(20))
    assert mapped("resilience4j", waiting) == ({"maxConcurrentCalls": 4, "maxWaitDuration": 20,
                                                "fairCallHandling": True}, ())
    assert mapped("failsafe", waiting) == ({"maxConcurrency": 4, "maxWaitTime": 20}, ())
    native, gaps = mapped("cockatiel", waiting)
    assert native == {"limit": 4, "queue": 0} and "queues a number of calls" in gaps[0].what
    assert mapped("cockatiel", NeutralBulkhead(4, Fraction(0))) == ({"limit": 4, "queue": 0}, ())
    native, gaps = mapped("polly", waiting)
    assert native == {"maxParallelization": 4, "maxQueuingActions": 0} and gaps
