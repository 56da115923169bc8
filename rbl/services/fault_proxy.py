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
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return lines[0], headers


async def copy_body(reader, writer, headers: dict[str, str]) -> None:
    """Forward a message body framed by Content-Length or chunked encoding."""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size_line = await reader.readuntil(b"\r\n")
            writer.write(size_line)
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while True:  # trailers, then the final blank line
                    line = await reader.readuntil(b"\r\n")
                    writer.write(line)
                    if line == b"\r\n":
                        return
            writer.write(await reader.readexactly(size + 2))
    length = int(headers.get("content-length", "0") or 0)
    if length:
        writer.write(await reader.readexactly(length))


def local_reply(status: int, body: bytes, keep_alive: bool) -> bytes:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 502: "Bad Gateway",
              503: "Service Unavailable"}.get(status, "Fault Injected")
    connection = "keep-alive" if keep_alive else "close"
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-length: {len(body)}\r\n"
            f"content-type: text/plain\r\nconnection: {connection}\r\n\r\n").encode() + body


class Proxy:
    def __init__(self, state: FaultState, upstream: tuple[str, int]):
        self.state = state
        self.upstream = upstream

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                head = await read_head(reader)
                if head is None:
                    return
                request_line, headers = parse_headers(head)
                keep_alive = headers.get("connection", "").lower() != "close"
                self.state.counters["downstream_rq_total"] += 1
                delay, abort = self.state.decide()
                if delay:
                    await asyncio.sleep(delay)
                if abort is not None:
                    await self._discard_body(reader, headers)
                    writer.write(local_reply(abort, b"fault filter abort", keep_alive))
                    await writer.drain()
                else:
                    if upstream is None:
                        upstream = await asyncio.open_connection(*self.upstream)
                    keep_alive = await self._forward(head, headers, reader, writer, upstream) and keep_alive
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            return
        finally:
            if upstream is not None:
                upstream[1].close()
            writer.close()

    async def _discard_body(self, reader, headers) -> None:
        sink = _NullWriter()
        await copy_body(reader, sink, headers)

    async def _forward(self, head, headers, reader, writer, upstream) -> bool:
        up_reader, up_writer = upstream
        up_writer.write(head)
        await copy_body(reader, up_writer, headers)
        await up_writer.drain()
        response_head = await read_head(up_reader)
        if response_head is None:
            self.state.counters["upstream_rq_failed"] += 1
            writer.write(local_reply(502, b"upstream closed the connection", False))
            await writer.drain()
            return False
        _, response_headers = parse_headers(response_head)
        writer.write(response_head)
        if "content-length" in response_headers or "chunked" in response_headers.get("transfer-encoding", ""):
            await copy_body(up_reader, writer, response_headers)
            await writer.drain()
            return response_headers.get("connection", "").lower() != "close"
        writer.write(await up_reader.read())  # body delimited by the upstream closing
        await writer.drain()
        return False


class _NullWriter:
    def write(self, data: bytes) -> None:
        pass


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
            await copy_body(reader, _NullWriter(), headers)
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
    proxy_server = await asyncio.start_server(Proxy(state, _address(upstream)).handle, *_address(listen),
                                              limit=MAX_HEADER_BYTES, backlog=1024)
    admin_server = await asyncio.start_server(Admin(state).handle, *_address(admin))
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
    asyncio.run(serve(args.listen, args.admin, args.upstream, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
