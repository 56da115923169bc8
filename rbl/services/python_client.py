"""The Python client service: rbl client protocol v1 over tenacity or pybreaker.

Each POST /run is one virtual user, served on its own thread: it calls the target through the
configured patterns, in the paper's loop (until `successes` successful calls or `max_requests`
requests), over one keep-alive connection, and returns raw observations (see protocol.py).

Run: python -m rbl.services.python_client --library tenacity [--listen 127.0.0.1:0]
It prints `listening PORT` on stdout once bound.
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
import sys
import threading
import time
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from .protocol import PROTOCOL_VERSION, CallLog, Job, JobError, parse_job
from .python_strategies import LIBRARIES, Call, RequestFailed, library_version

SHARED_INSTANCES_KEPT = 256


class Target:
    """One virtual user's keep-alive connection to the target; records every request it sends."""

    def __init__(self, job: Job, started_ns: int):
        self.host, self.port, self.path = job.host_port_path
        self.started_ns = started_ns
        self.connection: http.client.HTTPConnection | None = None
        self.sent: list[list[int]] = []

    def send(self) -> None:
        begin = time.perf_counter_ns()
        try:
            if self.connection is None:
                self.connection = http.client.HTTPConnection(self.host, self.port, timeout=60)
            self.connection.request("GET", self.path)
            response = self.connection.getresponse()
            response.read()
            status = response.status
            if response.will_close:
                self.close()
        except (OSError, http.client.HTTPException):
            self.close()
            status = 0
        end = time.perf_counter_ns()
        self.sent.append([(begin - self.started_ns) // 1000, (end - begin) // 1000, status])
        if not 200 <= status < 300:
            raise RequestFailed(status)

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


class ClientService:
    """Builds pattern stacks for one library and runs jobs; keeps shared instances by key."""

    def __init__(self, library: str):
        if library not in LIBRARIES:
            raise ValueError(f"unknown library {library!r}; known: {', '.join(LIBRARIES)}")
        self.library = library
        self.version = library_version(library)
        self.patterns = LIBRARIES[library]
        self._shared: OrderedDict[tuple, Callable[[Call], Call]] = OrderedDict()
        self._lock = threading.Lock()

    def health(self) -> dict:
        return {"protocol": PROTOCOL_VERSION, "library": self.library, "version": self.version,
                "patterns": list(self.patterns)}

    def _wrapper(self, job: Job, position: int) -> Callable[[Call], Call]:
        step = job.strategy[position]
        build = self.patterns.get(step.pattern)
        if build is None:
            raise JobError(f"{self.library} has no pattern {step.pattern!r}; it has {', '.join(self.patterns)}")
        if job.share == "user":
            return build(step.params)
        # share: client: one instance per key across virtual users, as production code shares a breaker
        key = (job.instance, position, step.pattern, json.dumps(step.params, sort_keys=True))
        with self._lock:
            wrapper = self._shared.get(key)
            if wrapper is None:
                wrapper = self._shared[key] = build(step.params)
                if len(self._shared) > SHARED_INSTANCES_KEPT:
                    self._shared.popitem(last=False)
            return wrapper

    def run(self, job: Job) -> dict:
        wrappers = [self._wrapper(job, i) for i in range(len(job.strategy))]
        started = time.perf_counter_ns()
        target = Target(job, started)
        call: Call = target.send
        for wrap in reversed(wrappers):          # outermost first in the job, so wrap inside-out
            call = wrap(call)
        log = CallLog()
        deadline = started + job.max_duration_ms * 1_000_000 if job.max_duration_ms else None
        stopped_by = "max_duration"
        try:
            while True:
                if log.successful_calls >= job.successes:
                    stopped_by = "successes"
                    break
                if log.requests >= job.max_requests:
                    stopped_by = "max_requests"
                    break
                if deadline is not None and time.perf_counter_ns() >= deadline:
                    break
                target.sent = []
                try:
                    call()
                    ok = True
                except Exception:                # a failed call, whatever the library raised
                    ok = False
                log.add(ok, target.sent)
                if not target.sent:
                    # A call rejected without a request (open breaker) takes microseconds; spinning on
                    # it would hold the GIL and slow the other virtual users' requests. sleep(0)
                    # only yields the interpreter, so the loop's semantics stay the paper's.
                    time.sleep(0)
        finally:
            target.close()
        total_us = (time.perf_counter_ns() - started) // 1000
        return {"protocol": PROTOCOL_VERSION, "library": self.library, "version": self.version,
                "vu": job.vu, "total_us": total_us, "stopped_by": stopped_by, "calls": log.calls}


def make_handler(service: ClientService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):   # quiet: the runner keeps its own log
            pass

        def _reply(self, status: int, body: dict) -> None:
            data = json.dumps(body, separators=(",", ":")).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/health":
                self._reply(200, service.health())
            else:
                self._reply(404, {"error": f"no route {self.path}"})

        def do_POST(self):
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            if self.path != "/run":
                self._reply(404, {"error": f"no route {self.path}"})
                return
            try:
                job = parse_job(json.loads(raw or b"null"))
                self._reply(200, service.run(job))
            except json.JSONDecodeError as error:
                self._reply(400, {"error": f"the body is not JSON: {error}"})
            except JobError as error:
                self._reply(400, {"error": str(error)})
    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024                    # hundreds of virtual users connect at once


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rbl.services.python_client", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--library", required=True, choices=sorted(LIBRARIES))
    parser.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (default 127.0.0.1:0)")
    args = parser.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    server = Server((host or "127.0.0.1", int(port)), make_handler(ClientService(args.library)))
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"listening {server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
