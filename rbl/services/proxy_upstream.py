"""The fault proxy's upstream side: one connection to the target per client connection, relaying
one response at a time back to its Downstream (rbl/services/proxy_data.py) with flow control."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .http_framing import (HEAD_END, MAX_HEAD_BYTES, CloseBody, FramingError, parse_response_head,
                           with_connection_header)

if TYPE_CHECKING:
    from .proxy_data import Downstream


class Upstream(asyncio.Protocol):
    """The connection to the target for one client connection; relays one response at a time."""

    def __init__(self, downstream: "Downstream"):
        self.downstream = downstream
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.in_flight = False
        self.head_sent = False
        self.body = None
        self.reusable = True
        self.head_only = False

    def connection_made(self, transport) -> None:
        self.transport = transport
        if self.downstream.write_paused:
            transport.pause_reading()

    def send(self, head: bytes, head_only: bool) -> None:
        self.buffer.clear()
        self.in_flight, self.head_sent, self.head_only, self.body = True, False, head_only, None
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
            self._relay(data, b"")
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
        start = 0
        while True:
            end = data.find(HEAD_END, start)
            if end < 0 and len(data) - start <= MAX_HEAD_BYTES:
                self.buffer += data[start:]
                return
            if end < 0 or end - start > MAX_HEAD_BYTES:
                raise FramingError("upstream response head too large", 502)
            head = data[start:end]
            response = parse_response_head(head, self.head_only)
            start = end + 4
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
        self._relay(data[start:], with_connection_header(head, response.connection, downstream.keep_alive))

    def _relay(self, data: bytes, head: bytes) -> None:
        """Pass the response body (after `head`, if any) and finish at its end."""
        body = self.body
        try:
            end = 0 if body is None else body.consume(data, 0)
        except FramingError as error:
            self._fail(str(error).encode())
            return
        piece = data if end == len(data) else data[:end]
        if head:
            self.downstream.transport.write(head + piece)    # one write (one syscall) for small responses
            self.downstream.replied = True
        elif piece:
            self.downstream.transport.write(piece)
        if body is None or body.done:
            if end < len(data):
                self.reusable = False                # bytes beyond the response: out of step
            self._done()

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
