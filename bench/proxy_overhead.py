"""Is the fault proxy ever the bottleneck? And how fast is a fault change?

Starts the local backend's target (httpbin, gunicorn gthread) and rbl's fault proxy exactly as
`rbl run` does, then, alternating direct and through-proxy runs so that machine noise hits both:
  - throughput at 50 concurrent keep-alive connections (target: proxy >= 85% of direct),
  - median latency at 1 connection (target: the proxy adds <= 1 ms),
  - fault changes applied and read back through the admin API (target: < 50 ms).
Ratios are medians over the alternations, measured in one run.

The load comes from wrk when it is installed (apt-get install wrk): a C load generator measures
the proxy, where bench/loadgen.py (Python, the fallback) was slower than the proxy and flattered
it (with wrk, rbl/direct was 0.75 where loadgen.py said above 0.85). The bench says
which one it used. bench/proxy_peers.py compares the proxy with nginx and Toxiproxy.

python3 bench/proxy_overhead.py [--rounds 5] [--seconds 3] [--loadgen wrk|python]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rbl.backends.local.backend import LocalOptions, LocalServices  # noqa: E402

LOADGEN = Path(__file__).with_name("loadgen.py")


def wrk_load(port: int, connections: int, seconds: float) -> dict:
    """wrk's req/s and median latency, in loadgen.py's shape."""
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency",
                          f"http://127.0.0.1:{port}/bytes/100"], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s*([0-9.]+)", out)[1])
    value, unit = re.search(r"^\s*50%\s+([0-9.]+)(us|ms|s)\s*$", out, re.M).groups()
    p50_ms = float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    return {"rps": rps, "latency_ms": {"p50": p50_ms}}


def python_load(port: int, connections: int, seconds: float) -> dict:
    out = subprocess.run([sys.executable, str(LOADGEN), "--port", str(port), "--connections", str(connections),
                          "--seconds", str(seconds), "--path", "/bytes/100"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def fault_changes(backend: LocalServices, count: int) -> list[float]:
    timings = []
    for i in range(count):
        fault = {"kind": "abort", "rate": (i % 2) * 50, "status": 503}
        begin = time.perf_counter()
        backend.fault.apply(fault)               # POST /runtime_modify, then GET /runtime to confirm
        timings.append((time.perf_counter() - begin) * 1000)
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--workers", type=int, default=LocalOptions().workers,
                        help="gunicorn workers (default: rbl run's, one per core)")
    parser.add_argument("--loadgen", choices=("wrk", "python"), default="wrk" if shutil.which("wrk") else "python",
                        help="load generator (default: wrk when installed, else bench/loadgen.py)")
    args = parser.parse_args()
    load = wrk_load if args.loadgen == "wrk" else python_load
    print(f"load generator: {'wrk' if load is wrk_load else 'bench/loadgen.py (install wrk for a faster one)'}")
    with tempfile.TemporaryDirectory() as logs, \
            LocalServices(Path(logs), {}, LocalOptions(workers=args.workers, proxy="builtin")) as backend:
        load(backend.target_port, 50, 1.0)                               # warm up both paths
        load(backend.proxy_port, 50, 1.0)
        ratios, direct_rps, proxy_rps, added_ms = [], [], [], []
        for _ in range(args.rounds):
            direct = load(backend.target_port, 50, args.seconds)
            proxied = load(backend.proxy_port, 50, args.seconds)
            direct_rps.append(direct["rps"])
            proxy_rps.append(proxied["rps"])
            ratios.append(proxied["rps"] / direct["rps"])
            one_direct = load(backend.target_port, 1, args.seconds / 2)
            one_proxied = load(backend.proxy_port, 1, args.seconds / 2)
            added_ms.append(one_proxied["latency_ms"]["p50"] - one_direct["latency_ms"]["p50"])
        changes = fault_changes(backend, 200)
    ratio = statistics.median(ratios)
    added = statistics.median(added_ms)
    change_p50, change_max = statistics.median(changes), max(changes)
    print(f"throughput at 50 connections: direct {statistics.median(direct_rps):.0f} req/s, "
          f"through the proxy {statistics.median(proxy_rps):.0f} req/s")
    print(f"  proxy/direct per alternation: {', '.join(f'{r:.0%}' for r in ratios)}; "
          f"median {ratio:.1%} (target >= 85%): {'ok' if ratio >= 0.85 else 'MISSED'}")
    print(f"added median latency at 1 connection: {', '.join(f'{a:+.3f}' for a in added_ms)} ms; "
          f"median {added:+.3f} ms (target <= 1 ms): {'ok' if added <= 1.0 else 'MISSED'}")
    print(f"fault change applied and read back: median {change_p50:.2f} ms, max {change_max:.2f} ms "
          f"over {len(changes)} changes (target < 50 ms): {'ok' if change_max < 50 else 'MISSED'}")
    return 0 if ratio >= 0.85 and added <= 1.0 and change_max < 50 else 1


if __name__ == "__main__":
    sys.exit(main())
