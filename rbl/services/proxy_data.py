"""The fault proxy's data path: HTTP/1.1 relaying on asyncio Protocols.

Written on Protocols rather than streams because the proxy must not be the bottleneck of a
benchmark: bytes go from one transport to the other without a coroutine per read. One request at
a time per client connection (no pipelining): while a request is in flight, later bytes wait in
the buffer. Connection is hop-by-hop, as in Envoy: an upstream that closes after each response
does not force the client to reconnect, and the upstream connection is reused when it allows.
"""

from __future__ import annotations

import asyncio

MAX_HEAD_BYTES = 64 * 1024
HEAD_END = b"\r\n\r\n"


class FramingError(ValueError):
    """Bytes that are not a well-formed HTTP/1.1 message."""


def header(lowered_head: bytes, name: bytes) -> bytes | None:
    """One header's value from a lower-cased head (a find in C, not a dict per message: this is
    the hot path). `name` is lower-case and without the colon."""
    start = lowered_head.find(b"\r\n" + name + b":")
    if start < 0:
        return None
    start += len(name) + 3
    end = lowered_head.find(b"\r\n", start)
    return lowered_head[start:end if end >= 0 else len(lowered_head)].strip()


def chunked_length(buffer: bytes | bytearray, start: int) -> int | None:
    """Bytes a chunked body starting at `start` occupies (trailers included), None if incomplete."""
    position = start
    while True:
        line_end = buffer.find(b"\r\n", position)
        if line_end < 0:
            return None
        try:
            size = int(bytes(buffer[position:line_end]).split(b";")[0].strip(), 16)
        except ValueError as error:
            raise FramingError("a bad chunk size") from error
        position = line_end + 2
        if size == 0:
            end = buffer.find(HEAD_END, position - 2)    # trailers end with an empty line
            return None if end < 0 else end + 4 - start
        position += size + 2
        if position > len(buffer):
            return None


def body_length(lowered_head: bytes, buffer, start: int) -> int | None:
    """A request body's length (0 without framing headers), None while incomplete."""
    encoding = header(lowered_head, b"transfer-encoding")
    if encoding is not None and b"chunked" in encoding:
        return chunked_length(buffer, start)
    length = header(lowered_head, b"content-length")
    try:
        return int(length) if length else 0
    except ValueError as error:
        raise FramingError("a bad content-length") from error


def local_reply(status: int, body: bytes, keep_alive: bool) -> bytes:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 502: "Bad Gateway",
              503: "Service Unavailable"}.get(status, "Fault Injected")
    connection = "keep-alive" if keep_alive else "close"
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-length: {len(body)}\r\n"
            f"content-type: text/plain\r\nconnection: {connection}\r\n\r\n").encode() + body


def with_connection_header(head: bytes, has_connection: bool, keep_alive: bool) -> bytes:
    """A response head (without its blank line) with the downstream's own Connection header."""
    if not has_connection and keep_alive:
        return head + HEAD_END                   # HTTP/1.1 keeps the connection by default
    lines = [line for line in head.split(b"\r\n") if not line[:11].lower() == b"connection:"]
    lines.append(b"connection: keep-alive" if keep_alive else b"connection: close")
    return b"\r\n".join(lines) + HEAD_END


class Downstream(asyncio.Protocol):
    """One client connection. `state` decides faults and counts (see fault_proxy.FaultState)."""

    def __init__(self, state, upstream_address: tuple[str, int]):
        self.state = state
        self.upstream_address = upstream_address
        self.buffer = bytearray()
        self.busy = False
        self.eof = False
        self.keep_alive = True
        self.transport: asyncio.Transport | None = None
        self.upstream: Upstream | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.busy:
            self._next()

    def eof_received(self) -> bool:
        self.eof = True
        if not self.busy:
            self.transport.close()
        return True                                  # answer the request in flight first

    def connection_lost(self, exc) -> None:
        if self.upstream is not None:
            self.upstream.close()
            self.upstream = None

    def _next(self) -> None:
        """Take the next complete request from the buffer and start it."""
        if self.transport.is_closing():
            return
        head_end = self.buffer.find(HEAD_END)
        if head_end < 0:
            if len(self.buffer) > MAX_HEAD_BYTES:
                self._reject(b"request head too large")
            elif self.eof:
                self.transport.close()
            return
        lowered = bytes(self.buffer[:head_end]).lower()
        try:
            length = body_length(lowered, self.buffer, head_end + 4)
        except FramingError as error:
            self._reject(str(error).encode())
            return
        if length is None:
            return                                   # the body is still arriving
        total = head_end + 4 + length
        if len(self.buffer) < total:
            return
        message = bytes(self.buffer[:total])
        del self.buffer[:total]
        self.busy = True
        self.keep_alive = header(lowered, b"connection") != b"close"
        self.head_only = lowered.startswith(b"head ")
        self.state.counters["downstream_rq_total"] += 1
        delay, abort = self.state.decide()
        if delay:
            asyncio.get_running_loop().call_later(delay, self._after_delay, message, abort)
        else:
            self._after_delay(message, abort)

    def _reject(self, why: bytes) -> None:
        self.transport.write(local_reply(400, why, False))
        self.transport.close()

    def _after_delay(self, message: bytes, abort: int | None) -> None:
        if self.transport.is_closing():
            return
        if abort is not None:
            self.transport.write(local_reply(abort, b"fault filter abort", self.keep_alive))
            self.finished(self.keep_alive)
        elif self.upstream is not None:
            self.upstream.send(message, self.head_only)
        else:
            asyncio.get_running_loop().create_task(self._connect_and_send(message))

    async def _connect_and_send(self, message: bytes) -> None:
        try:
            _, upstream = await asyncio.get_running_loop().create_connection(
                lambda: Upstream(self), *self.upstream_address)
        except OSError:
            self.state.counters["upstream_rq_failed"] += 1
            if not self.transport.is_closing():
                self.transport.write(local_reply(502, b"upstream connect error", False))
                self.transport.close()
            return
        if self.transport.is_closing():
            upstream.close()
            return
        self.upstream = upstream
        upstream.send(message, self.head_only)

    def finished(self, keep_alive: bool) -> None:
        """The response went out; close or go on with whatever the client sent meanwhile."""
        self.busy = False
        if not keep_alive or self.eof and not self.buffer:
            self.transport.close()
            return
        self._next()

    def upstream_gone(self, upstream: "Upstream") -> None:
        if self.upstream is upstream:
            self.upstream = None


class Upstream(asyncio.Protocol):
    """The connection to the target for one client connection; relays one response at a time."""

    def __init__(self, downstream: Downstream):
        self.downstream = downstream
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.in_flight = False
        self.head_sent = False
        self.remaining = 0                 # body bytes still to relay (content-length framing)
        self.mode = "length"               # length | chunked | close
        self.reusable = True
        self.head_only = False

    def connection_made(self, transport) -> None:
        self.transport = transport

    def send(self, message: bytes, head_only: bool) -> None:
        self.buffer.clear()
        self.in_flight, self.head_sent, self.head_only = True, False, head_only
        self.transport.write(message)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if not self.in_flight:
            return                                   # nothing asked: ignore stray bytes
        if not self.head_sent:
            self.buffer += data
            head_end = self.buffer.find(HEAD_END)
            if head_end < 0:
                return
            try:
                self._start_response(head_end)
            except FramingError:
                self._fail(b"upstream sent a malformed response")
                return
            data, self.buffer = bytes(self.buffer[head_end + 4:]), bytearray()
        self._body(data)

    def _start_response(self, head_end: int) -> None:
        head = bytes(self.buffer[:head_end])
        lowered = head.lower()
        try:
            status = int(head.split(b" ", 2)[1])
            connection = header(lowered, b"connection")
            encoding = header(lowered, b"transfer-encoding")
            length = header(lowered, b"content-length")
            length = int(length) if length is not None else None
        except (IndexError, ValueError):
            raise FramingError("a malformed response head from the upstream")
        self.reusable = connection != b"close"
        keep_alive = self.downstream.keep_alive
        if self.head_only or status in (204, 304) or 100 <= status < 200:
            self.mode, self.remaining = "length", 0
        elif encoding is not None and b"chunked" in encoding:
            self.mode = "chunked"
        elif length is not None:
            self.mode, self.remaining = "length", length
        else:
            self.mode, keep_alive, self.reusable = "close", False, False
            self.downstream.keep_alive = False
        self.downstream.transport.write(with_connection_header(head, connection is not None, keep_alive))
        self.head_sent = True

    def _body(self, data: bytes) -> None:
        out = self.downstream.transport
        if self.mode == "close":
            out.write(data)
            return
        if self.mode == "length":
            piece = data[:self.remaining]
            if piece:
                out.write(piece)
            self.remaining -= len(piece)
            if self.remaining == 0:
                self._done()
            return
        self.buffer += data                          # chunked: relay once the body is complete
        length = chunked_length(self.buffer, 0)
        if length is not None:
            out.write(bytes(self.buffer[:length]))
            self._done()

    def _done(self) -> None:
        self.in_flight = False
        if not self.reusable:
            self.transport.close()
            self.downstream.upstream_gone(self)
        self.downstream.finished(self.downstream.keep_alive)

    def connection_lost(self, exc) -> None:
        self.downstream.upstream_gone(self)
        if not self.in_flight:
            return
        self.in_flight = False
        if self.mode == "close" and self.head_sent:
            self.downstream.finished(False)          # the body was delimited by the close
            return
        self._fail(b"upstream closed the connection")

    def _fail(self, why: bytes) -> None:
        """The exchange broke: a 502 if the client has not seen a response head yet, then close."""
        self.in_flight = False
        self.downstream.state.counters["upstream_rq_failed"] += 1
        if not self.head_sent and not self.downstream.transport.is_closing():
            self.downstream.transport.write(local_reply(502, why, False))
        self.downstream.transport.close()
        self.close()
