"""Every client service whose library has a timeout, bulkhead, rate limiter, hedge or fallback passes
the checks of pattern_checks.py, against the real fault proxy and httpbin; a client that maps one of
their parameters wrongly (or reports a fallback as a success) does not."""

from __future__ import annotations

import pytest

from . import pattern_checks as checks
from .conftest import ids, selected_profiles
from .mismapped import changed_keys, mismapped_client
from .wrong_clients import rewriting_client

TIMEOUT = selected_profiles("timeout")
BULKHEAD = selected_profiles("bulkhead")
ADAPTIVE_LIMITER = [(profile, pattern) for profile in selected_profiles("adaptive_limiters")
                    for pattern in profile.adaptive_limiters]
ADAPTIVE_LIMITER_IDS = [f"{profile.name}-{pattern}" for profile, pattern in ADAPTIVE_LIMITER]
# a client that pins the limit: its least taken from the initial limit, or (Vegas has no least) no smoothing
PINNED = {"vegas": {"smoothing": 0}}
ADAPTIVE_THROTTLER = selected_profiles("adaptive_throttler")
RETRY_BUDGET = selected_profiles("retry_budget")
RATE_LIMITER = selected_profiles("rate_limiter")
HEDGE = selected_profiles("hedge")
FALLBACK = [p for p in selected_profiles() if p.fallback]
COMPOSED = [p for p in TIMEOUT if p.retry_fixed is not None]


@pytest.mark.parametrize("profile", TIMEOUT, ids=ids(TIMEOUT))
def test_timeout_bounds_a_slow_call(client_url, start_proxy, profile):
    checks.check_timeout_bounds_a_slow_call(client_url(profile), start_proxy(), profile)


@pytest.mark.parametrize("profile", COMPOSED, ids=ids(COMPOSED))
def test_the_written_order_decides_per_attempt_or_overall_timeout(client_url, start_proxy, profile):
    checks.check_retry_then_timeout_bounds_each_attempt(client_url(profile), start_proxy(), profile)


@pytest.mark.parametrize("profile", BULKHEAD, ids=ids(BULKHEAD))
def test_bulkhead_admits_at_most_its_limit(client_url, start_proxy, profile):
    checks.check_bulkhead_admits_at_most_its_limit(client_url(profile), start_proxy(), profile)


@pytest.mark.parametrize("profile", RETRY_BUDGET, ids=ids(RETRY_BUDGET))
def test_retry_budget_caps_the_retries_in_flight(client_url, start_proxy, profile):
    checks.check_retry_budget_caps_retries_in_flight(client_url(profile), start_proxy(), profile)


@pytest.mark.parametrize("profile", RETRY_BUDGET, ids=ids(RETRY_BUDGET))
def test_a_client_that_multiplies_the_budget_floor_fails_conformance(client_url, start_proxy, profile):
    (key,) = changed_keys(profile.retry_budget(3, 0, 2), profile.retry_budget(3, 0, 3))
    with mismapped_client(client_url(profile), _scaled("retry", key, 4)) as url:
        with pytest.raises(AssertionError, match="let [0-9]+ retries run at once"):
            checks.check_retry_budget_caps_retries_in_flight(url, start_proxy(), profile)


@pytest.mark.parametrize("profile", RATE_LIMITER, ids=ids(RATE_LIMITER))
def test_rate_limiter_never_exceeds_its_rate(client_url, start_proxy, profile):
    checks.check_rate_limiter_never_exceeds_its_rate(client_url(profile), start_proxy(), profile)


@pytest.mark.parametrize("profile", HEDGE, ids=ids(HEDGE))
def test_hedge_starts_no_earlier_than_its_delay(client_url, start_proxy, profile):
    checks.check_hedge_starts_no_earlier_than_its_delay(client_url(profile), start_proxy(), profile)


@pytest.mark.parametrize("profile", FALLBACK, ids=ids(FALLBACK))
def test_fallback_marks_failed_calls(client_url, start_proxy, profile):
    checks.check_fallback_marks_failed_calls(client_url(profile), start_proxy())


# -- the checks catch a wrong client --------------------------------------------------------------------
def _scaled(pattern: str, key: str, factor: float):
    def rewrite(step_pattern: str, params: dict) -> dict:
        if step_pattern == pattern:
            params[key] = type(params[key])(params[key] * factor)
        return params
    return rewrite


@pytest.mark.parametrize("profile", TIMEOUT, ids=ids(TIMEOUT))
def test_a_client_that_doubles_the_timeout_fails_conformance(client_url, start_proxy, profile):
    (key,) = changed_keys(profile.timeout(60), profile.timeout(61))
    with mismapped_client(client_url(profile), _scaled("timeout", key, 2)) as url:
        with pytest.raises(AssertionError, match="timeout .*median lateness"):
            checks.check_timeout_bounds_a_slow_call(url, start_proxy(), profile)


@pytest.mark.parametrize("profile", BULKHEAD, ids=ids(BULKHEAD))
def test_a_client_that_admits_one_more_fails_conformance(client_url, start_proxy, profile):
    (key,) = changed_keys(profile.bulkhead(2), profile.bulkhead(3))

    def one_more(pattern: str, params: dict) -> dict:        # "calls beyond the first" taken for "calls"
        if pattern == "bulkhead":
            params[key] += 1
        return params
    with mismapped_client(client_url(profile), one_more) as url:
        with pytest.raises(AssertionError, match="admitted 3 of 6"):
            checks.check_bulkhead_admits_at_most_its_limit(url, start_proxy(), profile)


@pytest.mark.parametrize(("profile", "pattern"), ADAPTIVE_LIMITER, ids=ADAPTIVE_LIMITER_IDS)
def test_adaptive_limiter_lowers_its_limit_when_latency_rises(client_url, start_proxy, profile, pattern):
    checks.check_adaptive_limiter_lowers_its_limit_when_latency_rises(client_url(profile), start_proxy(), profile,
                                                                      pattern)


@pytest.mark.parametrize(("profile", "pattern"), ADAPTIVE_LIMITER, ids=ADAPTIVE_LIMITER_IDS)
def test_a_client_that_pins_the_limit_fails_conformance(client_url, start_proxy, profile, pattern):
    """WithLimits(min, max, initial) (or a builder's minLimit) given the initial limit as the least, or
    Vegas's smoothing taken as 0: the limit cannot fall."""
    def pinned(step: str, params: dict) -> dict:
        if step == pattern:
            params.update(PINNED.get(pattern) or {"minLimit": params["initialLimit"]})
        return params
    with mismapped_client(client_url(profile), pinned) as url:
        with pytest.raises(AssertionError, match="its limit did not fall"):
            checks.check_adaptive_limiter_lowers_its_limit_when_latency_rises(url, start_proxy(), profile, pattern)


@pytest.mark.parametrize("profile", ADAPTIVE_THROTTLER, ids=ids(ADAPTIVE_THROTTLER))
def test_adaptive_throttler_refuses_in_proportion_to_failures(client_url, start_proxy, profile):
    checks.check_adaptive_throttler_refuses_in_proportion_to_failures(client_url(profile), start_proxy(), profile)


@pytest.mark.parametrize("profile", ADAPTIVE_THROTTLER, ids=ids(ADAPTIVE_THROTTLER))
def test_a_client_that_takes_the_threshold_as_a_fraction_throttles_too_much(client_url, start_proxy, profile):
    """50% handed over as 0.5 (points taken for a fraction): half the calls failing exceeds it."""
    (key,) = changed_keys(profile.adaptive_throttler(10), profile.adaptive_throttler(11))
    with mismapped_client(client_url(profile), _scaled("adaptive_throttler", key, 0.01)) as url:
        with pytest.raises(AssertionError, match="an adaptive throttler allowing [0-9]+% failures refused"):
            checks.check_adaptive_throttler_refuses_in_proportion_to_failures(url, start_proxy(), profile)


@pytest.mark.parametrize("profile", RATE_LIMITER, ids=ids(RATE_LIMITER))
def test_a_client_that_halves_the_period_fails_conformance(client_url, start_proxy, profile):
    before, after = profile.rate_limiter(2, 100, 1000), profile.rate_limiter(2, 101, 1000)
    (key,) = changed_keys(before, after)
    with mismapped_client(client_url(profile), _scaled("rate_limiter", key, 0.5)) as url:
        with pytest.raises(AssertionError, match="let calls start early"):
            checks.check_rate_limiter_never_exceeds_its_rate(url, start_proxy(), profile)


@pytest.mark.parametrize("profile", HEDGE, ids=ids(HEDGE))
def test_a_client_that_halves_the_hedge_delay_fails_conformance(client_url, start_proxy, profile):
    (key,) = changed_keys(profile.hedge(60), profile.hedge(61))
    with mismapped_client(client_url(profile), _scaled("hedge", key, 0.5)) as url:
        with pytest.raises(AssertionError, match="hedge .*early"):
            checks.check_hedge_starts_no_earlier_than_its_delay(url, start_proxy(), profile)


@pytest.mark.parametrize("profile", FALLBACK, ids=ids(FALLBACK))
def test_a_client_that_counts_fallbacks_as_successes_fails_conformance(client_url, start_proxy, profile):
    def fallback_as_success(reply: dict) -> dict:
        for call in reply.get("calls", []):
            if call.get("fallback"):
                call["ok"] = True
        return reply
    with rewriting_client(client_url(profile), lambda job: job, fallback_as_success) as url:
        with pytest.raises(AssertionError, match="a fallback is not a success"):
            checks.check_fallback_marks_failed_calls(url, start_proxy())


@pytest.mark.parametrize("profile", COMPOSED, ids=ids(COMPOSED))
def test_a_client_that_reverses_the_written_order_fails_conformance(client_url, start_proxy, profile):
    def reversed_order(job: dict) -> dict:
        job["strategy"] = job.get("strategy", [])[::-1]
        return job
    with rewriting_client(client_url(profile), reversed_order) as url:
        with pytest.raises(AssertionError, match="retry\\(timeout\\(call\\)\\)"):
            checks.check_retry_then_timeout_bounds_each_attempt(url, start_proxy(), profile)
