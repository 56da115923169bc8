"""The Python client service: rbl client protocol v1 over tenacity or pybreaker.

Each POST /run is one virtual user, served on a thread of a bounded pool: it calls the target
through the configured patterns, in the paper's loop (until `successes` successful calls or
`max_requests` requests, within `max_duration_ms`), over one keep-alive connection, and returns
raw observations. A POST /call is the same job limited to one call (open-loop load). Limits and
error replies: see protocol.py.

As `--library istio` it is rbl's mesh client: a plain HTTP client whose policies are its sidecar
Envoy's (the `--target` is the sidecar), recording the sidecar's response flags with each request.

Run: python -m rbl.clients.python.service --library tenacity --target 127.0.0.1:PORT
     [--listen 127.0.0.1:0] [--max-jobs 512] [--version V]
It prints `listening PORT` on stdout once bound.
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
import socket
import sys
import threading
import time
from collections import OrderedDict, deque
from typing import Callable

from .http_front import Front, serve
from .job_limits import CutShort, JobGuard
from .job_request import decode_body, parse_job, parse_target
from ..protocol import (JOB_ROUTES, MAX_FLAGS_CHARS, MAX_JOBS, ONE_CALL_STOP, PROTOCOL_VERSION, SIDECAR_FLAGS_HEADER,
                        CallLog, Job, JobError, Step)
from .strategies import LIBRARIES, Call, RequestFailed, call_ending, library_version

SHARED_INSTANCES_KEPT = 256
REQUEST_TIMEOUT_S = 60.0
IDLE_CONNECTIONS_KEPT = MAX_JOBS
IDLE_CONNECTION_S = 10.0       # an idle pooled connection older than this is closed, not reused


class TargetConnections:
    """Keep-alive connections to the target that /calls share, one call at a time each, as a
    production client's pool: a connection per /call made the target's listen queue overflow at
    hundreds of calls a second (a dropped SYN costs its request a second) and left a TIME_WAIT
    socket per call."""

    def __init__(self):
        self._idle: deque[tuple[http.client.HTTPConnection, float]] = deque()
        self._lock = threading.Lock()

    def take(self) -> http.client.HTTPConnection | None:
        while True:
            with self._lock:
                if not self._idle:
                    return None
                connection, since = self._idle.pop()             # the most recently used first
            if time.monotonic() - since < IDLE_CONNECTION_S and _still_open(connection.sock):
                return connection
            connection.close()

    def give(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.append((connection, time.monotonic()))
            extra = self._idle.popleft()[0] if len(self._idle) > IDLE_CONNECTIONS_KEPT else None
        if extra is not None:
            extra.close()


def _still_open(sock: socket.socket | None) -> bool:
    """An idle connection the target has not closed (nor sent anything on)."""
    if sock is None:
        return False
    try:
        sock.setblocking(False)
        sock.recv(1, socket.MSG_PEEK)
        return False                     # closed by the target, or unexpected bytes
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        try:
            sock.setblocking(True)
        except OSError:
            pass


class Target:
    """One virtual user's keep-alive connection to the target (a /call's: one from the service's
    pool, given back after the call); records every request it sends."""

    def __init__(self, job: Job, started_ns: int, guard: JobGuard, pool: TargetConnections | None = None):
        self.host, self.port, self.path = job.host_port_path
        self.started_ns = started_ns
        self.guard = guard
        self.pool = pool
        self.connection: http.client.HTTPConnection | None = pool.take() if pool else None
        self.sent: list[list[int]] = []

    def send(self) -> None:
        self.guard.before_request()
        # a request may take no longer than the job has left (plus a little, so it is seen to end)
        timeout = min(REQUEST_TIMEOUT_S, self.guard.remaining_s() + 0.01)
        begin = time.perf_counter_ns()
        try:
            if self.connection is None:
                self.connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            elif self.connection.sock is not None:
                self.connection.sock.settimeout(timeout)
            self.connection.request("GET", self.path)
            response = self.connection.getresponse()
            response.read()
            status = response.status
            flags = response.getheader(SIDECAR_FLAGS_HEADER)
            if response.will_close:
                self.drop()
        except (OSError, http.client.HTTPException):
            self.drop()
            status, flags = 0, None
        end = time.perf_counter_ns()
        record = [(begin - self.started_ns) // 1000, (end - begin) // 1000, status]
        self.sent.append(record if flags is None else [*record, flags[:MAX_FLAGS_CHARS]])
        if status == 0 and self.guard.expired():
            raise CutShort("max_duration")
        if not 200 <= status < 300:
            raise RequestFailed(status)

    def drop(self) -> None:
        """Closes the connection (broken, or closing): the next request opens another."""
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def close(self) -> None:
        """The job is over: its connection closes, or, open and idle, goes back to the pool."""
        if self.pool is not None and self.connection is not None and self.connection.sock is not None:
            self.pool.give(self.connection)
            self.connection = None
        self.drop()


class ClientService:
    """Builds pattern stacks for one library and runs jobs; keeps shared instances by key."""

    def __init__(self, library: str, target: tuple[str, int], version: str | None = None):
        if library not in LIBRARIES:
            raise ValueError(f"unknown library {library!r}; known: {', '.join(LIBRARIES)}")
        self.library = library
        self.target = target
        self.version = version or library_version(library)
        self.patterns = LIBRARIES[library]
        self._shared: OrderedDict[tuple, Callable[[Call], Call]] = OrderedDict()
        self._lock = threading.Lock()
        self._connections = TargetConnections()

    def health(self) -> dict:
        return {"protocol": PROTOCOL_VERSION, "library": self.library, "version": self.version,
                "patterns": list(self.patterns), "endpoints": list(JOB_ROUTES)}

    def job(self, raw: bytes) -> Job:
        """The job in a POST /run body; JobError (400) for anything protocol.py does not allow."""
        return parse_job(decode_body(raw), self.target)

    def _wrapper(self, job: Job, position: int) -> Callable[[Call], Call]:
        step = job.strategy[position]
        build = self.patterns.get(step.pattern)
        if build is None:
            raise JobError(f"{self.library} has no pattern {step.pattern[:40]!r}; it has {', '.join(self.patterns)}")
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

    def run(self, job: Job, caller_gone: Callable[[], bool] = lambda: False, one_call: bool = False) -> dict:
        """A /run job, or with one_call a /call: the same loop, stopped after its first call."""
        wrappers = [self._wrapper(job, i) for i in range(len(job.strategy))]
        log = CallLog()
        guard = JobGuard(job.max_duration_ms, job.max_requests, lambda: log.requests + len(target.sent), caller_gone)
        target = Target(job, guard.started_ns, guard, self._connections if one_call else None)
        call: Call = target.send
        for wrap in reversed(wrappers):          # outermost first in the job, so wrap inside-out
            call = wrap(call)
        try:
            with guard:
                stopped_by = self._loop(job, call, target, log, guard, max_calls=1 if one_call else None)
        finally:
            target.close()
        if one_call and not log.calls:           # the deadline or the caller went before the call began
            log.add(False, [], cut_short=True)
        total_us = (time.perf_counter_ns() - guard.started_ns) // 1000
        return {"protocol": PROTOCOL_VERSION, "library": self.library, "version": self.version,
                "vu": job.vu, "total_us": total_us, "stopped_by": stopped_by, "calls": log.calls}

    @staticmethod
    def _loop(job: Job, call: Call, target: Target, log: CallLog, guard: JobGuard, max_calls: int | None) -> str:
        """The paper's loop: the limits are checked before each call, and inside it by the guard."""
        made = 0
        while True:
            if made == max_calls:
                return ONE_CALL_STOP
            if log.successful_calls >= job.successes:
                return "successes"
            if log.requests >= job.max_requests:
                return "max_requests"
            if guard.expired():
                return "max_duration"
            if guard.caller_gone():
                return "disconnected"
            target.sent = []
            made += 1
            call_started_ns = time.perf_counter_ns()
            ending = None
            try:
                call()
                ok = True
            except CutShort as cut:
                log.add(False, target.sent, cut_short=True)
                return cut.reason
            except Exception as error:           # a failed call, whatever the library raised
                ok = False
                ending = call_ending(error, call_started_ns, bool(target.sent))
            log.add(ok, target.sent, ending=ending)
            if not target.sent:
                # A call rejected without a request (open breaker) takes microseconds; spinning on
                # it would hold the GIL and slow the other virtual users' requests. sleep(0)
                # only yields the interpreter, so the loop's semantics stay the paper's.
                time.sleep(0)


def routes(service: ClientService) -> Front:
    def run(raw: bytes, caller_gone: Callable[[], bool]) -> tuple[int, dict]:
        return 200, service.run(service.job(raw), caller_gone)

    def one_call(raw: bytes, caller_gone: Callable[[], bool]) -> tuple[int, dict]:
        return 200, service.run(service.job(raw), caller_gone, one_call=True)
    return Front(health=service.health, run=run, call=one_call)


def warm_up(server, service: ClientService) -> None:
    """Jobs of every pattern (library defaults) against this service's own /health before
    `listening`: a fresh process's first request paid 10-50 ms more than the next ones (name
    resolution, the first connection, lazy imports), which a first virtual user would have
    measured as time on the target. Served by a temporary loop; serve_forever runs again after."""
    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    serving.start()
    host, port = server.server_address[:2]
    try:
        for _ in range(2):
            for pattern in service.patterns:
                job = Job(strategy=() if pattern == "baseline" else (Step(pattern, {}),), host=host, port=port,
                          path="/health", successes=5, max_requests=10, share="user", instance="warm-up", vu=0)
                service.run(job)
    except Exception:                            # a warm-up that fails only leaves the service cold
        pass
    finally:
        server.shutdown()
        serving.join()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rbl.clients.python.service", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--library", required=True, choices=sorted(LIBRARIES))
    parser.add_argument("--target", required=True,
                        help="HOST:PORT, the only address jobs may send requests to (the fault proxy's)")
    parser.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (default 127.0.0.1:0)")
    parser.add_argument("--version", help="the version /health reports, for a library that is not a Python "
                                          "package (istio: the sidecar Envoy's)")
    parser.add_argument("--max-jobs", type=int, default=MAX_JOBS,
                        help=f"connections served at once; more are answered 503 (default {MAX_JOBS})")
    args = parser.parse_args(argv)
    try:
        target = parse_target(args.target)
    except ValueError as error:
        parser.error(str(error))
    if args.max_jobs < 1:
        parser.error("--max-jobs must be at least 1")
    host, _, port = args.listen.rpartition(":")
    service = ClientService(args.library, target, args.version)
    server = serve((host or "127.0.0.1", int(port)), routes(service), args.max_jobs)
    warm_up(server, service)
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
