"""Strict HTTP/1.1 message framing (RFC 9112) for the fault proxy: heads, lengths, chunked bodies."""

from __future__ import annotations

import re
import socket
from typing import NamedTuple

MAX_HEAD_BYTES = 64 * 1024          # request or response head, trailers included (431 beyond)
MAX_LINE_BYTES = 8 * 1024           # request line (414 beyond), as Envoy and nginx do
MAX_CHUNK_LINE_BYTES = 4 * 1024     # chunk-size line with its extensions
MAX_LENGTH_DIGITS = 18              # Content-Length below 10^18: a plain int, never a bignum
HEAD_END = b"\r\n\r\n"

_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_FIELD = _TOKEN + rb":[\t\x20-\x7e\x80-\xff]*"      # OWS field-value OWS, as one character class
_FIELDS = rb"(?:\r\n" + _FIELD + rb")*"
# A whole head in one C-level match: this is the hot path. No obs-fold, bare LF, NUL or spaces
# before the colon can pass, which closes the usual request-smuggling doors.
REQUEST_HEAD = re.compile(rb"(" + _TOKEN + rb") ([\x21-\x7e]+) HTTP/([0-9]\.[0-9])" + _FIELDS)
RESPONSE_HEAD = re.compile(rb"HTTP/1\.[0-9] ([0-9]{3})(?: [\t\x20-\x7e\x80-\xff]*)?" + _FIELDS)
FIELD_LINE = re.compile(_FIELD + rb"\r\n")
_QUOTED = rb'"(?:[\t\x20\x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t\x20-\x7e\x80-\xff])*"'
CHUNK_LINE = re.compile(rb"([0-9A-Fa-f]{1,16})(?:[ \t]*;[ \t]*" + _TOKEN + rb"(?:[ \t]*=[ \t]*(?:" + _TOKEN
                        + rb"|" + _QUOTED + rb"))?)*\r\n")

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
           413: "Content Too Large", 414: "URI Too Long", 431: "Request Header Fields Too Large",
           501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
           505: "HTTP Version Not Supported"}


class FramingError(ValueError):
    """Bytes that are not a well-formed HTTP/1.1 message; `status` is the reply it deserves."""

    def __init__(self, why: str, status: int = 400):
        super().__init__(why)
        self.status = status


def header_values(lowered_head: bytes, name: bytes) -> list[bytes]:
    """Every value of one field in a lower-cased, validated head (a find in C: the hot path)."""
    values = []
    start = lowered_head.find(b"\r\n" + name + b":")
    while start >= 0:
        start += len(name) + 3
        end = lowered_head.find(b"\r\n", start)
        end = len(lowered_head) if end < 0 else end
        values.append(lowered_head[start:end].strip(b" \t"))
        start = lowered_head.find(b"\r\n" + name + b":", end)
    return values


def header(lowered_head: bytes, name: bytes) -> bytes | None:
    """One field's value (the first), or None."""
    start = lowered_head.find(b"\r\n" + name + b":")
    if start < 0:
        return None
    start += len(name) + 3
    end = lowered_head.find(b"\r\n", start)
    return lowered_head[start:end if end >= 0 else len(lowered_head)].strip(b" \t")


def content_length(lowered_head: bytes) -> int | None:
    """Content-Length = 1*DIGIT, once (RFC 9112 6.3 allows rejecting repeats, and targets differ
    on them: gunicorn rejects even equal ones), anything else is an error."""
    value = header(lowered_head, b"content-length")
    if value is None:
        return None
    if lowered_head.count(b"\r\ncontent-length:") > 1:
        raise FramingError("more than one content-length field")
    if not value.isdigit():                      # bytes.isdigit: ASCII digits only, not empty
        raise FramingError("a content-length that is not 1*DIGIT")
    if len(value) > MAX_LENGTH_DIGITS and len(value.lstrip(b"0")) > MAX_LENGTH_DIGITS:
        raise FramingError("a content-length beyond 10^18", 413)
    return int(value)


def is_chunked(lowered_head: bytes) -> bool:
    """Transfer-Encoding must be exactly `chunked` when present: other codings are not relayed."""
    if b"\r\ntransfer-encoding:" not in lowered_head:
        return False
    if header_values(lowered_head, b"transfer-encoding") != [b"chunked"]:
        raise FramingError("a transfer-encoding other than chunked", 501)
    return True


def wants_keep_alive(connection: bytes | None, http10: bool) -> bool:
    """Connection is a list of tokens (`close, te`); HTTP/1.0 closes unless asked to keep alive."""
    if connection is None or connection in (b"close", b"keep-alive"):
        return connection == b"keep-alive" if http10 else connection != b"close"
    tokens = {token.strip(b" \t") for token in connection.split(b",")}
    return b"keep-alive" in tokens if http10 else b"close" not in tokens


class RequestHead(NamedTuple):
    method: bytes
    keep_alive: bool
    body: "Body | None"          # None: no body


def parse_request_head(head: bytes) -> RequestHead:
    """Validate a request head (without its blank line) and decide how its body is framed."""
    match = REQUEST_HEAD.fullmatch(head)
    if match is None:
        raise FramingError("a malformed request head")
    if match[3][:1] != b"1":
        raise FramingError("only HTTP/1.x is spoken here", 505)
    lowered = head.lower()
    http10 = match[3] == b"1.0"
    hosts = lowered.count(b"\r\nhost:")
    if hosts > 1 or hosts == 0 and not http10:
        raise FramingError("a request needs one host field")     # RFC 9112 3.2 (optional in 1.0)
    length = content_length(lowered)
    chunked = is_chunked(lowered)
    if chunked and length is not None:
        raise FramingError("both transfer-encoding and content-length")   # the smuggling classic
    if chunked and http10:
        raise FramingError("transfer-encoding in an HTTP/1.0 request")
    keep_alive = wants_keep_alive(header(lowered, b"connection"), http10)
    if chunked:
        return RequestHead(match[1], keep_alive, ChunkedBody())
    return RequestHead(match[1], keep_alive, LengthBody(length) if length else None)


class ResponseHead(NamedTuple):
    status: int
    connection: bytes | None     # its Connection field, lower-cased
    reusable: bool               # the upstream connection may carry another request
    body: "Body | None"


def parse_response_head(head: bytes, head_only: bool) -> ResponseHead:
    """Validate an upstream response head and decide how its body is framed."""
    match = RESPONSE_HEAD.fullmatch(head)
    if match is None:
        raise FramingError("a malformed response head from the upstream", 502)
    status = int(match[1])
    lowered = head.lower()
    connection = header(lowered, b"connection")
    reusable = wants_keep_alive(connection, head.startswith(b"HTTP/1.0"))
    try:
        length = content_length(lowered)
        chunked = is_chunked(lowered)
    except FramingError as error:
        raise FramingError(f"upstream: {error}", 502) from None
    if chunked and length is not None:
        raise FramingError("upstream: both transfer-encoding and content-length", 502)
    if head_only or status in (204, 304) or status < 200:
        body = None
    elif chunked:
        body = ChunkedBody()
    elif length is not None:
        body = LengthBody(length) if length else None
    else:
        body, reusable = CloseBody(), False
    return ResponseHead(status, connection, reusable, body)


# -- parsed heads, remembered ------------------------------------------------------------------------
# A client repeats the same request head and a target the same response head (its Date changes
# once a second), and the same bytes always parse the same way: the checks above run once per
# distinct head instead of once per message (they were most of the proxy's Python time). Only
# short heads are kept, and the table is emptied when full, so its memory stays under 1 MB.
CACHED_HEAD_BYTES = 1024
CACHED_HEADS = 512
_requests: dict[bytes, tuple] = {}
_responses: dict[tuple[bytes, bool], tuple] = {}


def _body_kind(body) -> tuple:
    if body is None:
        return (None, 0)
    return (type(body), getattr(body, "remaining", 0))


def _new_body(kind: tuple):
    cls, length = kind
    if cls is None:
        return None
    return LengthBody(length) if cls is LengthBody else cls()


def _remember(table: dict, key, value) -> None:
    if len(table) >= CACHED_HEADS:
        table.clear()
    table[key] = value


def request_head(head: bytes, end: int) -> RequestHead:
    """parse_request_head(head[:end]) for a head that ends at `end` (its blank line follows)."""
    known = _requests.get(head)
    if known is None:
        request = parse_request_head(head[:end])
        if request.body is None:
            known = request                      # immutable: handed out as it is
        else:
            known = (request.method, request.keep_alive, _body_kind(request.body))
        if len(head) <= CACHED_HEAD_BYTES:
            _remember(_requests, head, known)
        if request.body is None:
            return request
    if type(known) is RequestHead:
        return known
    method, keep_alive, kind = known
    return RequestHead(method, keep_alive, _new_body(kind))


def response_head(head: bytes, head_only: bool) -> ResponseHead:
    """parse_response_head, remembered by the head's bytes."""
    key = (head, head_only)
    known = _responses.get(key)
    if known is None:
        response = parse_response_head(head, head_only)
        if len(head) <= CACHED_HEAD_BYTES:
            _remember(_responses, key, (response.status, response.connection, response.reusable,
                                        _body_kind(response.body)))
        return response
    status, connection, reusable, kind = known
    return ResponseHead(status, connection, reusable, _new_body(kind))


class LengthBody:
    """A Content-Length body: counts bytes down."""

    __slots__ = ("remaining", "done")

    def __init__(self, length: int):
        self.remaining = length
        self.done = length == 0

    def consume(self, data, start: int) -> int:
        """The index in `data` where this body ends (or len(data) if it goes on)."""
        take = min(self.remaining, len(data) - start)
        self.remaining -= take
        self.done = self.remaining == 0
        return start + take


class CloseBody:
    """A response body delimited by the upstream closing the connection."""

    done = False

    def consume(self, data, start: int) -> int:
        return len(data)


class ChunkedBody:
    """A chunked body validated as it streams past (the bytes are relayed unchanged)."""

    __slots__ = ("state", "line", "remaining", "trailer_bytes", "done")

    def __init__(self):
        self.state = "size"          # size | data | data-end | trailer
        self.line = b""
        self.remaining = 0
        self.trailer_bytes = 0
        self.done = False

    def consume(self, data, start: int) -> int:
        """The index in `data` where this body ends (or len(data) if it goes on)."""
        position, end = start, len(data)
        while position < end and not self.done:
            if self.state == "data":
                take = min(self.remaining, end - position)
                position += take
                self.remaining -= take
                if not self.remaining:
                    self.state = "data-end"
                continue
            newline = data.find(b"\n", position)
            if newline < 0:
                self._partial(bytes(data[position:]))
                return end
            line, position = self.line + bytes(data[position:newline + 1]), newline + 1
            self.line = b""
            self._line(line)
        return position

    def _partial(self, piece: bytes) -> None:
        self.line += piece
        limit = MAX_HEAD_BYTES - self.trailer_bytes if self.state == "trailer" else MAX_CHUNK_LINE_BYTES
        if len(self.line) > limit:
            raise FramingError("a chunk line or trailer section too long", 431 if self.state == "trailer" else 400)

    def _line(self, line: bytes) -> None:
        if self.state == "size":
            match = CHUNK_LINE.fullmatch(line)
            if match is None:
                raise FramingError("a bad chunk size line")
            self.remaining = int(match[1], 16)
            self.state = "data" if self.remaining else "trailer"
        elif self.state == "data-end":
            if line != b"\r\n":
                raise FramingError("chunk data longer than its size")
            self.state = "size"
        elif line == b"\r\n":
            self.done = True
        else:
            self.trailer_bytes += len(line)
            if self.trailer_bytes > MAX_HEAD_BYTES:
                raise FramingError("a trailer section too large", 431)
            if FIELD_LINE.fullmatch(line) is None:
                raise FramingError("a malformed trailer field")


Body = LengthBody | ChunkedBody | CloseBody


def local_reply(status: int, body: bytes, keep_alive: bool) -> bytes:
    """A complete plain-text response made by the proxy itself."""
    reason = REASONS.get(status, "Fault Injected")
    connection = "keep-alive" if keep_alive else "close"
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-length: {len(body)}\r\n"
            f"content-type: text/plain\r\nconnection: {connection}\r\n\r\n").encode() + body


def with_connection_header(head: bytes, connection: bytes | None, keep_alive: bool) -> bytes | None:
    """A response head (without its blank line) with the downstream's own Connection header, or
    None when the head already says the right thing (HTTP/1.1 keeps alive by default)."""
    wanted = b"keep-alive" if keep_alive else b"close"
    if connection == wanted or connection is None and keep_alive:
        return None
    lines = [line for line in head.split(b"\r\n") if not line[:11].lower() == b"connection:"]
    lines.append(b"connection: " + wanted)
    return b"\r\n".join(lines) + HEAD_END


def set_nodelay(transport) -> None:
    """TCP_NODELAY, deliberately: every write is a whole message (or the rest of a large one), so
    Nagle could only hold a small reply back until the peer's delayed ACK (tens of ms)."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass                                  # the connection is already gone
