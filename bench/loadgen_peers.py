"""rbl-load against vegeta (and wrk2 when one is installed) on a static upstream that is not the limit.

The upstream is nginx with one worker (`return 200` of a 2-byte body, keep-alive without a request
limit) on 127.0.0.1. For each rate the generators take turns (the order alternates from one round to
the next), each sending constant arrivals for `--seconds`; per generator and rate the medians over
the rounds of:
  achieved   requests sent / the time from the schedule's start to the last send, scaled so a
             generator on time achieves exactly the rate
  lag        actual minus intended send time, p50 and p99. rbl-load records each request's
             intended time; vegeta does not, so its intended times are i/rate from an origin
             chosen so that its most punctual request has no lag (that origin can only flatter it)
  CPU/1000   the generator process's user + system CPU per 1,000 requests sent (wait4's rusage:
             sending, reading answers and writing its records)
A rate is in schedule for a generator when its achieved rate is within 1% of the rate.

Goals: rbl-load's CPU per request at most vegeta's at every rate; its highest in-schedule
rate at least 2x vegeta's; on a machine with a quiet core, a p99 lag under 1 ms at 4,000/s. The
machine is shared: the load average is printed per rate, and the lag goal is only judged when the
load average before the rate was under (cores - 1), that is, when a core was quiet.

vegeta's CLI: `go install github.com/tsenart/vegeta/v12@v12.13.0` (on PATH, in $(go env GOPATH)/bin,
or --vegeta PATH). nginx: `apt-get install nginx-light`. wrk2 has no package in the registries
reached here (Debian's `wrk` is wrk 4, which has no constant-rate mode): given with --wrk2 PATH it
is listed for CPU and achieved rate only (it reports no per-request send times).

With --gc it also runs rbl-load at 4,000/s under Go's default collector (GOGC=100), its own
setting (GOGC=400) and none until 256 MiB (GOGC=off, GOMEMLIMIT=256MiB): collections, their longest
stop-the-world pause, the lag p99 and the CPU, from which rbl-load's setting was chosen.

python3 bench/loadgen_peers.py [--rates 1000,2000,4000,8000,16000] [--seconds 3] [--rounds 3] [--gc]
                               [--vegeta PATH] [--loadgen NAME=PATH ...]
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rbl.backends.local.processes import Service  # noqa: E402
from rbl.backends.net import free_port  # noqa: E402

HOST = "127.0.0.1"
NS = 1_000_000_000
IN_SCHEDULE = 0.99          # achieved / asked
LAG_GOAL_RATE, LAG_GOAL_MS = 4000, 1.0
CPU_GOAL, RATE_GOAL = 1.0, 2.0
CONNECTIONS = 2048          # what rbl gives rbl-load in a run (load_generator.LOADGEN_CONNECTIONS)


@dataclass
class Figures:
    achieved: float         # requests/s
    lag_p50_ms: float
    lag_p99_ms: float
    cpu_per_1000_ms: float
    requests: int


def percentile(values: list[float], q: float) -> float:
    """Nearest rank, as rbl-load's summary."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q * len(ordered)) - 1))]


def figures(rate: int, sent_s: list[float], intended_s: list[float], cpu_s: float) -> Figures:
    """From each request's actual and intended send time (seconds from the schedule's origin; the
    first request is intended at 0 and the last at (n - 1) / rate)."""
    lags = [(sent - intended) * 1000 for sent, intended in zip(sent_s, intended_s)]
    span = max(sent_s) + 1 / rate
    return Figures(len(sent_s) / span, percentile(lags, 0.5), percentile(lags, 0.99),
                   cpu_s / len(sent_s) * 1e6, len(sent_s))


def run_measured(argv: list[str], timeout_s: float, **popen) -> tuple[int, float]:
    """Run to the end; (exit code, the process's user + system CPU seconds)."""
    process = subprocess.Popen(argv, **popen)
    deadline = time.monotonic() + timeout_s
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return process.returncode, usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise RuntimeError(f"{argv[0]} did not finish within {timeout_s:g} s")
        time.sleep(0.02)


def rbl_load(binary: str, url: str, rate: int, seconds: float, work: Path, env: dict | None = None) -> Figures:
    count = int(rate * seconds)
    schedule, out = work / "schedule.txt", work / "rbl.csv"
    schedule.write_text("".join(f"{i * NS // rate}\n" for i in range(count)))
    code, cpu = run_measured([binary, "--url", url, "--schedule", str(schedule), "--out", str(out), "--timeout",
                              "5s", "--max-connections", str(CONNECTIONS)], seconds + 60,
                             stdout=subprocess.DEVNULL, stderr=(work / "rbl-load.err").open("wb"),
                             env=None if env is None else {**os.environ, **env})
    if code != 0:
        raise RuntimeError(f"rbl-load exited {code}: {(work / 'rbl-load.err').read_text()[-400:]}")
    with out.open(newline="") as f:
        rows = [(int(r["sent_ns"]) / NS, int(r["scheduled_ns"]) / NS) for r in csv.DictReader(f)]
    return figures(rate, [sent for sent, _ in rows], [intended for _, intended in rows], cpu)


def vegeta(binary: str, url: str, rate: int, seconds: float, work: Path) -> Figures:
    targets, results = work / "targets.txt", work / "vegeta.bin"
    targets.write_text(f"GET {url}\n")
    code, cpu = run_measured([binary, "attack", f"-rate={rate}/s", f"-duration={seconds:g}s", "-timeout=5s",
                              f"-targets={targets}", f"-output={results}"], seconds + 60,
                             stderr=(work / "vegeta.err").open("wb"))
    if code != 0:
        raise RuntimeError(f"vegeta exited {code}: {(work / 'vegeta.err').read_text()[-400:]}")
    encoded = subprocess.run([binary, "encode", "--to", "csv", str(results)], capture_output=True, text=True,
                             check=True).stdout          # not timed: the attack alone is
    sent = sorted((int(row[8]), int(row[0]) / NS) for row in csv.reader(encoded.splitlines()))
    # vegeta's constant pacer sends hit i at (i + 1) / rate after its start; the origin is chosen so
    # the most punctual hit has no lag
    origin = min(timestamp - seq / rate for seq, timestamp in sent)
    return figures(rate, [timestamp - origin for _, timestamp in sent], [seq / rate for seq, _ in sent], cpu)


def wrk2(binary: str, url: str, rate: int, seconds: float, work: Path) -> Figures:
    code, cpu = run_measured([binary, "-t1", "-c64", f"-d{seconds:g}s", f"-R{rate}", url], seconds + 60,
                             stdout=(work / "wrk2.out").open("wb"), stderr=subprocess.STDOUT)
    text = (work / "wrk2.out").read_text()
    requests = next((int(line.split()[0]) for line in text.splitlines() if "requests in" in line), 0)
    if code != 0 or not requests:
        raise RuntimeError(f"wrk2 exited {code}: {text[-400:]}")
    return Figures(requests / seconds, float("nan"), float("nan"), cpu / requests * 1e6, requests)


GC_SETTINGS = {"GOGC=100 (Go's default)": {"GOGC": "100"}, "GOGC=400 (rbl-load's)": {},
               "GOGC=off, GOMEMLIMIT=256MiB": {"GOGC": "off", "GOMEMLIMIT": "256MiB"}}
GC_LINE = re.compile(r"^gc \d+ @[\d.]+s \d+%: ([\d.]+)\+[\d.]+\+([\d.]+) ms clock")


def gc_settings(binary: str, url: str, rate: int, seconds: float, rounds: int, work: Path) -> None:
    """rbl-load at `rate` under each garbage-collector setting (gctrace on), alternating: how many
    collections, their longest stop-the-world pause, the lag tail and the CPU."""
    runs: dict[str, list[tuple]] = {name: [] for name in GC_SETTINGS}
    for round_number in range(rounds):
        for name in (list(GC_SETTINGS) if round_number % 2 == 0 else list(reversed(GC_SETTINGS))):
            f = rbl_load(binary, url, rate, seconds, work, {**GC_SETTINGS[name], "GODEBUG": "gctrace=1"})
            pauses = [float(m[1]) + float(m[2]) for line in (work / "rbl-load.err").read_text().splitlines()
                      if (m := GC_LINE.match(line))]
            runs[name].append((len(pauses), max(pauses, default=0.0), f.lag_p99_ms, f.cpu_per_1000_ms))
    print(f"\nrbl-load at {rate}/s under each GC setting ({rounds} rounds of {seconds:g} s, medians; "
          f"load average {os.getloadavg()[0]:.2f})")
    print(f"  {'setting':<30} {'collections':>11} {'longest STW':>11} {'lag p99':>9} {'CPU ms/1000':>11}")
    for name, values in runs.items():
        collections, pause, p99, cpu = (statistics.median(v[i] for v in values) for i in range(4))
        print(f"  {name:<30} {collections:11.0f} {pause:9.2f}ms {p99:7.3f}ms {cpu:11.1f}")


def find_vegeta(given: str | None) -> str | None:
    if given:
        return given
    if shutil.which("vegeta"):
        return shutil.which("vegeta")
    try:
        gopath = subprocess.run(["go", "env", "GOPATH"], capture_output=True, text=True).stdout.strip()
    except OSError:
        gopath = ""
    candidate = Path(gopath or Path.home() / "go") / "bin" / "vegeta"
    return str(candidate) if candidate.is_file() else None


def start_nginx(nginx: str, directory: Path) -> tuple[Service, str]:
    port = free_port()
    temp = " ".join(f"{kind}_temp_path {directory / kind};" for kind in ("client_body", "proxy", "fastcgi",
                                                                          "uwsgi", "scgi"))
    conf = directory / "nginx.conf"
    conf.write_text(f"""worker_processes 1;
pid {directory / 'nginx.pid'};
error_log {directory / 'error.log'} warn;
daemon off;
events {{ worker_connections 16384; }}
http {{
  access_log off;
  {temp}
  server {{ listen {HOST}:{port} backlog=4096; keepalive_requests 100000000;
           location / {{ default_type text/plain; return 200 "ok"; }} }}
}}
""")
    service = Service("nginx", [nginx, "-p", str(directory), "-c", str(conf)], directory / "nginx.log")
    url = f"http://{HOST}:{port}/"
    deadline = time.monotonic() + 20
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return service, url
        except OSError:
            if time.monotonic() > deadline or not service.alive:
                service.stop(grace=2.0)
                raise RuntimeError(f"nginx did not start: {(directory / 'error.log').read_text()[-400:]}")
            time.sleep(0.05)


def report(rates: list[int], medians: dict[str, dict[int, Figures]], loads: dict[int, float],
           baseline: str, peer: str | None) -> bool:
    names = list(medians)
    print(f"\n{'rate/s':>7}  {'generator':<14} {'achieved/s':>10} {'lag p50':>9} {'lag p99':>9} "
          f"{'CPU ms/1000':>11}  load")
    for rate in rates:
        for name in names:
            f = medians[name].get(rate)
            if f is None:
                continue
            print(f"{rate:7d}  {name:<14} {f.achieved:10.1f} {f.lag_p50_ms:7.3f}ms {f.lag_p99_ms:7.3f}ms "
                  f"{f.cpu_per_1000_ms:11.1f}  {loads[rate]:.2f}")
    if peer is None:
        print("\nvegeta not found: no goals judged (go install github.com/tsenart/vegeta/v12@v12.13.0)")
        return False

    def highest(name: str) -> int:
        held = [rate for rate in rates if rate in medians[name] and medians[name][rate].achieved >= IN_SCHEDULE * rate]
        return max(held, default=0)

    ok = True
    print()
    ratios = {rate: medians[baseline][rate].cpu_per_1000_ms / medians[peer][rate].cpu_per_1000_ms for rate in rates
              if rate in medians[baseline] and rate in medians[peer]}
    cpu_met = all(ratio <= CPU_GOAL for ratio in ratios.values())
    ok &= cpu_met
    print(f"CPU per request, {baseline} / {peer}, per rate: "
          + ", ".join(f"{rate}: {ratio:.2f}" for rate, ratio in ratios.items())
          + f" (goal <= {CPU_GOAL:g} at every rate): {'met' if cpu_met else 'MISSED'}")
    ours, theirs = highest(baseline), highest(peer)
    rate_met = ours >= RATE_GOAL * theirs and ours > 0
    ok &= rate_met
    beyond = " (the highest rate measured: raise --rates to see further)" if ours == max(rates) else ""
    print(f"highest in-schedule rate (achieved within {1 - IN_SCHEDULE:.0%}): {baseline} {ours}/s{beyond}, "
          f"{peer} {theirs}/s: {ours / theirs if theirs else float('inf'):.2f}x (goal >= {RATE_GOAL:g}x): "
          f"{'met' if rate_met else 'MISSED'}")
    lag = medians[baseline].get(LAG_GOAL_RATE)
    if lag is None:
        print(f"lag p99 at {LAG_GOAL_RATE}/s: not measured (add {LAG_GOAL_RATE} to --rates)")
    elif loads[LAG_GOAL_RATE] >= (os.cpu_count() or 2) - 1:
        print(f"lag p99 at {LAG_GOAL_RATE}/s: {lag.lag_p99_ms:.3f} ms (goal < {LAG_GOAL_MS:g} ms with a quiet core): "
              f"NOT JUDGED, no quiet core (load average {loads[LAG_GOAL_RATE]:.2f} on {os.cpu_count()} cores)")
    else:
        lag_met = lag.lag_p99_ms < LAG_GOAL_MS
        ok &= lag_met
        print(f"lag p99 at {LAG_GOAL_RATE}/s: {lag.lag_p99_ms:.3f} ms (goal < {LAG_GOAL_MS:g} ms, load average "
              f"{loads[LAG_GOAL_RATE]:.2f}): {'met' if lag_met else 'MISSED'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="1000,2000,4000,8000,16000")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--vegeta", help="vegeta's CLI (default: on PATH or in $(go env GOPATH)/bin)")
    parser.add_argument("--wrk2", help="a wrk2 binary, if you have one (none is packaged here)")
    parser.add_argument("--gc", action="store_true",
                        help=f"also rbl-load at {LAG_GOAL_RATE}/s under each garbage-collector setting")
    parser.add_argument("--loadgen", action="append", default=[], metavar="NAME=PATH",
                        help="another rbl-load build to compare (repeatable); rbl's own is built as rbl builds it")
    args = parser.parse_args()
    rates = [int(rate) for rate in args.rates.split(",")]
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").is_file() else None)
    if nginx is None:
        print("nginx is needed as the static upstream (apt-get install nginx-light)", file=sys.stderr)
        return 2
    from rbl.targets.client_builds import client_artifact
    ours = str(client_artifact("loadgen"))
    generators = {"rbl-load": lambda url, rate, seconds, work, b=ours: rbl_load(b, url, rate, seconds, work)}
    for given in args.loadgen:
        name, _, path = given.partition("=")
        generators[name] = lambda url, rate, seconds, work, b=path: rbl_load(b, url, rate, seconds, work)
    peer = find_vegeta(args.vegeta)
    if peer:
        generators["vegeta"] = lambda url, rate, seconds, work, b=peer: vegeta(b, url, rate, seconds, work)
    if args.wrk2:
        generators["wrk2"] = lambda url, rate, seconds, work, b=args.wrk2: wrk2(b, url, rate, seconds, work)
    else:
        print("wrk2: not measured (no registry package builds it here; --wrk2 PATH if you have one)")
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; {args.rounds} rounds of {args.seconds:g} s "
          f"per generator and rate, alternating; upstream nginx, one worker")
    measured: dict[str, dict[int, list[Figures]]] = {name: {} for name in generators}
    loads: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="rbl-loadgen-peers-") as temporary:
        work = Path(temporary)
        service, url = start_nginx(nginx, work)
        try:
            for rate in rates:
                loads[rate] = os.getloadavg()[0]
                for round_number in range(args.rounds):
                    order = list(generators) if round_number % 2 == 0 else list(reversed(generators))
                    for name in order:
                        measured[name].setdefault(rate, []).append(generators[name](url, rate, args.seconds, work))
                print(f"  {rate}/s done (load average {loads[rate]:.2f} before it)", flush=True)
            if args.gc:
                gc_settings(ours, url, LAG_GOAL_RATE, args.seconds, args.rounds, work)
        finally:
            service.stop(grace=2.0)
    medians = {name: {rate: Figures(*(statistics.median(getattr(f, field) for f in runs)
                                      for field in Figures.__dataclass_fields__))
                      for rate, runs in by_rate.items()} for name, by_rate in measured.items()}
    ok = report(rates, medians, loads, "rbl-load", "vegeta" if peer else None)
    print(f"load average after {os.getloadavg()[0]:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
