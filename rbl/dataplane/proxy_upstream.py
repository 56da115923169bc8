"""The fault proxy's upstream side: one connection to the target per client connection, relaying
one response at a time back to its Downstream (rbl/dataplane/proxy_downstream.py) with flow control."""

from __future__ import annotations

import asyncio
from typing import Protocol

from .http_framing import (HEAD_END, MAX_HEAD_BYTES, CloseBody, FramingError, LengthBody, response_head,
                           set_nodelay, with_connection_header)

# A response head waits for the first bytes of a Content-Length body up to this size, so that a
# head and body the target wrote separately (gunicorn does) leave in one write, as nginx's
# postpone_output does; the client cannot use a head without its body anyway. Larger bodies, and
# chunked or close-delimited ones (which may stream), get their head at once.
POSTPONE_BODY_BYTES = 64 * 1024
# Above this size a head and a body piece go out as a vectored write instead of one joined copy.
JOIN_BYTES = 16 * 1024


class DownstreamSide(Protocol):
    """What an Upstream uses of the client connection it serves (proxy_downstream.Downstream),
    named here so that the two modules do not import each other."""

    transport: asyncio.Transport
    state: object                    # the proxy's state: its counters
    keep_alive: bool
    replied: bool
    write_paused: bool

    def _pause(self, why: str) -> None: ...
    def _resume(self, why: str) -> None: ...
    def response_over(self, upstream: "Upstream") -> None: ...
    def upstream_failed(self, why: bytes) -> None: ...
    def upstream_gone(self, upstream: "Upstream") -> None: ...


class Upstream(asyncio.Protocol):
    """The connection to the target for one client connection; relays one response at a time."""

    def __init__(self, downstream: DownstreamSide):
        self.downstream = downstream
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.in_flight = False
        self.head_sent = False
        self.body = None
        self.reusable = True
        self.head_only = False
        self.held = b""                  # a response head waiting for its body's first bytes

    def connection_made(self, transport) -> None:
        self.transport = transport
        set_nodelay(transport)
        if self.downstream.write_paused:
            transport.pause_reading()

    def send(self, head: bytes, head_only: bool) -> None:
        self.buffer.clear()
        self.in_flight, self.head_sent, self.head_only, self.body, self.held = True, False, head_only, None, b""
        self.transport.write(head)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def abandon(self) -> None:
        """This connection carries half a request: never reuse it."""
        self.in_flight = False
        self.downstream.upstream_gone(self)
        self.close()

    def pause_writing(self) -> None:
        self.downstream._pause("upstream")            # the target reads the body slower than it comes

    def resume_writing(self) -> None:
        self.downstream._resume("upstream")

    def data_received(self, data: bytes) -> None:
        if not self.in_flight:
            self.abandon()                           # bytes nobody asked for: do not trust the connection
            return
        if self.head_sent:
            self._relay(data, 0, 0, b"")
            return
        if self.buffer:                              # a head in pieces (rare): join them
            self.buffer += data
            data = bytes(self.buffer)
            self.buffer.clear()
        try:
            self._read_head(data)
        except FramingError as error:
            self._fail(str(error).encode())

    def _read_head(self, data: bytes) -> None:
        start = head_start = 0
        while True:
            end = data.find(HEAD_END, start)
            if end < 0 and len(data) - start <= MAX_HEAD_BYTES:
                self.buffer += data[start:]
                return
            if end < 0 or end - start > MAX_HEAD_BYTES:
                raise FramingError("upstream response head too large", 502)
            head = data[start:end]
            response = response_head(head, self.head_only)
            head_start, start = start, end + 4
            if response.status == 101:
                raise FramingError("upstream switched protocols", 502)
            if response.status >= 200:
                break
            self.downstream.transport.write(head + HEAD_END)     # 100 Continue and friends: relay, wait on
        downstream = self.downstream
        self.reusable = response.reusable
        if isinstance(response.body, CloseBody):
            downstream.keep_alive = False
        self.head_sent, self.body = True, response.body
        rewritten = with_connection_header(head, response.connection, downstream.keep_alive)
        if rewritten is None:
            self._relay(data, start, head_start, b"")           # the head goes out as the target sent it
        else:
            self._relay(data, start, start, rewritten)

    def _relay(self, data: bytes, start: int, send_from: int, head: bytes) -> None:
        """Pass the response body that starts at data[start] and finish at its end. What is sent is
        `head` then data[send_from:body end]: send_from < start when data holds the head unchanged,
        so a whole response read in one piece is written on as that same object, without a copy."""
        body = self.body
        try:
            end = start if body is None else body.consume(data, start)
        except FramingError as error:
            self._fail(str(error).encode())
            return
        downstream = self.downstream
        if not downstream.replied and (head or send_from < start):
            if end == start and type(body) is LengthBody and body.remaining <= POSTPONE_BODY_BYTES:
                self.held = head + data[send_from:start]        # no body bytes yet: wait for them
                return
            downstream.replied = True
        held, self.held = self.held, b""
        if held or head:
            piece = data[send_from:end] if send_from or end < len(data) else data
            self._write(held + head, piece)
        elif send_from == 0 and end == len(data):
            downstream.transport.write(data)                    # the usual case: no copy
        elif end > send_from:
            downstream.transport.write(data[send_from:end])
        if held:
            downstream.replied = True
        if body is None or body.done:
            if end < len(data):
                self.reusable = False                # bytes beyond the response: out of step
            self._done()

    def _write(self, head: bytes, piece: bytes) -> None:
        """A head and a body piece in one system call: joined when small, vectored otherwise."""
        if len(piece) <= JOIN_BYTES:
            self.downstream.transport.write(head + piece)
        else:
            self.downstream.transport.writelines((head, piece))

    def _done(self) -> None:
        self.in_flight = False
        if not self.reusable:
            self.transport.close()
            self.downstream.upstream_gone(self)
        self.downstream.response_over(self)

    def connection_lost(self, exc) -> None:
        self.downstream.upstream_gone(self)
        if not self.in_flight:
            return
        if self.head_sent and isinstance(self.body, CloseBody):
            self.in_flight = False
            self.downstream.response_over(self)      # the body was delimited by the close
            return
        self._fail(b"upstream closed the connection")

    def _fail(self, why: bytes) -> None:
        self.in_flight = False
        self.downstream.state.counters["upstream_rq_failed"] += 1
        self.downstream.upstream_failed(why)
        self.close()
