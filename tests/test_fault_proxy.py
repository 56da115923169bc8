"""The fault proxy in front of a real httpbin served by gunicorn, on loopback."""

from __future__ import annotations

import http.client
import json
import math
import socket
import subprocess
import sys
import time
import urllib.request

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(url)


@pytest.fixture(scope="module")
def httpbin():
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "gunicorn", "-b", f"127.0.0.1:{port}", "-w", "2",
                                "httpbin:app"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(f"http://127.0.0.1:{port}/status/200")
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def start_proxy(httpbin):
    started = []

    def start(seed: int | None = 7):
        process = subprocess.Popen([sys.executable, "-m", "rbl.services.fault_proxy", "--upstream",
                                    f"127.0.0.1:{httpbin}", "--seed", str(seed)],
                                   stdout=subprocess.PIPE, text=True)
        started.append(process)
        line = process.stdout.readline().split()
        assert line[0] == "listening", line
        return Proxy(int(line[1]), int(line[2]))

    yield start
    for process in started:
        process.terminate()
        assert process.wait(timeout=10) is not None


class Proxy:
    def __init__(self, data_port: int, admin_port: int):
        self.data_port, self.admin_port = data_port, admin_port

    def admin(self, method: str, path: str) -> tuple[int, str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.admin_port, timeout=5)
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, response.read().decode()

    def set_fault(self, **keys) -> None:
        query = "&".join(f"fault.http.{k.replace('__', '.')}={v}" for k, v in keys.items())
        assert self.admin("POST", f"/runtime_modify?{query}") == (200, "OK\n")

    def counters(self) -> dict[str, int]:
        stats = json.loads(self.admin("GET", "/stats?format=json")[1])["stats"]
        return {s["name"].removeprefix("http.ingress_http."): s["value"] for s in stats}

    def get_many(self, count: int, path: str = "/bytes/100") -> list[tuple[int, int]]:
        connection = http.client.HTTPConnection("127.0.0.1", self.data_port, timeout=10)
        out = []
        for _ in range(count):
            connection.request("GET", path)
            response = connection.getresponse()
            out.append((response.status, len(response.read())))
        connection.close()
        return out


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
