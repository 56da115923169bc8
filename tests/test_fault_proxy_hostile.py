"""Hostile input to the fault proxy (issue 15): framing, limits, streaming and the admin API."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import ExitStack

import pytest

from .live_services import Proxy

ANSWER_WITHIN = 10.0                # "does not hang" on a busy 2-core machine
STATUS_LINE = re.compile(rb"HTTP/1\.1 ([0-9]{3}) ")


class LiveProxy(Proxy):
    def __init__(self, process: subprocess.Popen, data_port: int, admin_port: int):
        super().__init__(data_port, admin_port)
        self.process = process

    def peak_rss_kb(self) -> int:
        status = open(f"/proc/{self.process.pid}/status").read()
        return int(re.search(r"VmHWM:\s+(\d+) kB", status)[1])

    def rss_kb(self) -> int:
        status = open(f"/proc/{self.process.pid}/status").read()
        return int(re.search(r"VmRSS:\s+(\d+) kB", status)[1])

    def runtime(self) -> dict[str, str]:
        entries = json.loads(self.admin("GET", "/runtime?format=json")[1])["entries"]
        return {key: entry["final_value"] for key, entry in entries.items()}

    def assert_serves(self) -> None:
        assert self.get_many(2) == [(200, 100)] * 2
        assert self.admin("GET", "/ready") == (200, "LIVE\n")

    def stop(self) -> None:
        """SIGTERM must stop it promptly, whatever its clients are doing."""
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(timeout=ANSWER_WITHIN) == 0


@pytest.fixture
def live_proxy(httpbin):
    """Start rbl's proxy with extra flags, in front of httpbin unless another upstream is given."""
    started = []

    def start(*flags: str, upstream: int | None = None) -> LiveProxy:
        process = subprocess.Popen([sys.executable, "-m", "rbl.dataplane.fault_proxy", "--upstream",
                                    f"127.0.0.1:{upstream or httpbin}", "--seed", "7", *flags],
                                   stdout=subprocess.PIPE, text=True)
        started.append(process)
        line = process.stdout.readline().split()
        assert line[0] == "listening", line
        return LiveProxy(process, int(line[1]), int(line[2]))

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def exchange(port: int, data: bytes, half_close: bool = True, timeout: float = ANSWER_WITHIN) -> bytes:
    """Send raw bytes and read until the proxy closes; fails if it neither answers nor closes."""
    deadline = time.monotonic() + timeout
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as connection:
        try:
            connection.sendall(data)
            if half_close:
                connection.shutdown(socket.SHUT_WR)
        except OSError:
            pass                                     # the proxy may answer and close early
        out = bytearray()
        while time.monotonic() < deadline:
            try:
                piece = connection.recv(1 << 16)
            except ConnectionResetError:
                break
            except socket.timeout:
                raise AssertionError(f"no answer within {timeout} s to {bytes(data[:200])!r}") from None
            if not piece:
                return bytes(out)
            out += piece
        return bytes(out)


def statuses(response: bytes) -> list[int]:
    return [int(status) for status in STATUS_LINE.findall(response)]


def first_status(response: bytes) -> int | None:
    match = STATUS_LINE.match(response)
    return int(match[1]) if match else None


# -- framing: each reproducer and its siblings ---------------------------------------------------
H = b"Host: x\r\n"
CHUNKED = b"POST /anything HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
FRAMING_CASES = {
    "negative chunk size": (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n-6\r\n", 400),
    "negative chunk size, with a host": (CHUNKED + b"-6\r\n", 400),
    "negative chunk size after a chunk": (CHUNKED + b"3\r\nabc\r\n-6\r\nabc\r\n0\r\n\r\n", 400),
    "0x chunk size": (CHUNKED + b"0x3\r\nabc\r\n0\r\n\r\n", 400),
    "underscore chunk size": (CHUNKED + b"1_0\r\n" + b"a" * 16 + b"\r\n0\r\n\r\n", 400),
    "plus chunk size": (CHUNKED + b"+3\r\nabc\r\n0\r\n\r\n", 400),
    "space before chunk size": (CHUNKED + b" 3\r\nabc\r\n0\r\n\r\n", 400),
    "17 hex digits": (CHUNKED + b"1" + b"0" * 16 + b"\r\nabc\r\n0\r\n\r\n", 400),
    "chunk longer than its size": (CHUNKED + b"3\r\nabcdef\r\n0\r\n\r\n", 400),
    "chunk size line without CR": (CHUNKED + b"3\nabc\r\n0\r\n\r\n", 400),
    "truncated chunked body": (CHUNKED + b"3\r\nabc\r\n", 400),
    "negative content-length": (b"POST /anything HTTP/1.1\r\n" + H + b"Content-Length: -5\r\n\r\nabc", 400),
    "plus content-length": (b"POST /anything HTTP/1.1\r\n" + H + b"Content-Length: +3\r\n\r\nabc", 400),
    "hex content-length": (b"POST /anything HTTP/1.1\r\n" + H + b"Content-Length: 0x3\r\n\r\nabc", 400),
    "list content-length": (b"POST /anything HTTP/1.1\r\n" + H + b"Content-Length: 3, 3\r\n\r\nabc", 400),
    "differing content-lengths": (b"POST /anything HTTP/1.1\r\n" + H
                                  + b"Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400),
    "repeated content-length": (b"POST /anything HTTP/1.1\r\n" + H
                                + b"Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400),
    "huge content-length": (b"POST /anything HTTP/1.1\r\n" + H + b"Content-Length: " + b"9" * 40 + b"\r\n\r\n", 413),
    "truncated body": (b"POST /anything HTTP/1.1\r\n" + H + b"Content-Length: 10\r\n\r\nabc", 400),
    "te and cl": (b"POST /anything HTTP/1.1\r\n" + H
                  + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 400),
    "te gzip": (b"POST /anything HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip\r\n\r\n", 501),
    "te gzip, chunked": (b"POST /anything HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501),
    "te twice": (b"POST /anything HTTP/1.1\r\n" + H
                 + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 501),
    "te in HTTP/1.0": (b"POST /anything HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    "obs-fold": (b"GET /get HTTP/1.1\r\n" + H + b"X-A: 1\r\n  folded\r\n\r\n", 400),
    "space before colon": (b"GET /get HTTP/1.1\r\nHost : x\r\n\r\n", 400),
    "space in name": (b"GET /get HTTP/1.1\r\n" + H + b"Content Length: 3\r\n\r\n", 400),
    "bare LF": (b"GET /get HTTP/1.1\n" + H + b"\n", 400),
    "bare LF inside a header": (b"GET /get HTTP/1.1\r\nHost: x\nX: y\r\n\r\n", 400),
    "NUL in a value": (b"GET /get HTTP/1.1\r\n" + H + b"X-A: a\x00b\r\n\r\n", 400),
    "NUL in the target": (b"GET /g\x00et HTTP/1.1\r\n" + H + b"\r\n", 400),
    "two spaces": (b"GET  /get HTTP/1.1\r\n" + H + b"\r\n", 400),
    "no version": (b"GET /get\r\n" + H + b"\r\n", 400),
    "lower-case version": (b"GET /get http/1.1\r\n" + H + b"\r\n", 400),
    "HTTP/2.0": (b"GET /get HTTP/2.0\r\n" + H + b"\r\n", 505),
    "garbage": (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(256)) + b"\r\n\r\n", 400),
    "no host": (b"GET /get HTTP/1.1\r\n\r\n", 400),
    "two hosts": (b"GET /get HTTP/1.1\r\n" + H + H + b"\r\n", 400),
    "empty header name": (b"GET /get HTTP/1.1\r\n" + H + b": x\r\n\r\n", 400),
    "truncated head": (b"GET /get HTTP/1.1\r\nHost: x\r\n", 400),
    "long request line": (b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\n" + H + b"\r\n", 414),
    "long line without CRLF": (b"GET /" + b"a" * 20_000, 414),
    "huge head": (b"GET /get HTTP/1.1\r\n" + H + b"X-A: " + b"b" * 70_000 + b"\r\n\r\n", 431),
    "many headers": (b"GET /get HTTP/1.1\r\n" + H + b"X-A: b\r\n" * 20_000 + b"\r\n", 431),
    "huge trailers": (CHUNKED + b"0\r\n" + b"X-T: " + b"t" * 70_000 + b"\r\n\r\n", 431),
}


def test_framing_errors_get_their_status_and_the_proxy_goes_on(live_proxy):
    proxy = live_proxy()
    for name, (request, status) in FRAMING_CASES.items():
        response = exchange(proxy.data_port, request)
        assert first_status(response) == status, (name, response[:200])
        assert b"connection: close" in response.split(b"\r\n\r\n")[0], name
    proxy.assert_serves()
    proxy.stop()


def test_the_negative_chunk_reproducer_answers_and_sigterm_still_stops(live_proxy):
    proxy = live_proxy()
    begin = time.monotonic()
    response = exchange(proxy.data_port, FRAMING_CASES["negative chunk size"][0], half_close=False)
    assert first_status(response) == 400 and time.monotonic() - begin < ANSWER_WITHIN
    proxy.assert_serves()
    proxy.stop()


@pytest.mark.parametrize("request_bytes, echoed", [
    (CHUNKED + b"3;name=value;q=\"a b\"\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n", "abc0123456789"),
    (CHUNKED + b"0000000000000003\r\nabc\r\n0\r\n\r\n", "abc"),
    (b"POST /anything HTTP/1.1\r\n" + H + b"content-length:\t003 \r\n\r\nabc", "abc"),
    (b"\r\nPOST /anything HTTP/1.1\r\n" + H + b"Content-Length: 3\r\n\r\nabc", "abc"),
], ids=["extensions-and-trailers", "leading-zeros", "ows-and-zeros", "leading-crlf"])
def test_valid_framing_is_forwarded_intact(live_proxy, request_bytes, echoed):
    proxy = live_proxy()
    response = exchange(proxy.data_port, request_bytes)
    assert first_status(response) == 200, response[:300]
    assert json.loads(response.split(b"\r\n\r\n", 1)[1])["data"] == echoed


def test_a_connection_token_list_is_understood(live_proxy):
    proxy = live_proxy()
    response = exchange(proxy.data_port, b"GET /get HTTP/1.1\r\nHost: x\r\nConnection: te, close\r\n\r\n", half_close=False)
    assert first_status(response) == 200 and b"\r\nconnection: close" in response.split(b"\r\n\r\n")[0].lower()


def test_bodies_survive_delays_and_aborts(live_proxy):
    proxy = live_proxy()
    body = bytes(range(48, 58)) * 10_000
    by_length = b"POST /anything HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    by_chunks = CHUNKED + b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 3000]), body[i:i + 3000])
                                   for i in range(0, len(body), 3000)) + b"0\r\n\r\n"
    proxy.set_fault(delay__fixed_delay_percent=100, delay__fixed_duration_ms=200)
    for request in (by_length, by_chunks):
        response = exchange(proxy.data_port, request)          # the body waits out the delay, then flows
        assert json.loads(response.split(b"\r\n\r\n", 1)[1])["data"] == body.decode()
    proxy.set_fault(delay__fixed_delay_percent=0, abort__abort_percent=100)
    response = exchange(proxy.data_port, by_length + by_chunks + b"GET /get HTTP/1.1\r\nHost: x\r\n\r\n")
    assert statuses(response) == [503, 503, 503]                # bodies dropped, framing kept


def test_pipelined_aborts_do_not_recurse(live_proxy):
    proxy = live_proxy()
    proxy.set_fault(abort__abort_percent=100)
    response = exchange(proxy.data_port, b"GET /get HTTP/1.1\r\nHost: x\r\n\r\n" * 3000)
    assert statuses(response) == [503] * 3000
    proxy.set_fault(abort__abort_percent=0)
    proxy.assert_serves()


# -- timeouts and the connection cap -------------------------------------------------------------
def test_stalled_requests_get_408(live_proxy):
    proxy = live_proxy("--read-timeout", "1")
    partial_head = exchange(proxy.data_port, b"GET /get HTTP/1.1\r\nHo", half_close=False)
    partial_body = exchange(proxy.data_port, b"POST /anything HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc",
                            half_close=False)
    assert first_status(partial_head) == 408 and first_status(partial_body) == 408
    proxy.assert_serves()


def test_a_dripping_head_does_not_extend_its_deadline(live_proxy):
    proxy = live_proxy("--read-timeout", "1")
    with socket.create_connection(("127.0.0.1", proxy.data_port), timeout=ANSWER_WITHIN) as connection:
        connection.settimeout(0.2)
        begin, received = time.monotonic(), b""
        while not received and time.monotonic() - begin < ANSWER_WITHIN:
            try:
                connection.sendall(b"X")
                received = connection.recv(1000)
            except socket.timeout:
                pass
            except OSError:
                break
    assert first_status(received) == 408


def _open(port: int, count: int, first_bytes: bytes, stack: ExitStack) -> list[socket.socket]:
    sockets = []
    for _ in range(count):
        connection = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=ANSWER_WITHIN))
        if first_bytes:
            connection.sendall(first_bytes)
        sockets.append(connection)
    return sockets


def test_a_thousand_idle_partial_connections_do_not_lock_anyone_out(live_proxy):
    proxy = live_proxy()
    with ExitStack() as stack:
        _open(proxy.data_port, 1000, b"GET /get HTTP/1.1\r\nHo", stack)
        assert proxy.get_many(1)[0][0] in (200, 503)
        assert proxy.admin("GET", "/ready") == (200, "LIVE\n")       # the admin port has its own cap
        _open(proxy.admin_port, 200, b"GET /ready HTTP/1.1\r\nHo", stack)
        assert proxy.admin("GET", "/ready")[0] in (200, 503)
        assert proxy.get_many(1)[0][0] in (200, 503)
    time.sleep(0.5)
    proxy.assert_serves()
    proxy.stop()


def test_beyond_the_cap_busy_connections_get_503_and_idle_ones_make_room(live_proxy):
    proxy = live_proxy("--max-connections", "50")
    with ExitStack() as stack:
        _open(proxy.data_port, 50, b"GET /get HTTP/1.1\r\nHo", stack)          # busy: a head in progress
        time.sleep(0.5)                              # until the proxy has read those bytes
        assert first_status(exchange(proxy.data_port, b"GET /get HTTP/1.1\r\nHost: x\r\n\r\n")) == 503
        assert proxy.admin("GET", "/ready") == (200, "LIVE\n")
    time.sleep(0.5)
    with ExitStack() as stack:
        _open(proxy.data_port, 60, b"", stack)                                  # idle: nothing sent yet
        proxy.assert_serves()


def test_sigterm_stops_it_with_clients_connected(live_proxy):
    proxy = live_proxy()
    with ExitStack() as stack:
        _open(proxy.data_port, 20, b"POST /anything HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nab", stack)
        _open(proxy.data_port, 20, b"", stack)
        time.sleep(0.3)
        proxy.stop()


# -- streaming: memory must not grow with a body -------------------------------------------------
class SinkUpstream:
    """A minimal upstream: counts request body bytes and answers with the count; GET /big?N streams N
    bytes back in chunks. A thread per connection, for these tests only."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve_quietly, args=(connection,), daemon=True).start()

    def _serve_quietly(self, connection: socket.socket) -> None:
        try:
            self._serve(connection)
        except OSError:
            pass                                     # the proxy dropped the connection: that may be the test

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            data = b""
            while b"\r\n\r\n" not in data:
                data += connection.recv(65536)
            head, rest = data.split(b"\r\n\r\n", 1)
            if head.startswith(b"GET /big"):
                self._stream(connection, int(head.split(b"?")[1].split(b" ")[0]))
                return
            count = self._count_body(connection, head.lower(), rest)
            body = str(count).encode()
            connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
                               % (len(body), body))

    @staticmethod
    def _count_body(connection: socket.socket, head: bytes, rest: bytes) -> int:
        """Raw bytes of the body as framed on the wire (chunk lines included, for a chunked one)."""
        buffer = bytearray(1 << 20)
        count, tail = len(rest), rest[-5:]
        if b"content-length:" in head:
            wanted = int(head.split(b"content-length:")[1].split(b"\r\n")[0])
            while count < wanted:
                count += connection.recv_into(buffer)
            return count
        while tail[-5:] != b"0\r\n\r\n":
            got = connection.recv_into(buffer)
            if not got:
                break
            count += got
            tail = (tail + bytes(buffer[max(0, got - 5):got]))[-5:]
        return count

    @staticmethod
    def _stream(connection: socket.socket, total: int) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n")
        piece = b"%x\r\n" % (1 << 20) + b"x" * (1 << 20) + b"\r\n"
        for _ in range(total >> 20):
            connection.sendall(piece)
        connection.sendall(b"0\r\n\r\n")

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def sink():
    upstream = SinkUpstream()
    yield upstream
    upstream.close()


BODY_MB = 200
GROWTH_LIMIT_KB = 50 * 1024


def _send_body(port: int, head: bytes, pieces, count: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as connection:
        connection.sendall(head)
        for _ in range(count):
            connection.sendall(pieces)
        connection.sendall(b"0\r\n\r\n" if b"chunked" in head else b"")
        return connection.recv(1000)


@pytest.mark.parametrize("framing", ["chunked", "content-length"])
def test_a_streamed_body_does_not_grow_memory(live_proxy, sink, framing):
    proxy = live_proxy(upstream=sink.port)
    mb = b"y" * (1 << 20)
    if framing == "chunked":
        head, piece = CHUNKED, b"%x\r\n" % len(mb) + mb + b"\r\n"
        expected = BODY_MB * len(piece) + 5
    else:
        head, piece = b"POST /anything HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (BODY_MB << 20), mb
        expected = BODY_MB << 20
    assert first_status(exchange(proxy.data_port, CHUNKED + b"3\r\nabc\r\n0\r\n\r\n")) == 200   # warm up
    before = proxy.peak_rss_kb()
    response = _send_body(proxy.data_port, head, piece, BODY_MB)
    assert first_status(response) == 200 and response.endswith(str(expected).encode()), response
    assert proxy.peak_rss_kb() - before < GROWTH_LIMIT_KB


def test_a_streamed_response_does_not_grow_memory(live_proxy, sink):
    proxy = live_proxy(upstream=sink.port)
    before = proxy.peak_rss_kb()
    with socket.create_connection(("127.0.0.1", proxy.data_port), timeout=60) as connection:
        connection.sendall(b"GET /big?%d HTTP/1.1\r\nHost: x\r\n\r\n" % (BODY_MB << 20))
        buffer, total, tail = bytearray(1 << 20), 0, b""
        while tail != b"\r\n0\r\n\r\n" and (got := connection.recv_into(buffer)):
            total += got
            tail = (tail + bytes(buffer[max(0, got - 7):got]))[-7:]
            if total < (8 << 20):
                time.sleep(0.001)                    # a slow reader at first: the proxy must hold back
    assert total > BODY_MB << 20
    assert proxy.peak_rss_kb() - before < GROWTH_LIMIT_KB


def test_a_client_that_stops_reading_is_dropped(live_proxy, sink):
    proxy = live_proxy("--read-timeout", "1", upstream=sink.port)
    with socket.create_connection(("127.0.0.1", proxy.data_port), timeout=ANSWER_WITHIN) as connection:
        connection.sendall(b"GET /big?%d HTTP/1.1\r\nHost: x\r\n\r\n" % (BODY_MB << 20))
        time.sleep(4)                                # read nothing: the proxy must give up
        total = 0
        try:
            while got := connection.recv(1 << 20):
                total += len(got)
        except ConnectionResetError:
            pass
    assert total < BODY_MB << 20
    assert first_status(exchange(proxy.data_port, b"GET /big?1048576 HTTP/1.1\r\nHost: x\r\n\r\n")) == 200


# -- the upstream's framing ------------------------------------------------------------------------
class CannedUpstream(SinkUpstream):
    """An upstream that answers every request with the same bytes, then closes."""

    def __init__(self, response: bytes):
        self.response = response
        super().__init__()

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            data = b""
            while b"\r\n\r\n" not in data:
                data += connection.recv(65536)
            connection.sendall(self.response)
            connection.shutdown(socket.SHUT_WR)      # a graceful close: unread input would reset the reply
            connection.settimeout(ANSWER_WITHIN)
            while connection.recv(1 << 20):
                pass


BAD_RESPONSES = {
    "negative chunk size": b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n-6\r\nabc\r\n0\r\n\r\n",
    "0x chunk size": b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n",
    "negative content-length": b"HTTP/1.1 200 OK\r\ncontent-length: -3\r\n\r\nabc",
    "te and cl": b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    "bad status line": b"HTTP/1.1 2000 OK\r\ncontent-length: 0\r\n\r\n",
    "obs-fold": b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nx: a\r\n b\r\n\r\n",
    "huge head": b"HTTP/1.1 200 OK\r\nx: " + b"a" * 70_000 + b"\r\ncontent-length: 0\r\n\r\n",
    "switching protocols": b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\n",
    "closed early": b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc",
}


@pytest.mark.parametrize("name", BAD_RESPONSES)
def test_a_malformed_upstream_response_gets_502_or_a_close(live_proxy, name):
    upstream = CannedUpstream(BAD_RESPONSES[name])
    try:
        proxy = live_proxy(upstream=upstream.port)
        response = exchange(proxy.data_port, b"GET /get HTTP/1.1\r\nHost: x\r\n\r\n", half_close=False)
        assert first_status(response) in (502, 200), response[:200]     # 200: the head went out before the fault
        assert proxy.counters()["upstream_rq_failed"] == 1
        assert proxy.admin("GET", "/ready") == (200, "LIVE\n")
    finally:
        upstream.close()


def test_an_early_answer_drops_the_rest_of_the_body_and_keeps_the_connection(live_proxy):
    upstream = CannedUpstream(b"HTTP/1.1 413 Too Large\r\ncontent-length: 2\r\nconnection: close\r\n\r\nno")
    try:
        proxy = live_proxy(upstream=upstream.port)
        body = b"z" * (20 << 20)
        request = b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
        with socket.create_connection(("127.0.0.1", proxy.data_port), timeout=ANSWER_WITHIN) as connection:
            sender = threading.Thread(target=connection.sendall, args=(request + body + b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n",))
            sender.start()
            received = b""
            while received.count(b"\r\n\r\nno") < 2:
                received += connection.recv(65536) or b"<closed>"
                assert not received.endswith(b"<closed>"), received
            sender.join(ANSWER_WITHIN)
        assert statuses(received) == [413, 413]
    finally:
        upstream.close()


def test_interim_responses_are_relayed_before_the_final_one(live_proxy):
    upstream = CannedUpstream(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
    try:
        proxy = live_proxy(upstream=upstream.port)
        response = exchange(proxy.data_port, b"GET /get HTTP/1.1\r\nHost: x\r\n\r\n")
        assert statuses(response) == [100, 200] and response.endswith(b"\r\n\r\nok")
    finally:
        upstream.close()


class SlowBodyUpstream(CannedUpstream):
    """Writes a response head, then (after a pause) its body, as gunicorn writes them apart."""

    def __init__(self, head: bytes, body: bytes | None, pause: float = 0.2):
        self.head, self.body, self.pause = head, body, pause
        super().__init__(b"")

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            data = b""
            while b"\r\n\r\n" not in data:
                data += connection.recv(65536)
            connection.sendall(self.head)
            time.sleep(self.pause)
            if self.body is not None:
                connection.sendall(self.body)
            connection.shutdown(socket.SHUT_WR)


def test_a_small_body_written_after_its_head_leaves_with_it_in_one_piece(live_proxy):
    upstream = SlowBodyUpstream(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n", b"hello")
    try:
        proxy = live_proxy(upstream=upstream.port)
        with socket.create_connection(("127.0.0.1", proxy.data_port), timeout=ANSWER_WITHIN) as connection:
            connection.sendall(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
            first = connection.recv(65536)
        # the head waited for the body (200 ms later) instead of going out alone
        assert first.startswith(b"HTTP/1.1 200 ") and first.endswith(b"\r\n\r\nhello"), first
    finally:
        upstream.close()


def test_a_head_whose_body_never_comes_is_a_502_not_a_truncated_response(live_proxy):
    upstream = SlowBodyUpstream(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n", None, pause=0)
    try:
        proxy = live_proxy(upstream=upstream.port)
        response = exchange(proxy.data_port, b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n", half_close=False)
        assert statuses(response) == [502], response
        assert proxy.counters()["upstream_rq_failed"] == 1
    finally:
        upstream.close()


# -- the admin API -------------------------------------------------------------------------------
A = "fault.http.abort."
D = "fault.http.delay."
BAD_QUERIES = [
    f"{A}abort_percent=nan", f"{A}abort_percent=inf", f"{A}abort_percent=-inf", f"{A}abort_percent=150",
    f"{A}abort_percent=-1", f"{A}abort_percent=1e309", f"{A}abort_percent=100.0001", f"{A}abort_percent=",
    f"{A}abort_percent=1_0", f"{A}abort_percent=%205", f"{A}abort_percent=0x10", f"{A}abort_percent=" + "9" * 5000,
    f"{A}http_status=0", f"{A}http_status=99999", f"{A}http_status=199", f"{A}http_status=600",
    f"{A}http_status=503.0", f"{A}http_status=" + "5" * 5000, f"{A}http_status=-503", f"{A}http_status=%D9%A3",
    f"{D}fixed_delay_percent=nan", f"{D}fixed_delay_percent=101", f"{D}fixed_duration_ms=-1",
    f"{D}fixed_duration_ms=1.5", f"{D}fixed_duration_ms=1e3", f"{D}fixed_duration_ms=99999999999",
    f"{A}abort_percent=42&bogus=1", f"bogus=1&{A}abort_percent=42", f"{A}abort_percent=42&{A}abort_percent=43",
    f"{A}abort_percent=42&{A}http_status=0", f"{A}abort_percent=42&{A}http_status", f"{A}abort_percent=%ff",
    f"{A}abort_percent=42&&{D}fixed_delay_percent=1", "", f"{A}abort_percent=42&" + "&".join(f"k{i}=1" for i in range(9)),
]


def test_a_rejected_admin_change_changes_nothing(live_proxy):
    proxy = live_proxy()
    proxy.set_fault(abort__abort_percent=7, abort__http_status=502)
    before = proxy.runtime()
    for query in BAD_QUERIES:
        status, body = proxy.admin("POST", "/runtime_modify?" + query)
        assert status == 400, (query[:80], status, body)
        assert proxy.runtime() == before, query[:80]
    proxy.set_fault(abort__abort_percent=12.5, abort__http_status=599, delay__fixed_delay_percent=100,
                    delay__fixed_duration_ms=0)
    assert proxy.runtime()[A + "abort_percent"] == "12.5" and proxy.runtime()[A + "http_status"] == "599"


def test_admin_rejects_bad_methods_and_framing(live_proxy):
    proxy = live_proxy("--read-timeout", "1")
    assert proxy.admin("DELETE", "/runtime") == (405, "use GET or POST\n")
    assert proxy.admin("POST", "/stats?format=json")[0] == 200
    cases = {
        b"GARBAGE\r\n\r\n": 400,
        b"GET /ready HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n": 431,
        b"POST /reset_counters HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n": 400,
        b"POST /reset_counters HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n": 413,
        b"POST /reset_counters HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n": 413,
        b"GET /r\xffeady HTTP/1.1\r\nHost: x\r\n\r\n": 400,
        b"GET /ready HTTP/1.1\r\n\r\n": 400,
        b"POST /reset_counters HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc": 200,
        b"GET /ready HTTP/1.1\r\nHo": 400,
    }
    for request, status in cases.items():
        assert first_status(exchange(proxy.admin_port, request)) == status, request[:60]
    assert first_status(exchange(proxy.admin_port, b"GET /ready HTTP/1.1\r\nHo", half_close=False)) == 408
    assert proxy.admin("GET", "/ready") == (200, "LIVE\n")
