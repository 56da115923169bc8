"""The fault proxy in front of a real httpbin served by gunicorn, on loopback."""

from __future__ import annotations

import json
import math
import time


def test_no_fault_passes_everything_through(start_proxy):
    proxy = start_proxy()
    assert proxy.admin("GET", "/ready") == (200, "LIVE\n")
    assert proxy.get_many(50) == [(200, 100)] * 50
    assert proxy.counters() == {"downstream_rq_total": 50, "fault.aborts_injected": 0,
                                "fault.delays_injected": 0, "upstream_rq_failed": 0}


def test_full_abort_replies_with_the_configured_status(start_proxy):
    proxy = start_proxy()
    proxy.set_fault(abort__abort_percent=100, abort__http_status=418)
    assert {status for status, _ in proxy.get_many(20)} == {418}
    assert proxy.counters()["fault.aborts_injected"] == 20


def test_realized_rate_within_binomial_bounds(start_proxy):
    proxy = start_proxy(seed=123)
    proxy.set_fault(abort__abort_percent=30)
    n, p = 600, 0.3
    aborted = sum(status == 503 for status, _ in proxy.get_many(n))
    assert abs(aborted - n * p) <= 4 * math.sqrt(n * p * (1 - p))
    assert proxy.counters()["fault.aborts_injected"] == aborted


def test_same_seed_same_decisions(start_proxy):
    sequences = []
    for _ in range(2):
        proxy = start_proxy(seed=99)
        proxy.set_fault(abort__abort_percent=50)
        sequences.append([status for status, _ in proxy.get_many(60)])
    assert sequences[0] == sequences[1]
    assert 0 < sequences[0].count(503) < 60


def test_delay_then_abort(start_proxy):
    proxy = start_proxy()
    proxy.set_fault(delay__fixed_delay_percent=100, delay__fixed_duration_ms=150, abort__abort_percent=100)
    start = time.monotonic()
    assert proxy.get_many(2) == [(503, len(b"fault filter abort"))] * 2
    assert time.monotonic() - start >= 0.3
    counters = proxy.counters()
    assert counters["fault.delays_injected"] == 2 and counters["fault.aborts_injected"] == 2


def test_admin_validates_and_resets(start_proxy):
    proxy = start_proxy()
    status, body = proxy.admin("POST", "/runtime_modify?fault.http.abort.bogus=1")
    assert status == 400 and "unknown runtime key" in body
    assert proxy.admin("POST", "/runtime_modify?fault.http.abort.abort_percent=abc")[0] == 400
    assert proxy.admin("GET", "/runtime_modify?fault.http.abort.abort_percent=1")[0] == 405
    proxy.set_fault(abort__abort_percent=25)
    runtime = json.loads(proxy.admin("GET", "/runtime?format=json")[1])["entries"]
    assert float(runtime["fault.http.abort.abort_percent"]["final_value"]) == 25
    proxy.get_many(5)
    assert proxy.admin("POST", "/reset_counters") == (200, "OK\n")
    assert set(proxy.counters().values()) == {0}


def test_requests_without_a_fault_leave_the_seeded_sequence_alone(start_proxy):
    """The runner probes the target (fault cleared) before each round: the decisions of the
    faulted requests must not depend on how many such requests came first."""
    sequences = []
    for probes in (0, 7):
        proxy = start_proxy(seed=5)
        proxy.get_many(probes)
        proxy.set_fault(abort__abort_percent=50)
        sequences.append([status for status, _ in proxy.get_many(40)])
    assert sequences[0] == sequences[1] and 503 in sequences[0] and 200 in sequences[0]
