"""rbl's fault-injecting HTTP/1.1 proxy, interchangeable with Envoy for the runner.

Data port: forwards requests to the upstream (httpbin), per request first deciding a delay with
probability Pd, then an abort with probability Pa (Envoy's order: a delayed request may also be
aborted). Decisions come from one seeded generator, so a seed gives a reproducible sequence.

Admin port (the Envoy admin API subset the runner uses):
  POST /runtime_modify?fault.http.abort.abort_percent=P&fault.http.abort.http_status=S
  POST /runtime_modify?fault.http.delay.fixed_delay_percent=P&fault.http.delay.fixed_duration_ms=D
  GET  /runtime?format=json   GET /stats?format=json   POST /reset_counters   GET /ready

Run: python -m rbl.dataplane.fault_proxy --listen 127.0.0.1:0 --admin 127.0.0.1:0 --upstream 127.0.0.1:8000
It prints `listening DATA_PORT ADMIN_PORT` on stdout once both ports are bound.

Hostile input gets a status, never a hang: strict RFC 9112 framing (400/501/505), 414 and 431 for
long lines and heads, 408 for a stalled request (--read-timeout), 503 beyond --max-connections
(the admin port has its own cap), bodies streamed both ways with flow control, and an admin
change that is rejected changes nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import re
import resource
import signal
import sys
from urllib.parse import parse_qsl, urlsplit

from .http_framing import HEAD_END, MAX_HEAD_BYTES, FramingError, LengthBody, parse_request_head
from .proxy_downstream import Connections, Downstream, Limits

STAT_PREFIX = "http.ingress_http."
RUNTIME_KEYS = {
    "fault.http.abort.abort_percent": 0.0,
    "fault.http.abort.http_status": 503,
    "fault.http.delay.fixed_delay_percent": 0.0,
    "fault.http.delay.fixed_duration_ms": 0,
}
COUNTERS = ("downstream_rq_total", "fault.aborts_injected", "fault.delays_injected", "upstream_rq_failed")
MAX_DELAY_MS = 2**31 - 1            # about 24.8 days, the longest delay a 32-bit millisecond timer holds
MAX_ADMIN_BODY = 64 * 1024
ADMIN_MAX_CONNECTIONS = 64          # its own cap: a flood of data connections never locks the runner out
PERCENT = re.compile(r"[0-9]{1,20}(?:\.[0-9]{0,20})?(?:[eE][-+]?[0-9]{1,3})?")
INTEGER = re.compile(r"[0-9]{1,12}")


def _percent(text: str) -> float:
    if not PERCENT.fullmatch(text):
        raise ValueError("must be a decimal number from 0 to 100")
    value = float(text)
    if not 0 <= value <= 100:                    # also false for nan; inf cannot match PERCENT
        raise ValueError("must be from 0 to 100")
    return value


def _integer(low: int, high: int):
    def parse(text: str) -> int:
        if not INTEGER.fullmatch(text) or not low <= int(text) <= high:
            raise ValueError(f"must be an integer from {low} to {high}")
        return int(text)
    return parse


PARSERS = {
    "fault.http.abort.abort_percent": _percent,
    "fault.http.abort.http_status": _integer(200, 599),      # Envoy's range for an abort status
    "fault.http.delay.fixed_delay_percent": _percent,
    "fault.http.delay.fixed_duration_ms": _integer(0, MAX_DELAY_MS),
}


class FaultState:
    """Runtime values, counters and the seeded decision sequence."""

    def __init__(self, seed: int | None):
        self.runtime = dict(RUNTIME_KEYS)
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.random = random.Random(seed)

    def modify(self, pairs: list[tuple[str, str]]) -> str | None:
        """Apply runtime overrides all together, or none of them: returns an error message or None."""
        if not pairs:
            return "usage: /runtime_modify?key1=value1&key2=value2"
        values = {}
        for key, text in pairs:
            if key not in PARSERS:
                return f"unknown runtime key {key}"
            if key in values:
                return f"{key} given twice"
            try:
                values[key] = PARSERS[key](text)
            except ValueError as error:
                return f"{key} {error}, got {text[:40]!r}"
        self.runtime.update(values)
        return None

    def decide(self) -> tuple[float, int | None]:
        """(delay seconds, abort status or None) for the next request, delay drawn first. A fault
        at 0% draws nothing, so requests made with no fault set (the runner's probe of the target
        before each round) leave the seeded sequence of the faulted requests unchanged."""
        runtime = self.runtime
        delay = 0.0
        delay_percent = runtime["fault.http.delay.fixed_delay_percent"]
        abort_percent = runtime["fault.http.abort.abort_percent"]
        if delay_percent > 0 and self.random.random() * 100 < delay_percent:
            delay = runtime["fault.http.delay.fixed_duration_ms"] / 1000
            self.counters["fault.delays_injected"] += 1
        abort = None
        if abort_percent > 0 and self.random.random() * 100 < abort_percent:
            abort = runtime["fault.http.abort.http_status"]
            self.counters["fault.aborts_injected"] += 1
        return delay, abort


async def read_request(reader: asyncio.StreamReader) -> tuple[str, str]:
    """An admin request's method and target; its body (if any, bounded) is read and dropped."""
    try:
        head = await reader.readuntil(HEAD_END)
        request = parse_request_head(head[:-4])
        if request.body is not None:
            if not isinstance(request.body, LengthBody) or request.body.remaining > MAX_ADMIN_BODY:
                raise FramingError("admin requests take their arguments in the query", 413)
            await reader.readexactly(request.body.remaining)
    except asyncio.IncompleteReadError as error:
        raise FramingError("a truncated request") from error
    except asyncio.LimitOverrunError as error:
        raise FramingError("request head too large", 431) from error
    method, target = head.split(b" ", 2)[:2]
    return method.decode(), target.decode()


class Admin:
    """The Envoy admin API subset (one request per connection is enough for the runner)."""

    def __init__(self, state: FaultState, read_timeout: float):
        self.state = state
        self.read_timeout = read_timeout
        self.active = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.active += 1
        try:
            if self.active > ADMIN_MAX_CONNECTIONS:
                status, body, content_type = 503, b"too many admin connections\n", "text/plain"
            else:
                status, body, content_type = await self.answer(reader)
            writer.write((f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\n"
                          f"content-type: {content_type}\r\ncontent-length: {len(body)}\r\n"
                          "connection: close\r\n\r\n").encode() + body)
            await asyncio.wait_for(writer.drain(), self.read_timeout)
        except (ConnectionError, asyncio.TimeoutError):
            pass
        finally:
            self.active -= 1
            writer.close()

    async def answer(self, reader: asyncio.StreamReader) -> tuple[int, bytes, str]:
        try:
            method, target = await asyncio.wait_for(read_request(reader), self.read_timeout)
        except asyncio.TimeoutError:
            return 408, b"request timeout\n", "text/plain"
        except FramingError as error:
            return error.status, (str(error) + "\n").encode(), "text/plain"
        return self.route(method, target)

    def route(self, method: str, target: str) -> tuple[int, bytes, str]:
        if method not in ("GET", "POST"):
            return 405, b"use GET or POST\n", "text/plain"
        url = urlsplit(target)
        if url.path == "/ready":
            return 200, b"LIVE\n", "text/plain"
        if url.path == "/runtime_modify":
            if method != "POST":
                return 405, b"use POST\n", "text/plain"
            try:
                query = parse_qsl(url.query, keep_blank_values=True, strict_parsing=bool(url.query),
                                  errors="strict", max_num_fields=len(RUNTIME_KEYS))
            except ValueError as error:              # UnicodeDecodeError is one
                return 400, f"bad query: {error}\n".encode(), "text/plain"
            error = self.state.modify(query)
            if error:
                return 400, (error + "\n").encode(), "text/plain"
            return 200, b"OK\n", "text/plain"
        if url.path == "/runtime":
            entries = {k: {"final_value": str(v)} for k, v in self.state.runtime.items()}
            return 200, json.dumps({"entries": entries}).encode(), "application/json"
        if url.path == "/stats":
            stats = [{"name": STAT_PREFIX + name, "value": value} for name, value in self.state.counters.items()]
            return 200, json.dumps({"stats": stats}).encode(), "application/json"
        if url.path == "/reset_counters":
            if method != "POST":
                return 405, b"use POST\n", "text/plain"
            self.state.counters = dict.fromkeys(COUNTERS, 0)
            return 200, b"OK\n", "text/plain"
        return 404, b"not found\n", "text/plain"


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host or "127.0.0.1", int(port)


def connection_cap(wanted: int) -> int:
    """The connection cap the file descriptor limit allows (each client may hold an upstream too)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        try:                                     # use what the hard limit allows, as servers do
            soft = hard if hard != resource.RLIM_INFINITY else max(soft, 2 * wanted + 256)
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        except (ValueError, OSError):
            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return max(1, min(wanted, (soft - ADMIN_MAX_CONNECTIONS - 64) // 2))


async def serve(args: argparse.Namespace) -> None:
    state = FaultState(args.seed)
    # several replicas: each client connection is relayed to the next in turn (round robin)
    upstreams = itertools.cycle([_address(text) for text in args.upstream.split(",")])
    limits = Limits(args.read_timeout, args.idle_timeout, connection_cap(args.max_connections))
    connections = Connections(limits)
    loop = asyncio.get_running_loop()
    proxy_server = await loop.create_server(lambda: Downstream(state, next(upstreams), connections),
                                            *_address(args.listen), backlog=1024)
    admin_server = await asyncio.start_server(Admin(state, args.read_timeout).handle, *_address(args.admin),
                                              limit=MAX_HEAD_BYTES, backlog=128)
    data_port = proxy_server.sockets[0].getsockname()[1]
    admin_port = admin_server.sockets[0].getsockname()[1]
    print(f"listening {data_port} {admin_port}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    sweeper = loop.create_task(connections.sweep_forever())
    await stop.wait()
    sweeper.cancel()
    proxy_server.close()
    admin_server.close()
    for connection in list(connections.open):   # do not wait for clients: a stop is a stop
        connection.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="rbl's Envoy-compatible fault-injecting proxy")
    parser.add_argument("--listen", default="127.0.0.1:0", help="data address (port 0: pick a free one)")
    parser.add_argument("--admin", default="127.0.0.1:0", help="admin address")
    parser.add_argument("--upstream", required=True,
                        help="host:port of the target service (several, comma-separated: replicas, "
                             "one per client connection in turn)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the fault decision sequence")
    parser.add_argument("--read-timeout", type=_positive, default=10.0, metavar="SECONDS",
                        help="a started request must keep arriving within this (else 408)")
    parser.add_argument("--idle-timeout", type=_positive, default=3600.0, metavar="SECONDS",
                        help="close keep-alive connections idle this long")
    parser.add_argument("--max-connections", type=_count, default=1024,
                        help="client connections at once; beyond it the longest idle one closes, else 503")
    args = parser.parse_args(argv)
    try:
        import uvloop                      # optional: the same code, a faster event loop
    except ImportError:
        asyncio.run(serve(args))
    else:
        uvloop.run(serve(args))
    return 0


def _positive(text: str) -> float:
    value = float(text)
    if not 0 < value < 1e6:
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


if __name__ == "__main__":
    sys.exit(main())
