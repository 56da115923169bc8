"""The mesh client's services for its conformance checks, all real and on 127.0.0.1: a recording
target (an HTTP/1.1 server that keeps every request's arrival and departure and how many requests
it held at once), rbl's fault proxy (real Envoy, as `rbl run` picks it) in front of it, a sidecar
Envoy whose configuration rbl's own Sidecar writes, and the mesh client service (`--library istio`)
whose every request goes through that sidecar; wired as the local backend wires them."""

from __future__ import annotations

import math
import select
import subprocess
import sys
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

from rbl.targets.envoy_binary import INSTALL_ADVICE, envoy_binary, envoy_version
from rbl.backends.net import HOST, free_port
from rbl.mesh.sidecar import Sidecar
from rbl.mesh.sidecar_config import SidecarAddresses
from rbl.runner.closed_loop import strategy_for

from ..live_services import Proxy, start_envoy, wait_for
from .checks import post

READY_TIMEOUT_S = 30.0


# -- the recording target ----------------------------------------------------------------------------
@dataclass
class Arrival:
    path: str                 # with its query: the checks tell virtual users apart by it
    arrived: float            # time.perf_counter() seconds, the request's headers read
    departed: float = math.inf    # the answer written, or the caller gone (inf: still here)


@dataclass
class Records:
    arrivals: list[Arrival] = field(default_factory=list)
    most_in_flight: int = 0


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], OSError):  # a proxy resetting an idle keep-alive connection is not
            super().handle_error(request, client_address)


class RecordingTarget:
    """A threaded HTTP/1.1 server with keep-alive. GET /status/CODE answers CODE at once,
    /delay/MS answers 200 after MS milliseconds unless the caller hangs up first (a sidecar's
    timeout), /delay/MS/CODE answers CODE after them, anything else 200; a query is recorded and otherwise ignored. It keeps every
    request's arrival and departure and the most requests it held at once; `take()` hands that
    over and starts afresh."""

    def __init__(self):
        self._lock = threading.Lock()
        self._records = Records()
        self._in_flight = 0
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # TCP_NODELAY: the head and the body are two writes, and with Nagle the body waited for
            # the proxy's delayed ACK (measured: 44 ms per request instead of about 1 ms)
            disable_nagle_algorithm = True

            def do_GET(self) -> None:                   # noqa: N802 (http.server's name)
                arrival = target._enter(self.path)
                try:
                    self._answer()
                except OSError:                         # the caller reset it: it has left
                    self.close_connection = True
                finally:
                    target._leave(arrival)

            def _answer(self) -> None:
                kind, _, value = urlsplit(self.path).path.strip("/").partition("/")
                status = int(value) if kind == "status" and value.isdigit() else 200
                delay, _, late_status = value.partition("/")
                if kind == "delay" and delay.isdigit():
                    # readable before the delay is over: the caller closed the connection (or sent
                    # another request on it, which a caller waiting for this answer cannot)
                    if select.select([self.connection], [], [], int(delay) / 1000)[0]:
                        self.close_connection = True
                        return
                    status = int(late_status) if late_status.isdigit() else 200
                body = b"recorded\n"
                self.send_response(status)
                self.send_header("content-type", "text/plain")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()

            def log_message(self, *args) -> None:
                pass

        self.server = _QuietServer((HOST, 0), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def _enter(self, path: str) -> Arrival:
        arrival = Arrival(path, time.perf_counter())
        with self._lock:
            self._in_flight += 1
            self._records.most_in_flight = max(self._records.most_in_flight, self._in_flight)
            self._records.arrivals.append(arrival)
        return arrival

    def _leave(self, arrival: Arrival) -> None:
        with self._lock:
            arrival.departed = time.perf_counter()
            self._in_flight -= 1

    def idle(self, timeout: float = 5.0) -> None:
        """Waits until no request is in the target: a check starts from an empty one."""
        deadline = time.monotonic() + timeout
        while self._in_flight and time.monotonic() < deadline:
            time.sleep(0.005)
        assert not self._in_flight, f"the target still holds {self._in_flight} requests after {timeout:g} s"

    def take(self) -> Records:
        with self._lock:
            taken, self._records = self._records, Records(most_in_flight=self._in_flight)
        return taken

    def __enter__(self) -> "RecordingTarget":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)


# -- the services, wired -------------------------------------------------------------------------------
def _stopped(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@dataclass
class MeshRig:
    """A mesh client behind its sidecar, in front of the fault proxy and the recording target."""
    client_url: str
    proxy: Proxy
    sidecar: Sidecar
    target: RecordingTarget
    version: str

    def configure(self, pattern: str, config: dict) -> list[dict]:
        """Switch the sidecar to a configuration (as the runner does before a round) and return the
        strategy the runner sends the client with it."""
        self.sidecar.apply(pattern, config)
        return strategy_for({"pattern": pattern, "config": config})

    def url(self, path: str) -> str:
        return f"http://{HOST}:{self.sidecar.addresses.listen_port}{path}"

    def run(self, strategy: list[dict], path: str, **fields) -> dict:
        """One virtual user's job through the client protocol."""
        job = {"strategy": strategy, "target_url": self.url(path), "successes": 1, "max_requests": 1,
               "share": "user", "instance": "mesh-conformance", "vu": 1, **fields}
        status, reply = post(self.client_url, "/run", job)
        assert status == 200, f"POST /run answered {status}: {reply}"
        return reply

    def run_users(self, strategy: list[dict], paths: list[str], **fields) -> list[dict]:
        """One job per path, all at once (virtual users 1, 2, ...)."""
        replies: list[dict | BaseException] = [RuntimeError("no reply")] * len(paths)

        def user(number: int, path: str) -> None:
            try:
                replies[number] = self.run(strategy, path, vu=number + 1, **fields)
            except BaseException as error:             # re-raised in the caller's thread
                replies[number] = error
        threads = [threading.Thread(target=user, args=(n, p)) for n, p in enumerate(paths)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for reply in replies:
            if isinstance(reply, BaseException):
                raise reply
        return replies

    def upstream_counts(self) -> tuple[int, dict[str, int]]:
        """The fault proxy's requests so far, and the sidecar's counters."""
        return self.proxy.counters()["downstream_rq_total"], self.sidecar.counters()


@contextmanager
def mesh_rig(work: Path) -> Iterator[MeshRig]:
    """Every service started, each stopped again however the block ends."""
    binary = envoy_binary()
    assert binary is not None, f"the mesh client's conformance checks need a real Envoy: {INSTALL_ADVICE}"
    with ExitStack() as stack:
        target = stack.enter_context(RecordingTarget())
        proxy_process, proxy = start_envoy(target.port, work / "proxy")
        stack.callback(_stopped, proxy_process)
        addresses = SidecarAddresses(free_port(), free_port(), HOST, proxy.data_port, HOST)
        sidecar = Sidecar(work / "sidecar", addresses)
        bootstrap = sidecar.write_initial()
        log = stack.enter_context(open(work / "sidecar.log", "wb"))
        # one worker, as the local backend runs it: connection limits then hold exactly
        envoy = subprocess.Popen([str(binary), "-c", str(bootstrap), "--use-dynamic-base-id", "--concurrency", "1",
                                  "--log-level", "warning"], stdout=log, stderr=subprocess.STDOUT)
        stack.callback(_stopped, envoy)
        wait_for(f"http://{HOST}:{addresses.admin_port}/ready", READY_TIMEOUT_S)
        version = envoy_version(binary) or "unknown"
        client = subprocess.Popen([sys.executable, "-m", "rbl.clients.python.service", "--library", "istio",
                                   "--version", version, "--listen", f"{HOST}:0",
                                   "--target", f"{HOST}:{addresses.listen_port}"], stdout=subprocess.PIPE, text=True)
        stack.callback(_stopped, client)
        announced = client.stdout.readline().split()
        assert announced[:1] == ["listening"], f"the mesh client service did not start: {announced}"
        yield MeshRig(f"http://{HOST}:{announced[1]}", proxy, sidecar, target, version)
