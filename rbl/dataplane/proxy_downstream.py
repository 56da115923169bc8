"""The fault proxy's data path: streaming HTTP/1.1 relaying on asyncio Protocols."""

# Written on Protocols rather than streams because the proxy must not be the bottleneck of a
# benchmark: bytes go from one transport to the other without a coroutine per read. One request
# at a time per client connection (no pipelining): while a request is in flight, later bytes wait
# in a bounded buffer. Bodies stream in both directions with flow control (a transport whose write
# buffer is full pauses reading on the other side), so memory does not grow with body size.
# Connection is hop-by-hop, as in Envoy: the upstream connection is reused when it allows.

from __future__ import annotations

import asyncio
import time
from typing import NamedTuple

from .http_framing import (HEAD_END, MAX_HEAD_BYTES, MAX_LINE_BYTES, FramingError, local_reply, request_head,
                           set_nodelay)
from .proxy_upstream import Upstream


LINGER_SECONDS = 2.0


class Limits(NamedTuple):
    read_timeout: float = 10.0       # a started request must keep arriving (408 otherwise)
    idle_timeout: float = 3600.0     # a keep-alive connection with nothing to do (Envoy's default)
    max_connections: int = 1024      # beyond it: close the longest idle connection, else 503


class _Discard:
    """Where the rest of a request body goes once its response is decided without the upstream."""

    @staticmethod
    def write(data) -> None:
        pass


DISCARD = _Discard()


class Connections:
    """Every open client connection: the cap, idle eviction and the timeout sweep."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.open: set[Downstream] = set()

    def admit(self, connection: "Downstream") -> bool:
        if len(self.open) >= self.limits.max_connections:
            idle = [c for c in self.open if c.idle]  # a scan at the cap only, no bookkeeping per request
            if not idle:
                return False
            min(idle, key=lambda c: c.deadline).close()   # the longest idle loses nothing by closing
        self.open.add(connection)
        return True

    def remove(self, connection: "Downstream") -> None:
        self.open.discard(connection)

    async def sweep_forever(self) -> None:
        """Time out stalled connections; one pass a tick instead of a timer per request (hot path)."""
        loop = asyncio.get_running_loop()
        tick = min(1.0, self.limits.read_timeout / 4)
        while True:
            await asyncio.sleep(tick)
            now = loop.time()
            for connection in [c for c in self.open if c.deadline is not None and c.deadline <= now]:
                connection.timed_out()


class Downstream(asyncio.Protocol):
    """One client connection. `state` decides faults and counts (see fault_proxy.FaultState)."""

    def __init__(self, state, upstream_address: tuple[str, int], connections: Connections):
        self.state = state
        self.upstream_address = upstream_address
        self.connections = connections
        self.limits = connections.limits
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.upstream: Upstream | None = None
        self.buffer = bytearray()        # a head being read, or bytes held while they cannot flow
        self.in_request = False          # from a complete head until both body and response are done
        self.body = None                 # the request body still to read (http_framing.Body)
        self.sink = None                 # where its bytes go: the upstream transport, DISCARD, or held
        self.responding = False
        self.replied = False             # a response head went out for this request
        self.keep_alive = True
        self.head_only = False
        self.eof = False
        self.write_paused = False
        self.pauses: set[str] = set()    # why reading is paused (several reasons may overlap)
        self.deadline: float | None = None
        self.connecting: asyncio.Task | None = None
        self.lingering = False
        self.idle = False                # no request under way (the deadline is then the idle one)

    # -- connection events ---------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        set_nodelay(transport)
        if not self.connections.admit(self):
            self._reject(FramingError("too many connections", 503))
            return
        self._become_idle()

    def data_received(self, data: bytes) -> None:
        if self.lingering:
            return                                   # a final reply went out: drop what follows
        if self.sink is not None and self.body is not None and not self.buffer:
            self._pass_body(data)                    # a body streaming through: the fast path
            return
        if not self.in_request and not self.buffer:
            end = data.find(HEAD_END)
            if end > 0 and data[:2] != b"\r\n":       # a whole head in one read: the usual case
                if end + 4 < len(data):
                    self.buffer += data[end + 4:]
                self._start(data[:end + 4] if end + 4 < len(data) else data, end)
                return
        self.buffer += data
        if not self.in_request:
            self._read_head()
        elif len(self.buffer) > MAX_HEAD_BYTES:
            self._pause("held")                      # pipelined bytes wait until the exchange is over

    def eof_received(self) -> bool:
        self.eof = True
        if self.lingering:
            self.transport.close()
        elif not self.in_request:
            self._read_head()                        # complete pipelined requests still get answers
        elif self.sink is not None:
            self._check_truncated()
        return True                                  # answer the request in flight first

    def connection_lost(self, exc) -> None:
        self.connections.remove(self)
        self.deadline = None
        if self.upstream is not None:
            self.upstream.close()
            self.upstream = None

    def pause_writing(self) -> None:
        """The client does not read: stop reading its requests and the upstream's response."""
        self.write_paused = True
        self._pause("writing")
        self.deadline = self.loop.time() + self.limits.read_timeout     # it must read on, or go
        if self.upstream is not None and not self.upstream.transport.is_closing():
            self.upstream.transport.pause_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        self._resume("writing")
        if not self.idle and self.body is None:
            self.deadline = None
        if self.upstream is not None and not self.upstream.transport.is_closing():
            self.upstream.transport.resume_reading()

    def close(self) -> None:
        self.connections.remove(self)
        self.deadline = None
        if self.write_paused:
            self.transport.abort()                   # close() would wait for unread bytes forever
        else:
            self.transport.close()

    def _gone(self) -> bool:
        return self.lingering or self.transport.is_closing()

    def timed_out(self) -> None:
        """The client stalled (or idled too long): 408 if it is owed an answer, then close."""
        if self.pauses and self.pauses != {"writing"}:
            return                                   # waiting on us, not on the client
        if (self.in_request or self.buffer) and not self.replied and not self.write_paused:
            self._reject(FramingError("request timeout", 408))
        else:
            self.close()

    # -- reading a request ---------------------------------------------------------------------
    def _pause(self, why: str) -> None:
        if not self.pauses and not self.transport.is_closing():
            self.transport.pause_reading()
        self.pauses.add(why)

    def _resume(self, why: str) -> None:
        if why in self.pauses:
            self.pauses.discard(why)
            if not self.pauses and not self.transport.is_closing():
                self.transport.resume_reading()
                if self.body is not None:
                    self.deadline = self.loop.time() + self.limits.read_timeout

    def _become_idle(self) -> None:
        self.idle = True
        self.deadline = self.loop.time() + self.limits.idle_timeout

    def _read_head(self) -> None:
        """Take the next request head from the buffer and start its exchange."""
        if self.in_request or self.lingering or self.transport.is_closing():
            return
        buffer = self.buffer
        while buffer[:2] == b"\r\n":
            del buffer[:2]                           # RFC 9112 2.2: ignore empty lines before a request
        end = buffer.find(HEAD_END)
        if end < 0:
            self._partial_head()
            return
        head = bytes(buffer[:end + 4])
        del buffer[:end + 4]
        self._start(head, end)

    def _start(self, head: bytes, end: int) -> None:
        """Check a complete head (`end`: where its blank line starts) and start its exchange."""
        if end > MAX_HEAD_BYTES:
            self._reject(FramingError("request head too large", 431))
            return
        if head.find(b"\r\n", 0, MAX_LINE_BYTES + 2) < 0:
            self._reject(FramingError("request line too long", 414))
            return
        try:
            request = request_head(head, end)
        except FramingError as error:
            self._reject(error)
            return
        self.idle = False
        self.in_request, self.responding, self.replied = True, True, False
        self.body, self.sink, self.deadline = request.body, None, None
        self.keep_alive = request.keep_alive
        self.head_only = request.method == b"HEAD"
        self.state.counters["downstream_rq_total"] += 1
        delay, abort = self.state.decide()
        if delay:
            self._pause("waiting")
            self._dispatch_at(time.monotonic() + delay, head, abort)
        else:
            self._dispatch(head, abort)

    def _dispatch_at(self, due: float, head: bytes, abort: int | None) -> None:
        """_dispatch once `due` has passed. The loop's timers may fire early (uvloop counts from
        its cached, whole-millisecond clock), and an injected delay must never be shorter than
        configured, as Envoy's is not: an early timer is re-armed for what is left."""
        left = due - time.monotonic()
        if left > 0:
            self.loop.call_later(left, self._dispatch_at, due, head, abort)
        else:
            self._dispatch(head, abort)

    def _partial_head(self) -> None:
        """An incomplete head: reject it early when it can only end badly."""
        buffer = self.buffer
        if not buffer:
            if self.eof:
                self.close()
            elif not self.idle:
                self._become_idle()
            return
        if self.deadline is None or self.idle:
            self.idle = False
            self.deadline = self.loop.time() + self.limits.read_timeout     # whole head, not per byte
        line_end = buffer.find(b"\r\n")
        if line_end > MAX_LINE_BYTES or line_end < 0 and len(buffer) > MAX_LINE_BYTES:
            self._reject(FramingError("request line too long", 414))
        elif len(buffer) > MAX_HEAD_BYTES:
            self._reject(FramingError("request head too large", 431))
        elif buffer.count(b"\n") != buffer.count(b"\r\n"):
            self._reject(FramingError("a bare LF in the request head"))
        elif self.eof:
            self._reject(FramingError("a truncated request head"))

    def _reject(self, error: FramingError) -> None:
        """A request the proxy will not relay: its status, then close (the framing is lost).

        The close lingers (RFC 9112 9.6): the write side shuts first and what the client still
        sends is read and dropped for a while, since closing with unread input sends a reset
        that can destroy the reply before the client reads it."""
        self.transport.write(local_reply(error.status, str(error).encode() + b"\n", False))
        if self.upstream is not None:
            self.upstream.abandon()                  # it may hold half a request
        self.connections.remove(self)
        self.lingering, self.deadline = True, None
        self.buffer.clear()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        if self.pauses:
            self.pauses.clear()
            self.transport.resume_reading()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)

    # -- the exchange --------------------------------------------------------------------------
    def _dispatch(self, head: bytes, abort: int | None) -> None:
        """After any injected delay: abort locally, or forward to the upstream."""
        if self.lingering or self.transport.is_closing():
            return
        if abort is not None:
            self.transport.write(local_reply(abort, b"fault filter abort", self.keep_alive))
            self.replied, self.responding = True, False
            self._release_held(DISCARD)
        elif self.upstream is not None:
            self._forward(self.upstream, head)
        else:
            self._pause("waiting")
            self.connecting = self.loop.create_task(self._connect_and_send(head))   # keep a reference

    async def _connect_and_send(self, head: bytes) -> None:
        try:
            _, upstream = await self.loop.create_connection(lambda: Upstream(self), *self.upstream_address)
        except OSError:
            self.state.counters["upstream_rq_failed"] += 1
            self.upstream_failed(b"upstream connect error")
            return
        if self._gone():
            upstream.close()
            return
        self.upstream = upstream
        self._forward(upstream, head)

    def _forward(self, upstream: "Upstream", head: bytes) -> None:
        upstream.send(head, self.head_only)
        self._release_held(upstream.transport)

    def _release_held(self, sink) -> None:
        """The body may flow now: pass what arrived meanwhile, then read on."""
        self.sink = sink
        if self.body is not None and self.buffer:
            held = bytes(self.buffer)
            self.buffer.clear()
            self._pass_body(held)
        self._resume("waiting")
        if self.body is None:
            self._exchange_over()
        elif self.eof:
            self._check_truncated()

    def _pass_body(self, data: bytes) -> None:
        try:
            end = self.body.consume(data, 0)
        except FramingError as error:
            self._bad_body(error)
            return
        if end:
            self.sink.write(data if end == len(data) else data[:end])
        if not self.body.done:
            self.deadline = self.loop.time() + self.limits.read_timeout
            return
        self.body, self.deadline = None, None
        if end < len(data):
            self.buffer += data[end:]                # the next request, pipelined
        self._exchange_over()

    def _check_truncated(self) -> None:
        if self.body is not None and not self._gone():
            self._bad_body(FramingError("a truncated request body"))

    def _bad_body(self, error: FramingError) -> None:
        """The request body broke its framing: the upstream holds half a request, so drop both."""
        if self.upstream is not None:
            self.upstream.abandon()
        if self.replied:
            self.close()
        else:
            self._reject(error)

    def _exchange_over(self) -> None:
        """Both the request body and the response are done: go on with the connection."""
        if self.responding or self.body is not None or not self.in_request:
            return
        self.in_request, self.sink = False, None
        if not self.keep_alive or self.eof and not self.buffer:
            self.close()
            return
        self._resume("held")
        if self.buffer:
            self.loop.call_soon(self._read_head)     # not recursive: pipelined aborts could be many
        else:
            self._become_idle()

    # -- called by the upstream side -----------------------------------------------------------
    def response_over(self, upstream: "Upstream") -> None:
        self.responding = False
        if self.body is not None:                    # answered before the whole body came: drop the rest
            upstream.abandon()
            self.sink = DISCARD
        self._exchange_over()

    def upstream_failed(self, why: bytes) -> None:
        """A 502 if the client has not seen a response head yet; the connection closes either way."""
        if not self._gone():
            if not self.replied:
                self.transport.write(local_reply(502, why, False))
            self.close()

    def upstream_gone(self, upstream: "Upstream") -> None:
        if self.upstream is upstream:
            self.upstream = None
            self._resume("upstream")                 # its write buffer no longer holds us back
