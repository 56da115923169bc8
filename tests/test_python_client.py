"""The Python client service against protocol v1, with the real fault proxy and httpbin."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys

import pytest

from .live_services import Proxy


@pytest.fixture
def client_service():
    started = []

    def start(library: str, proxy: Proxy | None = None, *extra: str) -> int:
        target = f"127.0.0.1:{proxy.data_port if proxy else 9}"
        process = subprocess.Popen([sys.executable, "-m", "rbl.clients.python.service", "--library", library,
                                    "--target", target, *extra], stdout=subprocess.PIPE, text=True)
        started.append(process)
        word, port = process.stdout.readline().split()
        assert word == "listening"
        return int(port)

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=10)


def call(port: int, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request(method, path, body=json.dumps(body) if body is not None else None)
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def job(proxy: Proxy, **fields) -> dict:
    return {"strategy": [], "target_url": f"http://127.0.0.1:{proxy.data_port}/status/200", "successes": 2,
            "max_requests": 10, "share": "user", "instance": "t", "vu": 1, **fields}


def test_health_names_the_library_and_its_patterns(client_service):
    status, health = call(client_service("pybreaker"), "GET", "/health")
    assert status == 200
    assert health["protocol"] == 1 and health["library"] == "pybreaker"
    assert health["patterns"] == ["baseline", "circuit_breaker"]
    assert health["version"] != "unknown"


@pytest.mark.parametrize("change, message", [
    ({"strategy": [{"pattern": "bulkhead", "params": {}}]}, "no pattern 'bulkhead'"),
    ({"strategy": [{"pattern": "retry", "params": {"attempts": 3}}]}, "unknown parameter(s) attempts"),
    ({"strategy": [{"pattern": "retry", "params": {"wait": "sometimes"}}]}, "`wait` must be one of"),
    ({"successes": 0}, "between 1 and"),
    ({"share": "everyone"}, "`share` must be one of"),
    ({"target_url": "ftp://x/"}, "http:// URL"),
])
def test_a_bad_job_is_a_400_with_the_reason(client_service, start_proxy, change, message):
    proxy = start_proxy()
    port = client_service("tenacity", proxy)
    status, reply = call(port, "POST", "/run", job(proxy, **change))
    assert status == 400
    assert message in reply["error"]


def test_baseline_reports_each_request_with_timing_and_status(client_service, start_proxy):
    proxy = start_proxy()
    status, reply = call(client_service("tenacity", proxy), "POST", "/run", job(proxy, successes=3))
    assert status == 200
    assert [c["ok"] for c in reply["calls"]] == [True, True, True]
    starts = [c["requests"][0][0] for c in reply["calls"]]
    assert starts == sorted(starts) and all(len(c["requests"]) == 1 for c in reply["calls"])
    assert all(c["requests"][0][2] == 200 for c in reply["calls"])
    assert reply["total_us"] >= sum(c["requests"][0][1] for c in reply["calls"])


def test_retry_waits_follow_the_exponential_backoff(client_service, start_proxy):
    proxy = start_proxy()
    proxy.admin("POST", "/runtime_modify?fault.http.abort.abort_percent=100")
    params = {"stop_after_attempt": 4, "wait": "exponential", "multiplier": 0.02, "exp_base": 2}
    status, reply = call(client_service("tenacity", proxy), "POST", "/run",
                         job(proxy, strategy=[{"pattern": "retry", "params": params}], max_requests=4))
    assert status == 200
    (only,) = reply["calls"]
    requests = only["requests"]
    assert [r[2] for r in requests] == [503] * 4
    gaps = [(b[0] - (a[0] + a[1])) / 1000 for a, b in zip(requests, requests[1:])]
    for gap, expected in zip(gaps, [20, 40, 80]):            # multiplier * exp_base^(k-1) ms
        assert expected - 1 <= gap <= expected + 15, gaps


@pytest.mark.parametrize("share, first_call_sends", [("user", True), ("client", False)])
def test_share_client_shares_one_breaker_across_virtual_users(client_service, start_proxy, share, first_call_sends):
    proxy = start_proxy()
    proxy.admin("POST", "/runtime_modify?fault.http.abort.abort_percent=100")
    port = client_service("pybreaker", proxy)
    breaker = [{"pattern": "circuit_breaker", "params": {"fail_max": 2, "reset_timeout": 30}}]
    first = job(proxy, strategy=breaker, share=share, max_requests=2, vu=1)
    assert call(port, "POST", "/run", first)[0] == 200              # trips the breaker
    status, reply = call(port, "POST", "/run", {**first, "vu": 2, "max_requests": 1, "successes": 1,
                                                "max_duration_ms": 300})
    assert status == 200
    if first_call_sends:
        assert reply["calls"][0]["requests"], "a fresh breaker lets the first call through"
        assert reply["stopped_by"] == "max_requests"
    else:
        # vu 1's open breaker is vu 2's too: every call is rejected without a request, and only
        # the time limit ends the loop
        assert all(not c["requests"] for c in reply["calls"])
        assert sum(c.get("repeat", 1) for c in reply["calls"]) > 1
        assert reply["stopped_by"] == "max_duration"
        assert reply["total_us"] >= 300_000


def test_a_mesh_policys_durations_are_bounded_in_milliseconds_and_its_counts_as_istio_does():
    from rbl.clients.python.strategies import LIBRARIES, MAX_MILLISECONDS, JobError
    retry = LIBRARIES["istio"]["retry"]
    retry({"attempts": 2**32 - 1, "perTryTimeout": MAX_MILLISECONDS, "backoff": MAX_MILLISECONDS})
    for bad in ({"perTryTimeout": MAX_MILLISECONDS + 1}, {"backoff": MAX_MILLISECONDS * 2}, {"attempts": 2**32}):
        with pytest.raises(JobError):
            retry(bad)
