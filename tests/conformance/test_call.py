"""POST /call (one call per request, for open-loop load) on every client service rbl ships, against
the real fault proxy and httpbin (conftest.py starts each service as the conformance suite does)."""

from __future__ import annotations

import os

import pytest

from . import call_checks as checks
from .conftest import ids, selected_profiles
from .mesh_sidecar import mesh_rig

ALL = selected_profiles()
RETRY = selected_profiles("retry_fixed")
BREAKER = selected_profiles("breaker")


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_health_names_both_job_routes(client_url, profile):
    checks.check_health_names_the_endpoints(client_url(profile))


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_a_baseline_call_sends_one_request(client_url, start_proxy, profile):
    checks.check_baseline_call(client_url(profile), start_proxy(), profile)


@pytest.mark.parametrize("profile", RETRY, ids=ids(RETRY))
def test_a_retry_call_sends_its_attempts_once(client_url, start_proxy, profile):
    checks.check_retry_call(client_url(profile), start_proxy(), profile)


@pytest.mark.parametrize("profile", RETRY, ids=ids(RETRY))
def test_a_call_is_cut_short_by_max_requests(client_url, start_proxy, profile):
    checks.check_retry_call_cut_by_max_requests(client_url(profile), start_proxy(), profile)


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_a_call_is_cut_short_by_max_duration(client_url, start_proxy, profile):
    checks.check_call_cut_by_max_duration(client_url(profile), start_proxy())


@pytest.mark.parametrize("profile", BREAKER, ids=ids(BREAKER))
def test_a_shared_breaker_opened_by_calls_rejects_the_next_call(client_url, start_proxy, profile):
    checks.check_shared_breaker_opened_by_calls(client_url(profile), start_proxy(), profile,
                                                instance=f"call-breaker-{profile.name}")


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_bad_calls_get_400_as_bad_runs_do(client_url, start_proxy, profile):
    checks.check_bad_calls_are_rejected(client_url(profile), start_proxy())


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_routes_404_and_405(client_url, profile):
    checks.check_routes(client_url(profile))


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_calls_follow_one_another_on_a_keep_alive_connection(client_url, start_proxy, profile):
    checks.check_calls_on_one_keep_alive_connection(client_url(profile), start_proxy())


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="counts closed connections in Linux's /proc/net/tcp")
@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_calls_reuse_pooled_connections_to_the_target(client_url, start_proxy, profile):
    checks.check_calls_reuse_connections_to_the_target(client_url(profile), start_proxy())


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_concurrent_calls_are_not_serialised(client_url, start_proxy, profile):
    checks.check_concurrent_calls_are_not_serialised(client_url(profile), start_proxy())


# -- the mesh client: one /call is one request to its sidecar, which applies the policy ------------
@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    with mesh_rig(tmp_path_factory.mktemp("mesh-call")) as started:
        yield started


def mesh_call(rig, strategy: list[dict]) -> dict:
    job = {"strategy": strategy, "target_url": rig.url("/status/200"), "successes": 1, "max_requests": 5,
           "share": "user", "instance": "mesh-call", "vu": 4}
    status, reply = checks.post(rig.client_url, "/call", job)
    assert status == 200 and len(reply["calls"]) == 1 and reply["stopped_by"] == "calls", (status, reply)
    return reply["calls"][0]


def test_a_mesh_call_is_one_request_to_the_sidecar_with_its_flags(mesh):
    mesh.proxy.set_fault(abort__abort_percent=0, delay__fixed_delay_percent=0, delay__fixed_duration_ms=0)
    call = mesh_call(mesh, mesh.configure("baseline", {}))
    assert call["ok"] and [r[2:] for r in call["requests"]] == [[200, "-"]], call
    # the sidecar retries (twice, on a 503): still one request of the client's, three upstream
    strategy = mesh.configure("retry", {"attempts": 2, "retryOn": "503"})
    mesh.proxy.set_fault(abort__abort_percent=100, abort__http_status=503)
    before, _ = mesh.upstream_counts()
    call = mesh_call(mesh, strategy)
    (request,) = call["requests"]
    assert not call["ok"] and request[2] == 503 and isinstance(request[3], str) and request[3], call
    assert mesh.upstream_counts()[0] - before == 3
