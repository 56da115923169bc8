"""Checks of POST /call (protocol v1: one call per request, for open-loop load), for any client
service: each drives the service through the real fault proxy and counts what the proxy saw."""

from __future__ import annotations

import http.client
import json
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

from .checks import post
from .profiles import Profile

ABORT_ALL = {"abort__abort_percent": 100, "abort__http_status": 503}


def job_for(proxy, strategy: list[dict], **fields) -> dict:
    return {"strategy": strategy, "target_url": f"http://127.0.0.1:{proxy.data_port}/bytes/100", "successes": 3,
            "max_requests": 50, "share": "user", "instance": "call-conformance", "vu": 1, **fields}


def seen_by_target(proxy) -> int:
    return proxy.counters()["downstream_rq_total"]


def one_call(url: str, proxy, strategy: list[dict], **fields) -> dict:
    """POST /call; asserts the reply's shape (one call, /run's fields) and returns it."""
    status, reply = post(url, "/call", job_for(proxy, strategy, **fields))
    assert status == 200, f"POST /call answered {status}: {reply}"
    assert reply["protocol"] == 1 and isinstance(reply["total_us"], int), reply
    assert len(reply["calls"]) == 1 and "repeat" not in reply["calls"][0], \
        f"a /call reports exactly one call: {reply['calls']}"
    call = reply["calls"][0]
    assert isinstance(call["ok"], bool) and isinstance(call["requests"], list)
    return reply


def requests_of(reply: dict) -> list[list]:
    return reply["calls"][0]["requests"]


def check_health_names_the_endpoints(url: str) -> None:
    status, health = post(url, "/health", method="GET")
    assert status == 200 and {"/run", "/call"} <= set(health.get("endpoints", [])), health


def check_baseline_call(url: str, proxy, profile: Profile) -> None:
    for abort, ok, status in ((0, True, 200), (100, False, 503)):
        proxy.set_fault(abort__abort_percent=abort, abort__http_status=503)
        before = seen_by_target(proxy)
        reply = one_call(url, proxy, [], vu=9)
        assert reply["vu"] == 9 and reply["library"] == profile.library
        assert reply["stopped_by"] == "calls", reply
        (request,) = requests_of(reply)
        assert reply["calls"][0]["ok"] is ok and request[2] == status, reply
        assert len(request) == 3 and all(isinstance(v, int) for v in request)
        assert 0 <= request[0] and request[0] + request[1] <= reply["total_us"], "start_us counts from the call's start"
        assert seen_by_target(proxy) - before == 1, "a baseline /call sends exactly one request"


def check_retry_call(url: str, proxy, profile: Profile, attempts: int = 3) -> None:
    strategy = [{"pattern": "retry", "params": profile.retry_fixed(attempts, 1)}]
    for abort, ok, sent in ((100, False, attempts), (0, True, 1)):
        proxy.set_fault(abort__abort_percent=abort, abort__http_status=503)
        before = seen_by_target(proxy)
        reply = one_call(url, proxy, strategy, successes=1)
        assert reply["stopped_by"] == "calls" and reply["calls"][0]["ok"] is ok, reply
        assert len(requests_of(reply)) == sent, \
            f"retry with {attempts} attempts at {abort}% abort: {len(requests_of(reply))} requests, expected {sent}"
        assert seen_by_target(proxy) - before == sent


def check_retry_call_cut_by_max_requests(url: str, proxy, profile: Profile) -> None:
    proxy.set_fault(**ABORT_ALL)
    reply = one_call(url, proxy, [{"pattern": "retry", "params": profile.retry_fixed(10, 1)}], max_requests=2)
    call = reply["calls"][0]
    assert reply["stopped_by"] == "max_requests" and call.get("cut_short") is True and not call["ok"], reply
    assert len(call["requests"]) == 2


def check_call_cut_by_max_duration(url: str, proxy) -> None:
    proxy.set_fault(abort__abort_percent=0, delay__fixed_delay_percent=100, delay__fixed_duration_ms=2000)
    try:
        reply = one_call(url, proxy, [], max_duration_ms=100)
    finally:
        proxy.set_fault(delay__fixed_delay_percent=0, delay__fixed_duration_ms=0)
    call = reply["calls"][0]
    assert reply["stopped_by"] == "max_duration" and call.get("cut_short") is True and not call["ok"], reply
    assert [r[2] for r in call["requests"]] == [0], "the request interrupted by the deadline has status 0"
    assert reply["total_us"] < 2_000_000, "cut at max_duration_ms, not when the delayed answer came"


def check_shared_breaker_opened_by_calls(url: str, proxy, profile: Profile, instance: str) -> None:
    """share: client: /calls trip one breaker, and the next /call (and /run) with that key is rejected
    without a request; share: user gives each /call a fresh breaker."""
    proxy.set_fault(**ABORT_ALL)
    strategy = [{"pattern": "circuit_breaker", "params": profile.breaker(2, 30_000)}]
    shared = {"share": "client", "instance": instance}
    for vu in (1, 2):
        reply = one_call(url, proxy, strategy, vu=vu, **shared)
        assert len(requests_of(reply)) == 1 and not reply["calls"][0]["ok"], reply
    before = seen_by_target(proxy)
    rejected = one_call(url, proxy, strategy, vu=3, **shared)
    call = rejected["calls"][0]
    assert (call["ok"], call["requests"]) == (False, []) and rejected["stopped_by"] == "calls", \
        f"the breaker two /calls opened must reject the next /call without a request: {rejected}"
    assert call.get("rejected", "circuit_breaker") == "circuit_breaker", f"a breaker's refusal names it: {call}"
    status, run = post(url, "/run", job_for(proxy, strategy, successes=1, max_requests=1, max_duration_ms=200, **shared))
    assert status == 200 and not run["calls"][0]["requests"], "/run and /call share the instance of one key"
    assert seen_by_target(proxy) == before
    fresh = [one_call(url, proxy, strategy, share="user", instance=instance) for _ in range(3)]
    assert [len(requests_of(r)) for r in fresh] == [1, 1, 1], "share: user gives each /call its own breaker"


def check_bad_calls_are_rejected(url: str, proxy) -> None:
    target = f"http://127.0.0.1:{proxy.data_port}/bytes/100"
    for bad in ({"strategy": [{"pattern": "no_such_pattern", "params": {}}]}, {"successes": 0},
                {"max_requests": 0}, {"share": "everyone"}, {"target_url": "ftp://x/"},
                {"target_url": "http://127.0.0.1:1/elsewhere"}, {"max_duration_ms": 0}, {"vu": -1}):
        job = {"strategy": [], "target_url": target, "successes": 1, "max_requests": 5, "vu": 1, **bad}
        for route in ("/call", "/run"):
            status, reply = post(url, route, job)
            assert status == 400 and reply.get("error"), f"{route} {bad} answered {status}: {reply}"
    for raw in (b"", b"not json", b"[1, 2]", b"\xff\xfe"):
        status, reply = post_raw(url, "POST", "/call", raw)
        assert status == 400 and reply.get("error"), f"/call with body {raw!r} answered {status}: {reply}"


def check_routes(url: str) -> None:
    for method, path, expected in (("GET", "/call", 405), ("PUT", "/call", 405), ("DELETE", "/call", 405),
                                   ("POST", "/calls", 404), ("POST", "/call/1", 404), ("GET", "/nowhere", 404),
                                   ("GET", "/run", 405), ("POST", "/health", 405)):
        status, reply = post_raw(url, method, path, b"")
        assert status == expected and reply.get("error"), f"{method} {path} answered {status}: {reply}"


def check_calls_on_one_keep_alive_connection(url: str, proxy) -> None:
    """A load generator reuses its connections: /calls follow one another on one connection."""
    proxy.set_fault(abort__abort_percent=0)
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        for vu in range(5):
            connection.request("POST", "/call?n=1", body=json.dumps(job_for(proxy, [], vu=vu)))
            response = connection.getresponse()
            reply = json.loads(response.read())
            assert response.status == 200 and reply["vu"] == vu and len(reply["calls"]) == 1, reply
            assert not response.will_close, "a /call reply keeps the connection open"
    finally:
        connection.close()


def check_concurrent_calls_are_not_serialised(url: str, proxy, count: int = 50, delay_ms: int = 200) -> None:
    """`count` /calls at once, each waiting `delay_ms` on the target: all answered, and together in
    far less than one after another would take (count x delay_ms; bounded at a third of it)."""
    proxy.set_fault(abort__abort_percent=0, delay__fixed_delay_percent=100, delay__fixed_duration_ms=delay_ms)
    try:
        with ThreadPoolExecutor(max_workers=count) as pool:
            began = time.monotonic()
            replies = list(pool.map(lambda vu: post(url, "/call", job_for(proxy, [], vu=vu)), range(count)))
            took_s = time.monotonic() - began
    finally:
        proxy.set_fault(delay__fixed_delay_percent=0, delay__fixed_duration_ms=0)
    assert [status for status, _ in replies] == [200] * count, [r for r in replies if r[0] != 200][:3]
    assert sorted(reply["vu"] for _, reply in replies) == list(range(count))
    for _, reply in replies:
        (request,) = requests_of(reply)
        assert reply["calls"][0]["ok"] and request[1] >= delay_ms * 1000 * 0.9, reply
    serial_s = count * delay_ms / 1000
    assert took_s < serial_s / 3, f"{count} concurrent /calls of {delay_ms} ms took {took_s:.1f} s (serial: {serial_s:.0f} s)"


def post_raw(url: str, method: str, path: str, body: bytes) -> tuple[int, dict]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request(method, path, body=body, headers={"content-length": str(len(body))})
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def closed_connections_to(port: int) -> int:
    """Sockets in TIME_WAIT whose remote end is 127.0.0.1:port: connections this machine opened to
    it and closed (Linux's /proc/net/tcp; state 06 is TIME_WAIT)."""
    count = 0
    with open("/proc/net/tcp") as table:
        for line in list(table)[1:]:
            fields = line.split()
            if fields[3] == "06" and int(fields[2].split(":")[1], 16) == port:
                count += 1
    return count


def check_calls_reuse_connections_to_the_target(url: str, proxy, calls: int = 30) -> None:
    """/calls one after another go over the service's pooled keep-alive connections, not one
    connection each (which would leave one closed connection per call)."""
    proxy.set_fault(abort__abort_percent=0)
    before = closed_connections_to(proxy.data_port)
    for vu in range(calls):
        assert requests_of(one_call(url, proxy, [], vu=vu))[0][2] == 200
    closed = closed_connections_to(proxy.data_port) - before
    assert closed < calls // 3, f"{calls} /calls closed {closed} connections to the target: one per call, no pool"
