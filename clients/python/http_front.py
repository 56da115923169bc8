"""A client service's HTTP/1.1 front end, bounded as protocol.py says (sizes, timeouts, connections)."""

from __future__ import annotations

import json
import re
import selectors
import socket
import socketserver
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http import HTTPStatus
from typing import Callable

from .job_limits import peer_closed
from ..protocol import MAX_BODY_BYTES, MAX_HEADER_BYTES, READ_TIMEOUT_S, JobError

_HEAD_END = re.compile(rb"\r?\n\r?\n")
_REQUEST_LINE = re.compile(r"([A-Z]{1,20}) (/[!-~]*) HTTP/1\.([01])")
# a field value: visible characters, spaces, tabs and obs-text; a NUL or another control character
# is refused (RFC 9110 5.5), as Node's parser does
_HEADER = re.compile(r"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*([\t\x20-\x7e\x80-\xff]*?)[ \t]*")
REFUSE_LINGER_S = 0.25         # how long a refused connection waits at most for its caller to close
MAX_LINGERING = 4096           # refused connections waiting to close; beyond that the oldest closes now


@dataclass(frozen=True)
class Front:
    """What the service answers: GET /health, and POST /run and POST /call given (body, caller_gone)."""
    health: Callable[[], dict]
    run: Callable[[bytes, Callable[[], bool]], tuple[int, dict]]
    call: Callable[[bytes, Callable[[], bool]], tuple[int, dict]]


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, list[str]]
    keep_alive: bool
    body: bytes = b""


class Reject(Exception):
    """A request that cannot be served: answered with `status` and the connection closed."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class PeerGone(Exception):
    """The caller closed the connection between requests: nothing to answer."""


def reply_bytes(status: int, body: dict, close: bool, with_body: bool = True) -> bytes:
    data = json.dumps(body, separators=(",", ":")).encode()
    phrase = HTTPStatus(status).phrase
    head = (f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n"
            + ("connection: close\r\n" if close else "") + "\r\n")
    return head.encode() + (data if with_body else b"")


class Connection:
    """One caller's connection: requests in turn, each read within READ_TIMEOUT_S."""

    def __init__(self, sock: socket.socket, front: Front):
        self.sock = sock
        self.front = front
        self.buffer = b""

    def serve(self) -> None:
        while True:
            try:
                request = self._read_request()
            except PeerGone:
                return
            except Reject as reject:
                self._send(reject.status, {"error": str(reject)}, close=True)
                linger_close(self.sock)
                return
            status, body = self._dispatch(request)
            # a reply to HEAD has no body (RFC 9110 9.3.2): one would be read as the next reply
            self._send(status, body, close=not request.keep_alive, with_body=request.method != "HEAD")
            if not request.keep_alive:
                return

    # -- reading --------------------------------------------------------------------------------
    def _recv(self, deadline: float, what: str) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Reject(408, f"the request's {what} did not arrive within {READ_TIMEOUT_S:g} s")
        self.sock.settimeout(left)
        try:
            return self.sock.recv(65536)
        except TimeoutError:
            raise Reject(408, f"the request's {what} did not arrive within {READ_TIMEOUT_S:g} s") from None
        except OSError:
            raise PeerGone from None

    def _read_head(self) -> str:
        deadline = time.monotonic() + READ_TIMEOUT_S
        # empty lines before a request line are allowed (RFC 9112 2.2): drop them before looking
        # for the blank line that ends the headers
        while not (end := _HEAD_END.search(self._without_leading_empty_lines())):
            if len(self.buffer) > MAX_HEADER_BYTES:
                raise Reject(431, f"the request's headers are over {MAX_HEADER_BYTES} bytes")
            try:
                chunk = self._recv(deadline, "headers")
            except Reject:
                if not self.buffer.strip():
                    raise PeerGone from None     # an idle keep-alive connection: close it quietly
                raise
            if not chunk:
                if self.buffer.strip():
                    raise Reject(400, "the connection closed inside the request's headers")
                raise PeerGone
            self.buffer += chunk
        if end.start() > MAX_HEADER_BYTES:
            raise Reject(431, f"the request's headers are over {MAX_HEADER_BYTES} bytes")
        head, self.buffer = self.buffer[:end.start()], self.buffer[end.end():]
        return head.decode("latin-1")

    def _without_leading_empty_lines(self) -> bytes:
        self.buffer = self.buffer.lstrip(b"\r\n")
        return self.buffer

    def _read_request(self) -> Request:
        lines = self._read_head().replace("\r\n", "\n").split("\n")
        first = _REQUEST_LINE.fullmatch(lines[0])
        if not first:
            raise Reject(400, f"bad request line {lines[0][:80]!r}")
        headers: dict[str, list[str]] = {}
        for line in lines[1:]:
            header = _HEADER.fullmatch(line)
            if not header:
                raise Reject(400, f"bad header line {line[:80]!r}")
            headers.setdefault(header[1].lower(), []).append(header[2])
        connection = ",".join(headers.get("connection", [])).lower()
        keep_alive = first[3] == "1" and "close" not in connection
        request = Request(first[1], first[2], headers, keep_alive)
        request.body = self._read_body(request)
        return request

    def _read_body(self, request: Request) -> bytes:
        if "transfer-encoding" in request.headers:
            raise Reject(411, "send the body with a Content-Length (no Transfer-Encoding)")
        values = request.headers.get("content-length", ["0"])
        if len(set(values)) != 1 or not re.fullmatch(r"[0-9]{1,18}", values[0]):
            raise Reject(400, f"bad Content-Length {', '.join(values)[:40]!r}")
        length = int(values[0])
        if length > MAX_BODY_BYTES:
            raise Reject(413, f"the body is over {MAX_BODY_BYTES} bytes")
        if length > len(self.buffer) and "100-continue" in ",".join(request.headers.get("expect", [])).lower():
            self.sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(self.buffer) < length:
            chunk = self._recv(deadline, "body")
            if not chunk:
                raise Reject(400, f"the body ended after {len(self.buffer)} of {length} bytes (Content-Length)")
            self.buffer += chunk
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return body

    # -- answering ------------------------------------------------------------------------------
    def _dispatch(self, request: Request) -> tuple[int, dict]:
        path = request.path.split("?", 1)[0]
        routes = {"/health": "GET", "/run": "POST", "/call": "POST"}
        if path not in routes:
            return 404, {"error": f"no route {path[:80]}"}
        if request.method != routes[path]:
            return 405, {"error": f"use {routes[path]} {path}"}
        if path == "/health":
            return 200, self.front.health()
        try:
            job = self.front.run if path == "/run" else self.front.call
            return job(request.body, lambda: peer_closed(self.sock))
        except JobError as error:
            return 400, {"error": str(error)}

    def _send(self, status: int, body: dict, close: bool, with_body: bool = True) -> None:
        try:
            self.sock.settimeout(READ_TIMEOUT_S)
            self.sock.sendall(reply_bytes(status, body, close, with_body))
        except OSError:
            pass                         # the caller left; nothing else to do


def linger_close(sock: socket.socket, seconds: float = 1.0) -> None:
    """Close after an error reply without losing it: closing with unread input resets the
    connection, which can discard the reply before the caller reads it; so read until the caller
    closes (or `seconds` pass) first."""
    try:
        sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            if not sock.recv(65536):
                break
    except OSError:
        pass
    finally:
        sock.close()


class Lingerer:
    """Closes refused connections without losing their 503 (see linger_close), all on one thread:
    each closes when its caller closes or REFUSE_LINGER_S has passed. A thread per refused
    connection, lingering in turn, made the callers beyond the cap wait seconds for their 503
    when they kept their connections open."""

    def __init__(self):
        self.selector = selectors.DefaultSelector()
        self.waiting: deque[tuple[float, socket.socket]] = deque()   # by deadline: all linger as long
        self.added: deque[socket.socket] = deque()
        self.wake_read, self.wake_write = socket.socketpair()
        self.wake_read.setblocking(False)
        self.wake_write.setblocking(False)
        self.selector.register(self.wake_read, selectors.EVENT_READ)
        self.closed = False
        threading.Thread(target=self._run, name="linger", daemon=True).start()

    def add(self, sock: socket.socket) -> None:
        self.added.append(sock)
        self._wake()

    def _wake(self) -> None:
        try:
            self.wake_write.send(b"x")
        except OSError:
            pass                         # a wake-up already pending is enough

    def _run(self) -> None:
        while not self.closed:
            try:
                self._turn()
            except Exception:            # one connection's trouble must not stop the others from closing
                pass

    def _turn(self) -> None:
        timeout = max(0.0, self.waiting[0][0] - time.monotonic()) if self.waiting else None
        for key, _ in self.selector.select(timeout):
            if key.fileobj is self.wake_read:
                self._take_added()
            else:
                self._read(key.fileobj)
        now = time.monotonic()
        while self.waiting and (self.waiting[0][0] <= now or len(self.waiting) > MAX_LINGERING):
            self._close(self.waiting.popleft()[1])

    def _take_added(self) -> None:
        try:
            while self.wake_read.recv(4096):
                pass
        except OSError:
            pass
        while self.added:
            sock = self.added.popleft()
            try:
                self.selector.register(sock, selectors.EVENT_READ)
            except (OSError, ValueError):
                sock.close()
                continue
            self.waiting.append((time.monotonic() + REFUSE_LINGER_S, sock))

    def _read(self, sock: socket.socket) -> None:
        try:
            if sock.recv(65536):
                return                   # its request, read and dropped
        except BlockingIOError:
            return
        except OSError:
            pass
        self._close(sock)                # the caller closed: so can we

    def _close(self, sock: socket.socket) -> None:
        if sock.fileno() < 0:
            return
        try:
            self.selector.unregister(sock)
        except (KeyError, ValueError):
            pass
        sock.close()

    def close(self) -> None:
        self.closed = True
        self._wake()


class BoundedServer(socketserver.TCPServer):
    """Serves each connection on a pool of at most `max_jobs` threads; the connection after that
    is answered 503 at once, so a flood of callers cannot start a thread each."""

    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], front: Front, max_jobs: int):
        self.front = front
        self.slots = threading.BoundedSemaphore(max_jobs)
        self.max_jobs = max_jobs
        # hundreds of virtual users connect at once; an overflowing backlog drops their SYNs, which
        # are retried only after a second or more
        self.request_queue_size = max(1024, 2 * max_jobs)
        self.workers = ThreadPoolExecutor(max_workers=max_jobs, thread_name_prefix="job")
        self.lingerer = Lingerer()
        super().__init__(address, socketserver.BaseRequestHandler)

    def process_request(self, request, client_address) -> None:
        if not self.slots.acquire(blocking=False):
            self._refuse(request)
            return
        self.workers.submit(self._serve, request)

    def _serve(self, sock: socket.socket) -> None:
        try:
            Connection(sock, self.front).serve()
        except Exception as error:       # a bug must not drop the caller silently
            Connection(sock, self.front)._send(500, {"error": f"internal error: {error!r}"[:300]}, close=True)
        finally:
            self.shutdown_request(sock)
            self.slots.release()

    def _refuse(self, sock: socket.socket) -> None:
        """The 503, sent from the accepting thread without waiting: a fresh connection's send
        buffer holds it whole. Then the lingerer closes the connection."""
        body = {"error": f"busy: this service runs at most {self.max_jobs} connections at once"}
        try:
            sock.setblocking(False)
            sock.send(reply_bytes(503, body, close=True))
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            sock.close()
            return
        self.lingerer.add(sock)

    def server_close(self) -> None:
        super().server_close()
        self.workers.shutdown(wait=False, cancel_futures=True)
        self.lingerer.close()


def serve(address: tuple[str, int], front: Front, max_jobs: int) -> BoundedServer:
    return BoundedServer(address, front, max_jobs)
