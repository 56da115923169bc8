"""Every client service rbl ships passes the conformance checks (checks.py), against the real
fault proxy and httpbin; a client whose parameter mapping is wrong does not."""

from __future__ import annotations

from dataclasses import replace

import pytest

from . import checks
from .conftest import PROXIES, ids, selected_profiles
from .neutral import native_config
from .mismapped import changed_keys as mismapped_changed, mismapped_client

# every check against each fault proxy rbl runs on: the built-in one and real Envoy
pytestmark = pytest.mark.parametrize("conformance_proxy", PROXIES, indirect=True)

ALL = selected_profiles()
RETRY = selected_profiles("retry_fixed")
BREAKER = selected_profiles("breaker")


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_health(client_url, profile):
    checks.check_health(client_url(profile), profile)


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_reply_shape(client_url, start_proxy, profile):
    checks.check_reply_shape(client_url(profile), start_proxy(), profile)


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_bad_jobs_are_rejected(client_url, start_proxy, profile):
    checks.check_bad_jobs_are_rejected(client_url(profile), start_proxy())


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_baseline_sends_one_request_per_call(client_url, start_proxy, profile):
    checks.check_baseline_sends_one_request_per_call(client_url(profile), start_proxy())


@pytest.mark.parametrize("profile", RETRY, ids=ids(RETRY))
@pytest.mark.parametrize("attempts", [1, 3, 6])
def test_retry_makes_exactly_k_requests(client_url, start_proxy, profile, attempts):
    checks.check_retry_makes_exactly_k_requests(client_url(profile), start_proxy(), profile, attempts)


@pytest.mark.parametrize("profile", RETRY, ids=ids(RETRY))
def test_retry_fixed_waits(client_url, start_proxy, profile):
    checks.check_retry_fixed_waits(client_url(profile), start_proxy(), profile)


@pytest.mark.parametrize("profile", RETRY, ids=ids(RETRY))
def test_retry_exponential_waits(client_url, start_proxy, profile):
    checks.check_retry_exponential_waits(client_url(profile), start_proxy(), profile)


@pytest.mark.parametrize("profile", BREAKER, ids=ids(BREAKER))
def test_breaker_opens_rejects_and_probes(client_url, start_proxy, profile):
    checks.check_breaker_opens_rejects_and_probes(client_url(profile), start_proxy(), profile)


# One neutral value, mapped by rbl onto each library: every client must wait the same sequence.
NEUTRAL_RETRY = "retry(attempts: 5, backoff: exponential(initial: 15ms, multiplier: 1.5))"
NEUTRAL_RETRY_WAITS = [15 * 1.5 ** (k - 1) for k in range(1, 5)]       # 15, 22.5, 33.75, 50.625 ms


@pytest.mark.parametrize("profile", RETRY, ids=ids(RETRY))
def test_retry_from_a_neutral_value_waits_the_neutral_sequence(client_url, start_proxy, profile):
    value, waits = profile.neutral_retry or (NEUTRAL_RETRY, NEUTRAL_RETRY_WAITS)
    native = native_config(profile.library, "retry", value)
    checks.check_retry_neutral_waits(client_url(profile), start_proxy(), native, waits)


NEUTRAL_BREAKER = [p for p in BREAKER if p.neutral_breaker]


@pytest.mark.parametrize("profile", NEUTRAL_BREAKER, ids=ids(NEUTRAL_BREAKER))
def test_breaker_from_a_neutral_value(client_url, start_proxy, profile):
    def neutral_breaker(failures: int, open_ms: int) -> dict:
        value = f"circuit_breaker(open_when: consecutive_failures({failures}), open_for: {open_ms}ms)"
        return native_config(profile.library, "circuit_breaker", value)
    checks.check_breaker_opens_rejects_and_probes(client_url(profile), start_proxy(),
                                                  replace(profile, breaker=neutral_breaker))


@pytest.mark.parametrize("profile", BREAKER, ids=ids(BREAKER))
def test_share_client_shares_one_breaker(client_url, start_proxy, profile):
    checks.check_share_client_shares_one_breaker(client_url(profile), start_proxy(), profile)


# -- the checks catch a mis-mapped parameter ------------------------------------------------------------
@pytest.mark.parametrize("profile", RETRY, ids=ids(RETRY))
def test_a_client_that_mis_maps_the_attempts_fails_conformance(client_url, start_proxy, profile):
    (attempts_key,) = mismapped_changed(profile.retry_fixed(3, 1), profile.retry_fixed(4, 1))

    def off_by_one(pattern: str, params: dict) -> dict:      # "retries" taken for "attempts"
        if pattern == "retry":
            params[attempts_key] += 1
        return params

    with mismapped_client(client_url(profile), off_by_one) as url:
        with pytest.raises(AssertionError, match="requests per call"):
            checks.check_retry_makes_exactly_k_requests(url, start_proxy(), profile, 3)


@pytest.mark.parametrize("profile", BREAKER, ids=ids(BREAKER))
def test_a_client_that_mis_maps_the_open_duration_fails_conformance(client_url, start_proxy, profile):
    (open_key,) = mismapped_changed(profile.breaker(2, 100), profile.breaker(2, 200))

    def doubled(pattern: str, params: dict) -> dict:         # a unit slip: twice the open duration
        if pattern == "circuit_breaker":
            params[open_key] *= 2
        return params

    with mismapped_client(client_url(profile), doubled) as url:
        with pytest.raises(AssertionError, match="probe"):
            checks.check_breaker_opens_rejects_and_probes(url, start_proxy(), profile)


@pytest.mark.parametrize("profile", [p for p in RETRY if p.library == "resilience4j"], ids=lambda p: p.name)
def test_stepwise_truncation_fails_the_neutral_waits(client_url, start_proxy, profile):
    # ofExponentialBackoff truncates each step (15, 22, 33, 49, 73, 109, 163 ms) where EXPONENTIAL_EXACT
    # gives 15, 22.5, ... 170.9: over seven waits the truncation grows to 8 ms, well beyond what a
    # loaded machine adds to a wait, so the check sees it every time (after four waits it is 1.6 ms,
    # which a descheduled thread can hide)
    value = "retry(attempts: 8, backoff: exponential(initial: 15ms, multiplier: 1.5))"
    native = {**native_config(profile.library, "retry", value), "intervalFunction": "EXPONENTIAL_BACKOFF"}
    with pytest.raises(AssertionError, match="neutral value.*early"):
        checks.check_retry_neutral_waits(client_url(profile), start_proxy(), native,
                                         [15 * 1.5 ** (k - 1) for k in range(1, 8)])
