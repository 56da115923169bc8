"""Every client service survives hostile requests and keeps protocol.py's limits (hostile.py)."""

from __future__ import annotations

import pytest

from . import hostile
from .conftest import ids, selected_profiles

ALL = selected_profiles()
RETRY = selected_profiles("retry_fixed")


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_malformed_bodies_get_400(client_url, start_proxy, profile):
    hostile.check_malformed_bodies(client_url(profile), start_proxy())


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
def test_short_requests_time_out(client_url, start_proxy, profile):
    hostile.check_short_requests_time_out(client_url(profile), start_proxy())


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_only_the_target_is_reachable(client_url, start_proxy, profile):
    hostile.check_only_the_target_is_reachable(client_url(profile), start_proxy())


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
def test_a_job_stops_when_its_caller_disconnects(client_url, start_proxy, profile):
    hostile.check_disconnect_stops_the_job(client_url(profile), start_proxy(), profile)
