"""rbl's fault-injecting HTTP/1.1 proxy, interchangeable with Envoy for the runner (DESIGN 5.1).

Data port: forwards requests to the upstream (httpbin), per request first deciding a delay with
probability Pd, then an abort with probability Pa (Envoy's order: a delayed request may also be
aborted). Decisions come from one seeded generator, so a seed gives a reproducible sequence.

Admin port (the Envoy admin API subset the runner uses):
  POST /runtime_modify?fault.http.abort.abort_percent=P&fault.http.abort.http_status=S
  POST /runtime_modify?fault.http.delay.fixed_delay_percent=P&fault.http.delay.fixed_duration_ms=D
  GET  /runtime?format=json   GET /stats?format=json   POST /reset_counters   GET /ready

Run: python -m rbl.services.fault_proxy --listen 127.0.0.1:0 --admin 127.0.0.1:0 --upstream 127.0.0.1:8000
It prints `listening DATA_PORT ADMIN_PORT` on stdout once both ports are bound.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import sys
from urllib.parse import parse_qsl, urlsplit

from .proxy_data import Downstream

STAT_PREFIX = "http.ingress_http."
RUNTIME_KEYS = {
    "fault.http.abort.abort_percent": 0.0,
    "fault.http.abort.http_status": 503,
    "fault.http.delay.fixed_delay_percent": 0.0,
    "fault.http.delay.fixed_duration_ms": 0,
}
INTEGER_KEYS = ("fault.http.abort.http_status", "fault.http.delay.fixed_duration_ms")
COUNTERS = ("downstream_rq_total", "fault.aborts_injected", "fault.delays_injected", "upstream_rq_failed")
MAX_HEADER_BYTES = 64 * 1024


class FaultState:
    """Runtime values, counters and the seeded decision sequence."""

    def __init__(self, seed: int | None):
        self.runtime = dict(RUNTIME_KEYS)
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.random = random.Random(seed)

    def set(self, key: str, text: str) -> str | None:
        """Apply one runtime override; returns an error message or None."""
        if key not in self.runtime:
            return f"unknown runtime key {key}"
        try:
            value = int(text) if key in INTEGER_KEYS else float(text)
        except ValueError:
            return f"{key} must be a number, got {text!r}"
        if value < 0:
            return f"{key} must not be negative"
        self.runtime[key] = value
        return None

    def decide(self) -> tuple[float, int | None]:
        """(delay seconds, abort status or None) for the next request, delay drawn first."""
        runtime = self.runtime
        delay = 0.0
        if self.random.random() * 100 < runtime["fault.http.delay.fixed_delay_percent"]:
            delay = runtime["fault.http.delay.fixed_duration_ms"] / 1000
            self.counters["fault.delays_injected"] += 1
        abort = None
        if self.random.random() * 100 < runtime["fault.http.abort.abort_percent"]:
            abort = runtime["fault.http.abort.http_status"]
            self.counters["fault.aborts_injected"] += 1
        return delay, abort


async def read_head(reader: asyncio.StreamReader) -> bytes | None:
    """The request or response head up to the blank line; None at a clean end of stream."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as error:
        if error.partial.strip():
            raise ConnectionError("truncated HTTP head") from error
        return None
    except asyncio.LimitOverrunError as error:
        raise ConnectionError("HTTP head too large") from error
    return head


def parse_headers(head: bytes) -> tuple[str, dict[str, str]]:
    """The start line and the headers the proxy needs (lower-cased names)."""
    lines = head.split(b"\r\n")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return lines[0].decode("latin-1"), headers


async def discard_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> None:
    """Admin requests carry their arguments in the query; any body is read and dropped."""
    length = int(headers.get("content-length", "0") or 0)
    if length:
        await reader.readexactly(length)


class Admin:
    """The Envoy admin API subset (one request per connection is enough for the runner)."""

    def __init__(self, state: FaultState):
        self.state = state

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await read_head(reader)
            if head is None:
                return
            request_line, headers = parse_headers(head)
            await discard_body(reader, headers)
            method, target, _ = (request_line.split(" ") + ["", ""])[:3]
            status, body, content_type = self.route(method, target)
            writer.write((f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\n"
                          f"content-type: {content_type}\r\ncontent-length: {len(body)}\r\n"
                          "connection: close\r\n\r\n").encode() + body)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()

    def route(self, method: str, target: str) -> tuple[int, bytes, str]:
        url = urlsplit(target)
        query = parse_qsl(url.query, keep_blank_values=True)
        if url.path == "/ready":
            return 200, b"LIVE\n", "text/plain"
        if url.path == "/runtime_modify":
            if method != "POST":
                return 405, b"use POST\n", "text/plain"
            for key, value in query:
                error = self.state.set(key, value)
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


async def serve(listen: str, admin: str, upstream: str, seed: int | None) -> None:
    state = FaultState(seed)
    upstream_address = _address(upstream)
    proxy_server = await asyncio.get_running_loop().create_server(
        lambda: Downstream(state, upstream_address), *_address(listen), backlog=1024)
    admin_server = await asyncio.start_server(Admin(state).handle, *_address(admin), limit=MAX_HEADER_BYTES)
    data_port = proxy_server.sockets[0].getsockname()[1]
    admin_port = admin_server.sockets[0].getsockname()[1]
    print(f"listening {data_port} {admin_port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with proxy_server, admin_server:
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="rbl's Envoy-compatible fault-injecting proxy")
    parser.add_argument("--listen", default="127.0.0.1:0", help="data address (port 0: pick a free one)")
    parser.add_argument("--admin", default="127.0.0.1:0", help="admin address")
    parser.add_argument("--upstream", required=True, help="host:port of the target service")
    parser.add_argument("--seed", type=int, default=None, help="seed of the fault decision sequence")
    args = parser.parse_args(argv)
    try:
        import uvloop                      # optional: the same code, a faster event loop
        uvloop.run(serve(args.listen, args.admin, args.upstream, args.seed))
    except ImportError:
        asyncio.run(serve(args.listen, args.admin, args.upstream, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
