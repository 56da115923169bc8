"""Every client service survives hostile requests and keeps protocol.py's limits (hostile.py)."""

from __future__ import annotations

import pytest

from . import hostile
from .conftest import ids, selected_profiles
from .test_fuzz import fuzz_target_urls
from .wrong_clients import (counting_utf16_units, escaping_what_it_cannot_send, ignoring_text_after_the_json,
                            refusing_quotes, relaying_client, rewriting_client, routing_by_the_whole_target,
                            taking_control_characters)

ALL = selected_profiles()
RETRY = selected_profiles("retry_fixed")
# the checks catch a wrong client whatever it stands in front of: one real service is enough
ONE, ONE_RETRY = ALL[:1], RETRY[:1]


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_malformed_bodies_get_400(client_url, start_proxy, profile):
    hostile.check_malformed_bodies(client_url(profile), start_proxy())


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_instance_counts_characters_not_utf16_units(client_url, start_proxy, profile):
    hostile.check_instance_counts_characters(client_url(profile), start_proxy())


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_wrong_types_for_every_field_get_400(client_url, start_proxy, profile):
    hostile.check_wrong_types_for_every_field(client_url(profile), start_proxy())


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_wrong_parameter_values_get_400(client_url, start_proxy, profile):
    hostile.check_wrong_parameter_values(client_url(profile), start_proxy(), profile)


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_http_framing_errors_get_4xx(client_url, start_proxy, profile):
    hostile.check_framing(client_url(profile), start_proxy())


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_odd_methods_get_4xx(client_url, profile):
    hostile.check_odd_methods_get_4xx(client_url(profile))


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_a_reply_to_head_has_no_body(client_url, profile):
    hostile.check_head_has_no_body(client_url(profile))


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_routes_ignore_the_query_and_empty_lines_are_skipped(client_url, start_proxy, profile):
    hostile.check_request_targets_and_empty_lines(client_url(profile), start_proxy())


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_short_requests_time_out(client_url, start_proxy, profile):
    hostile.check_short_requests_time_out(client_url(profile), start_proxy())


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_only_the_target_is_reachable(client_url, start_proxy, profile):
    hostile.check_only_the_target_is_reachable(client_url(profile), start_proxy())


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_target_urls_follow_the_compilers_rule(client_url, start_proxy, profile):
    hostile.check_target_urls_follow_the_compilers_rule(client_url(profile), start_proxy())


@pytest.mark.parametrize("profile", RETRY, ids=ids(RETRY))
def test_max_duration_bounds_a_wait(client_url, start_proxy, profile):
    hostile.check_max_duration_bounds_a_wait(client_url(profile), start_proxy(), profile)


@pytest.mark.parametrize("profile", RETRY, ids=ids(RETRY))
def test_max_duration_bounds_many_attempts(client_url, start_proxy, profile):
    hostile.check_max_duration_bounds_many_attempts(client_url(profile), start_proxy(), profile)


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_max_duration_bounds_a_request_in_progress(client_url, start_proxy, profile):
    hostile.check_max_duration_bounds_a_request(client_url(profile), start_proxy())


@pytest.mark.parametrize("profile", RETRY, ids=ids(RETRY))
def test_request_budget_holds_within_a_call(client_url, start_proxy, profile):
    hostile.check_request_budget_within_a_call(client_url(profile), start_proxy(), profile)


@pytest.mark.parametrize("profile", RETRY, ids=ids(RETRY))
def test_connections_beyond_the_cap_get_503(client_url, start_proxy, profile):
    hostile.check_connection_cap(client_url(profile), start_proxy(), profile)


@pytest.mark.parametrize("profile", RETRY, ids=ids(RETRY))
def test_callers_beyond_the_cap_get_their_503_at_once(client_url, start_proxy, profile):
    hostile.check_over_capacity_is_answered_promptly(client_url(profile), start_proxy(), profile)


@pytest.mark.parametrize("profile", RETRY, ids=ids(RETRY))
def test_a_job_stops_when_its_caller_disconnects(client_url, start_proxy, profile):
    hostile.check_disconnect_stops_the_job(client_url(profile), start_proxy(), profile)


# -- the checks catch a client that gets these wrong -----------------------------------------------------
@pytest.mark.parametrize("profile", ONE, ids=ids(ONE))
def test_a_client_that_escapes_what_the_compiler_refuses_fails_conformance(client_url, start_proxy, profile):
    with rewriting_client(client_url(profile), escaping_what_it_cannot_send) as url:
        with pytest.raises(AssertionError, match="the compiler refuses it.*answered 200"):
            hostile.check_target_urls_follow_the_compilers_rule(url, start_proxy())
        with pytest.raises(AssertionError, match="the compiler refuses it.*answered 200"):
            fuzz_target_urls(url, start_proxy())


@pytest.mark.parametrize("profile", ONE, ids=ids(ONE))
def test_a_client_that_refuses_what_the_compiler_accepts_fails_conformance(client_url, start_proxy, profile):
    with rewriting_client(client_url(profile), refusing_quotes) as url:
        with pytest.raises(AssertionError, match="the compiler accepts its path.*answered 400"):
            hostile.check_target_urls_follow_the_compilers_rule(url, start_proxy())


@pytest.mark.parametrize("profile", ONE, ids=ids(ONE))
def test_a_client_that_drops_connect_fails_conformance(client_url, profile):
    with relaying_client(client_url(profile), drop_methods=(b"CONNECT",)) as url:
        with pytest.raises(AssertionError, match="dropped without a reply to b'CONNECT"):
            hostile.check_odd_methods_get_4xx(url)


@pytest.mark.parametrize("profile", ONE, ids=ids(ONE))
def test_a_client_that_answers_head_with_a_body_fails_conformance(client_url, profile):
    with relaying_client(client_url(profile), body_on_head=True) as url:
        with pytest.raises(AssertionError, match="HEAD reply had a body"):
            hostile.check_head_has_no_body(url)


@pytest.mark.parametrize("profile", ONE_RETRY, ids=ids(ONE_RETRY))
def test_a_client_slow_to_refuse_beyond_the_cap_fails_conformance(client_url, start_proxy, profile):
    with relaying_client(client_url(profile), hold_503_s=8.0) as url:
        with pytest.raises(AssertionError, match="got its 503 .* after its request"):
            hostile.check_over_capacity_is_answered_promptly(url, start_proxy(), profile)


@pytest.mark.parametrize("profile", ONE, ids=ids(ONE))
def test_a_client_that_counts_utf16_units_fails_conformance(client_url, start_proxy, profile):
    with rewriting_client(client_url(profile), counting_utf16_units) as url:
        with pytest.raises(AssertionError, match="instance of 1024 .* answered 400"):
            hostile.check_instance_counts_characters(url, start_proxy())


@pytest.mark.parametrize("profile", ONE, ids=ids(ONE))
def test_a_client_that_routes_by_the_whole_target_fails_conformance(client_url, start_proxy, profile):
    with relaying_client(client_url(profile), rewrite_request=routing_by_the_whole_target) as url:
        with pytest.raises(AssertionError, match=r"GET /health\?probe=1: 404"):
            hostile.check_request_targets_and_empty_lines(url, start_proxy())


@pytest.mark.parametrize("profile", ONE, ids=ids(ONE))
def test_a_client_that_takes_control_characters_in_headers_fails_conformance(client_url, start_proxy, profile):
    with relaying_client(client_url(profile), rewrite_request=taking_control_characters) as url:
        with pytest.raises(AssertionError, match=r"header b'X: a\\x00b': answered 200"):
            hostile.check_framing(url, start_proxy())


@pytest.mark.parametrize("profile", ONE, ids=ids(ONE))
def test_a_client_that_ignores_text_after_the_json_fails_conformance(client_url, start_proxy, profile):
    with relaying_client(client_url(profile), rewrite_request=ignoring_text_after_the_json) as url:
        with pytest.raises(AssertionError, match="a stray } after the value: answered 200"):
            hostile.check_malformed_bodies(url, start_proxy())
