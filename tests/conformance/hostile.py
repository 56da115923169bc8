"""Conformance checks for hostile input and the limits of clients/protocol.py: every request
gets a well-formed reply (never a dropped connection or a hang), jobs reach only the service's
--target, max_duration_ms and max_requests bound a call in progress, connections are capped, and a
job stops when its caller leaves. Early is judged strictly, late generously (a busy 2-core machine)."""

from __future__ import annotations

import http.client
import json
import math
import re
import selectors
import socket
import time
from urllib.parse import urlsplit

from rbl.clients.protocol import CUT_GRACE_MS, MAX_BODY_BYTES, MAX_INSTANCE_CHARS, MAX_JOBS, READ_TIMEOUT_S
from rbl.compiler.urlpath import MAX_TARGET_LENGTH, TARGET_PATH, target_problem

from .checks import PlainSleeps, expand, post
from .profiles import Profile

LATE_S = 2.0                     # how late a bounded reply may be on a loaded machine


def raw_exchange(url: str, data: bytes, shut_write: bool = False, timeout: float = READ_TIMEOUT_S + 10,
                 pause_s: float = 0.0) -> tuple[int, object, float]:
    """Send raw bytes and read one HTTP reply: (status, JSON body, seconds). AssertionError when the
    connection is dropped without a reply or no reply comes within `timeout`."""
    parts = urlsplit(url)
    began = time.monotonic()
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
            if pause_s:
                time.sleep(pause_s)
            if shut_write:
                sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass                         # the service may answer and close before all of it is sent
        response = http.client.HTTPResponse(sock)
        try:
            response.begin()
            body = response.read()
        except TimeoutError:
            raise AssertionError(f"no reply within {timeout:g} s to {data[:80]!r}") from None
        except (OSError, http.client.HTTPException) as error:
            raise AssertionError(f"connection dropped without a reply to {data[:80]!r}: {error!r}") from None
    try:
        decoded = json.loads(body)
    except ValueError:
        raise AssertionError(f"reply to {data[:80]!r} is not JSON: {body[:200]!r}") from None
    return response.status, decoded, time.monotonic() - began


def post_raw(body: bytes, headers: str = "", length: int | None = None) -> bytes:
    length = len(body) if length is None else length
    return (f"POST /run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{headers}"
            f"Content-Length: {length}\r\n\r\n").encode() + body


def job_for(proxy, **fields) -> dict:
    return {"strategy": [], "target_url": f"http://127.0.0.1:{proxy.data_port}/bytes/100", "successes": 1,
            "max_requests": 5, "share": "user", "instance": "hostile", "vu": 1, **fields}


def assert_error(url: str, data: bytes, statuses: tuple[int, ...], what: str, **options) -> float:
    status, reply, seconds = raw_exchange(url, data, **options)
    assert status in statuses and isinstance(reply, dict) and reply.get("error"), \
        f"{what}: answered {status} {reply!r}, expected {statuses} with an error"
    return seconds


def assert_healthy(url: str) -> None:
    status, health = post(url, "/health", method="GET")
    assert status == 200 and health["protocol"] == 1, f"GET /health answered {status} {health}"


# -- request parsing ------------------------------------------------------------------------------
def _json_with(job: dict, key: str, literal: str) -> bytes:
    """The job's JSON with `key`'s value replaced by a raw JSON literal (numbers JSON cannot hold)."""
    marker = "__RAW__"
    return json.dumps({**job, key: marker}).replace(f'"{marker}"', literal).encode()


def check_malformed_bodies(url: str, proxy) -> None:
    job = job_for(proxy)
    huge = "9" * 5000
    cases = {
        "5000-digit integer": _json_with(job, "successes", huge),
        "5000-digit integer in vu": _json_with(job, "vu", huge),
        "5000-digit integer in an unknown field": _json_with(job, "extra", huge),
        "5000-digit negative": _json_with(job, "max_requests", "-" + huge),
        "1e400": _json_with(job, "max_requests", "1e400"),
        "NaN": _json_with(job, "max_duration_ms", "NaN"),
        "Infinity": _json_with(job, "max_duration_ms", "Infinity"),
        "100k-deep arrays": b"[" * 100_000 + b"]" * 100_000,
        "100k-deep objects in a field": _json_with(job, "instance", '{"a":' * 100_000 + "1" + "}" * 100_000),
        "not JSON": b"{\"strategy\": [",
        "a bad \\u escape": b'{"instance": "\\uZZZZ"}',
        "non-UTF-8": b'{"instance": "\xff\xfe"}',
        "UTF-16": json.dumps(job).encode("utf-16"),
        "a JSON array": b"[]",
        "empty": b"",
        # what RFC 8259 does not allow, refused by every runtime's parser alike
        "a \\x escape": _json_with(job, "instance", '"\\x41"'),
        "a raw control character in a string": _json_with(job, "instance", '"a\x01b"'),
        "a vertical tab before the value": b"\x0b" + json.dumps(job).encode(),
        "a stray } after the value": json.dumps(job).encode() + b" }",
        "a stray ] after the value": json.dumps(job).encode() + b"]",
        "two values": json.dumps(job).encode() + b" {}",
        # a float where an integer is due, whatever keys come before or after it
        "1.0 before an integer-like key": _json_with({**job, "0": 0}, "successes", "1.0"),
        "1.0 after a repeated key": b'{"x": 1, "x": 1, ' + _json_with(job, "successes", "1.0")[1:],
    }
    for what, body in cases.items():
        assert_error(url, post_raw(body), (400,), what)
    # and an integer stays one, whatever floats and keys surround it
    for what, body in {"an integer after a float and an integer-like key": b'{"a": 1.5, "0": 2, '
                       + json.dumps(job_for(proxy, max_duration_ms=5000))[1:].encode()}.items():
        status, reply, _ = raw_exchange(url, post_raw(body))
        assert status == 200, f"{what}: answered {status} {reply!r:.200}"
    assert_healthy(url)


def check_instance_counts_characters(url: str, proxy) -> None:
    """`instance` is at most MAX_INSTANCE_CHARS characters: code points, not UTF-16 units or bytes."""
    for instance, expected in (("\U0001F600" * MAX_INSTANCE_CHARS, 200), ("\U0001F600" * (MAX_INSTANCE_CHARS + 1), 400),
                               ("\u00e9" * MAX_INSTANCE_CHARS, 200)):
        status, reply = post(url, "/run", job_for(proxy, instance=instance, max_duration_ms=5000))
        assert status == expected, f"an instance of {len(instance)} {instance[0]!r}: answered {status} {reply!r:.200}"


def wrong_values(port: int) -> dict[str, list[object]]:
    """Per job field, values of the wrong type or out of protocol.py's ranges."""
    base = f"http://127.0.0.1:{port}"
    counts = ["x", 1.5, True, [], {}, 0, -1, 10**7, 2**63 - 1]
    return {
        "successes": counts, "max_requests": counts,
        "vu": ["1", 1.0, True, -1, 2**31, [], {}],
        "max_duration_ms": ["1", 1.5, True, 0, -5, 10**12, [], {}],
        "share": [1, True, "everyone", [], {}],
        "instance": [5, True, [], {}, "x" * 5000],
        "strategy": ["retry", 5, {}, [1], [{"pattern": 1}], [{"params": {}}], [{"pattern": "retry", "params": []}],
                     [{"pattern": "baseline"}] * 9, [{"pattern": "no_such_pattern"}]],
        "target_url": [5, True, [], "", "ftp://127.0.0.1/", "http://", "http://[::1/x", "http:///x",
                       "http://127.0.0.1:99999/", "http://127.0.0.1:abc/", "http://127.0.0.1:-1/",
                       f"{base}/bytes/10 x", f"{base}/a\tb", f"{base}/\x00", f"{base}/\u00e9", f"{base}/" + "a" * 5000],
    }


def check_wrong_types_for_every_field(url: str, proxy) -> None:
    for key, values in wrong_values(proxy.data_port).items():
        for value in values:
            job = job_for(proxy, **{key: value})
            assert_error(url, post_raw(json.dumps(job).encode()), (400,), f"{key} = {value!r:.60}")
    for key in ("successes", "max_requests"):
        job = job_for(proxy)
        del job[key]
        assert_error(url, post_raw(json.dumps(job).encode()), (400,), f"no {key}")


def check_wrong_parameter_values(url: str, proxy, profile: Profile) -> None:
    """Each parameter of a valid configuration, replaced by a wrong type, a negative or a huge value."""
    configurations = [("retry", profile.retry_fixed(3, 10))] if profile.retry_fixed else []
    if profile.breaker:
        configurations.append(("circuit_breaker", profile.breaker(2, 100)))
    for pattern, params in configurations:
        for key in params:
            for literal in ('"x"', "true", "-1", "[]", "{}", "1e400", "NaN", "9" * 5000, "1e300"):
                if literal == "1e300" and isinstance(params[key], str):
                    continue
                step = json.dumps({"pattern": pattern, "params": {**params, key: "__RAW__"}})
                body = json.dumps(job_for(proxy, strategy="__STEP__")).replace('"__STEP__"', f"[{step}]")
                body = body.replace('"__RAW__"', literal)
                assert_error(url, post_raw(body.encode()), (400,), f"{pattern} {key} = {literal[:20]}")
    assert_healthy(url)


def check_framing(url: str, proxy) -> None:
    """Bad Content-Length values, chunked bodies, oversized bodies and headers, bad request lines."""
    body = json.dumps(job_for(proxy)).encode()
    for length in ("abc", "-1", "+5", "1e3", " ", "99999999999999999999999"):
        data = body_with_length(body, length)
        assert_error(url, data, (400,), f"Content-Length: {length!r}")
    assert_error(url, f"POST /run HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                 + body, (400,), "two different Content-Lengths")
    chunked = (b"POST /run HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + f"{len(body):x}".encode()
               + b"\r\n" + body + b"\r\n0\r\n\r\n")
    assert_error(url, chunked, (411,), "a chunked body")
    assert_error(url, post_raw(b"", length=MAX_BODY_BYTES + 1), (413,), "Content-Length over the cap")
    assert_error(url, post_raw(b"x" * (MAX_BODY_BYTES + 1)), (413,), "a body over the cap")
    assert_error(url, b"GET /health HTTP/1.1\r\n" + b"X-Big: " + b"a" * 100_000 + b"\r\n\r\n", (431,),
                 "a 100 KB header")
    for line in (b"GARBAGE\r\n\r\n", b"GET /health\r\n\r\n", b"GET /health HTTP/9.9\r\n\r\n", b"\x00\xff\r\n\r\n",
                 b"GET http://elsewhere/health HTTP/1.1\r\n\r\n", b"GET /health HTTP/1.1\r\nno colon\r\n\r\n"):
        assert_error(url, line, (400,), f"request {line[:30]!r}")
    assert_error(url, b"DELETE /run HTTP/1.1\r\n\r\n", (405,), "DELETE /run")
    assert_error(url, b"GET /nowhere HTTP/1.1\r\n\r\n", (404,), "GET /nowhere")
    for header in (b"X: a\x00b", b"X: \x7f", b"X: a\x1bb"):
        assert_error(url, b"GET /health HTTP/1.1\r\n" + header + b"\r\n\r\n", (400,), f"header {header!r}")
    assert_healthy(url)


# Methods a client of this service never sends: each still gets a JSON 4xx, never a dropped
# connection. CONNECT is the one HTTP servers like to hand elsewhere (Node's emits an event and,
# without a listener, closes the connection).
ODD_REQUESTS = [b"CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n",
                b"CONNECT /run HTTP/1.1\r\nHost: x\r\n\r\n",
                b"CONNECT /health HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}",
                b"CONNECT [::1]:80 HTTP/1.1\r\n\r\n",
                b"OPTIONS * HTTP/1.1\r\n\r\n", b"OPTIONS /run HTTP/1.1\r\n\r\n",
                b"TRACE /health HTTP/1.1\r\n\r\n", b"PUT /run HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}",
                b"PATCH /run HTTP/1.1\r\n\r\n", b"PROPFIND /health HTTP/1.1\r\n\r\n",
                b"BREW /health HTTP/1.1\r\n\r\n", b"get /health HTTP/1.1\r\n\r\n",
                b"POST\t/run HTTP/1.1\r\n\r\n", b"ABCDEFGHIJKLMNOPQRSTUVWXYZ /run HTTP/1.1\r\n\r\n",
                b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", b"M-SEARCH * HTTP/1.1\r\n\r\n"]


def check_odd_methods_get_4xx(url: str) -> None:
    for request in ODD_REQUESTS:
        assert_error(url, request, tuple(range(400, 500)), f"request {request[:40]!r}")
    assert_healthy(url)


def check_head_has_no_body(url: str) -> None:
    """A reply to HEAD carries no body (RFC 9110 9.3.2): a HEAD and a GET sent together on one
    connection get two replies, the second one the GET's (unless the first closed the connection)."""
    parts = urlsplit(url)
    for path in (b"/health", b"/run", b"/nowhere"):
        with socket.create_connection((parts.hostname, parts.port), timeout=READ_TIMEOUT_S + 10) as sock:
            sock.sendall(b"HEAD " + path + b" HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            shared = _OneReader(sock)    # both replies read from one buffer, as a client's would
            head = http.client.HTTPResponse(shared, method="HEAD")
            try:
                head.begin()
                head.read()
            except (OSError, http.client.HTTPException) as error:
                raise AssertionError(f"HEAD {path.decode()}: no reply: {error!r}") from None
            assert 400 <= head.status < 500, f"HEAD {path.decode()} answered {head.status}"
            if head.will_close:
                continue                 # it closed the connection: nothing can be misread
            following = http.client.HTTPResponse(shared)
            try:
                following.begin()
                body = json.loads(following.read())
            except (OSError, http.client.HTTPException, ValueError) as error:
                raise AssertionError(f"after HEAD {path.decode()}, the next reply is unreadable ({error!r}): the "
                                     "HEAD reply had a body") from None
            assert following.status == 200 and body.get("protocol") == 1, \
                f"after HEAD {path.decode()}, GET /health answered {following.status} {body!r:.200}"


class _OneReader:
    """A socket whose makefile() is always the same buffered file, which a finished HTTPResponse
    does not close: several replies read in turn from one connection, as a keep-alive client does."""

    def __init__(self, sock: socket.socket):
        self.file = sock.makefile("rb")

    def makefile(self, *args, **kwargs):
        return self

    def close(self) -> None:
        pass

    def __getattr__(self, name: str):
        return getattr(self.file, name)


def check_request_targets_and_empty_lines(url: str, proxy) -> None:
    """The route is the request target's path (a query does not change it), and empty lines before a
    request line are skipped (RFC 9112 2.2), as every runtime does."""
    for target in (b"/health?probe=1", b"/health?x=%zz", b"/health?"):
        status, reply, _ = raw_exchange(url, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 200 and reply.get("protocol") == 1, f"GET {target.decode()}: {status} {reply!r:.200}"
    body = json.dumps(job_for(proxy, max_duration_ms=5000)).encode()
    status, reply, _ = raw_exchange(url, post_raw(body).replace(b"POST /run ", b"POST /run?vu=2 "))
    assert status == 200 and reply.get("stopped_by"), f"POST /run?vu=2: {status} {reply!r:.200}"
    status, reply, _ = raw_exchange(url, b"\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200 and reply.get("protocol") == 1, f"empty lines, then GET /health: {status} {reply!r:.200}"


def body_with_length(body: bytes, length: str) -> bytes:
    return f"POST /run HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n".encode() + body


def check_short_requests_time_out(url: str, proxy) -> None:
    """A body shorter than its Content-Length, or headers that never end: 408 (or 400) after the read
    timeout, not a hang; and a caller that closes early gets 400 at once."""
    body = json.dumps(job_for(proxy)).encode()
    seconds = assert_error(url, post_raw(body, length=len(body) + 10), (408, 400), "a short body")
    assert seconds <= READ_TIMEOUT_S + LATE_S * 2, f"a short body was answered after {seconds:.1f} s"
    seconds = assert_error(url, b"POST /run HTTP/1.1\r\nHost: x\r\n", (408, 400), "unfinished headers")
    assert seconds <= READ_TIMEOUT_S + LATE_S * 2, f"unfinished headers were answered after {seconds:.1f} s"
    seconds = assert_error(url, post_raw(body, length=len(body) + 10), (400,), "a short body, then EOF",
                           shut_write=True)
    assert seconds < READ_TIMEOUT_S, "a body cut by the caller's close must be answered at once"
    assert_healthy(url)


# -- where jobs may go ------------------------------------------------------------------------------
def check_only_the_target_is_reachable(url: str, proxy) -> None:
    port = proxy.data_port
    for target in (f"http://127.0.0.2:{port}/bytes/10", f"http://localhost:{port}/bytes/10",
                   f"http://127.0.0.1:{proxy.admin_port}/stats", f"http://127.0.0.1:{port}@127.0.0.2:{port}/pwned",
                   f"http://127.0.0.1:{port}:{port}/", f"https://127.0.0.1:{port}/", f"HTTP://127.0.0.1:{port}/",
                   "http://127.0.0.1/bytes/10", f"http://[::1]:{port}/", f"http://127.0.0.1:{port}#frag"):
        status, reply = post(url, "/run", job_for(proxy, target_url=target))
        assert status == 400 and reply.get("error"), f"target {target} answered {status}: {reply}"
    status, reply = post(url, "/run", job_for(proxy, target_url=f"http://127.0.0.1:{port}/bytes/10?x=1"))
    assert status == 200 and reply["stopped_by"] == "successes", f"the --target answered {status}: {reply}"


# -- which target URLs a job may have -------------------------------------------------------------------
def compiler_accepts(path: str) -> bool:
    """The compiler's rule for a target path (rbl/compiler/urlpath.py). The whole path must match:
    TARGET_PATH's `$` also matches before a final newline, which no client can put in a request."""
    return target_problem(path) is None and TARGET_PATH.fullmatch(path) is not None


def runs(target_url: str, port: int) -> bool:
    """Whether a client whose --target is 127.0.0.1:port must run a job on target_url (protocol.py):
    http://127.0.0.1:PORT (1 to 5 digits) and a target path the compiler accepts, or none at all."""
    if not target_url.startswith("http://"):
        return False
    rest = target_url[len("http://"):]
    authority = re.match(r"[^/?#]*", rest)[0]
    path = rest[len(authority):]
    address = re.fullmatch(r"127\.0\.0\.1:([0-9]{1,5})", authority)
    return bool(address) and int(address[1]) == port and (path == "" or compiler_accepts(path))


# Paths the compiler accepts or refuses, for the wrong turns a client can take: `%` escapes, the
# characters RFC 3986 reserves or excludes, `//`, `@`, brackets, fragments, lengths at the limit.
TARGET_PATHS = ["", "/", "/bytes/10", "/%", "/%zz", "/%4", "/%4g", "/%g4", "/%41", "/%2F", "/%00", "/a%", "/a%2",
                "/a?%", "/a?b=%zz", "/a?b=%2", "/a?b=%20&c=d", "/a?b?c", "/a?/b//c", "/?", "//", "//x", "/a//b",
                "/a@b", "/a?b@c", "/a[b]", "/a]", "/a#f", "/a?b#f", "/#", "/a\\b", "/a b", "/a\tb", "/a\n", "/a\r\nX: y",
                "/\u00e9", "/%C3%A9", "/a|b", "/a^b", "/a{b}", '/a"b', "/a<b>", "/a`b", "/a\x7f", "/!$&'()*+,;=:~-._",
                "/:80", "?x=1", "x", ":1/", "/" + "a" * (MAX_TARGET_LENGTH - 1), "/" + "a" * MAX_TARGET_LENGTH,
                "/a?" + "b" * (MAX_TARGET_LENGTH - 3), "/a?" + "b" * (MAX_TARGET_LENGTH - 2),
                "/" + "%41" * ((MAX_TARGET_LENGTH - 1) // 3), "/" + "a" * 100_000]


def target_urls(port: int) -> list[str]:
    """Target URLs to try: the paths above on the --target, and other authorities and schemes."""
    base = f"http://127.0.0.1:{port}"
    others = [f"http://127.0.0.1:{port}:{port}/", f"http://127.0.0.1:{port}@127.0.0.1:{port}/",
              f"http://127.0.0.1:{port}\\@x/", f"http://user@127.0.0.1:{port}/", f"http://:@127.0.0.1:{port}/",
              "http://127.0.0.1:/", f"http://127.0.0.1:{port}0/", f"http://127.0.0.1:+{port}/",
              f"http://127.0.0.1:-{port}/", "http://127.0.0.1:65536/", "http://127.0.0.1:99999/", "http://127.0.0.1:0/",
              f"http://127.0.0.1:00000{port}/", "http://[::1", f"http://[::1]:{port}/", f"http://[127.0.0.1]:{port}/",
              f"http://[::1:{port}/", f"http://127.0.0.1]:{port}/", f"http://127.0.0.1.:{port}/",
              f"http://127.0.0.1%2e:{port}/", f"https://127.0.0.1:{port}/", f"HTTP://127.0.0.1:{port}/",
              f"Http://127.0.0.1:{port}/", f"ftp://127.0.0.1:{port}/", "file:///etc/passwd", f"http:/127.0.0.1:{port}/",
              f"http:127.0.0.1:{port}/", f"//127.0.0.1:{port}/", "/bytes/10", f" {base}/", f"{base}/ ", f"\t{base}/",
              f"{base}\n", f"http://127.0.0.1 :{port}/", f"http://127.0.0.1:{port} /", f"{base}#x", f"{base}?x=1",
              "http://", "http:///x", ""]
    return [base + path for path in TARGET_PATHS] + others


def assert_target_url(url: str, proxy, target_url: str) -> None:
    """One job on target_url: run (200, its one request answered by the target) exactly when the
    compiler's rule says so, else a 400 with an error."""
    status, reply = post(url, "/run", job_for(proxy, target_url=target_url, successes=1, max_requests=1,
                                               max_duration_ms=10_000))
    shown = f"{target_url[:100]!r}{'...' if len(target_url) > 100 else ''}"
    if runs(target_url, proxy.data_port):
        assert status == 200, f"target_url {shown} (the compiler accepts its path) answered {status} {reply!r:.200}"
        sent = [request for call in reply["calls"] for request in call["requests"]]
        assert len(sent) == 1 and sent[0][2] != 0, f"target_url {shown}: the target did not answer: {sent}"
    else:
        assert status == 400 and isinstance(reply, dict) and reply.get("error"), \
            f"target_url {shown} (the compiler refuses it) answered {status} {reply!r:.200}, expected 400"


def check_target_urls_follow_the_compilers_rule(url: str, proxy) -> None:
    for target_url in target_urls(proxy.data_port):
        assert_target_url(url, proxy, target_url)
    assert_healthy(url)


# -- limits inside a call ------------------------------------------------------------------------------
def _cut(reply: dict) -> dict:
    calls = expand(reply["calls"])
    assert calls and calls[-1].get("cut_short") is True and calls[-1]["ok"] is False, \
        f"the last call must be marked cut short: {reply['calls'][-3:]}"
    assert all(not c.get("cut_short") for c in calls[:-1]), "only the last call can be cut short"
    return calls[-1]


def _timed_job(url: str, job: dict) -> tuple[dict, float]:
    began = time.monotonic()
    status, reply = post(url, "/run", job)
    assert status == 200, f"POST /run answered {status}: {reply}"
    return reply, time.monotonic() - began


def _assert_bounded(reply: dict, seconds: float, max_duration_ms: int, what: str) -> None:
    assert reply["stopped_by"] == "max_duration", f"{what}: stopped by {reply['stopped_by']}"
    assert reply["total_us"] >= max_duration_ms * 1000, f"{what}: ended before max_duration_ms"
    late = seconds - max_duration_ms / 1000
    assert late <= CUT_GRACE_MS / 1000 + LATE_S, f"{what}: answered {late:.2f} s after max_duration_ms"


def check_max_duration_bounds_a_wait(url: str, proxy, profile: Profile, max_duration_ms: int = 600) -> None:
    proxy.set_fault(abort__abort_percent=100, abort__http_status=503)
    huge_wait = profile.retry_fixed(10**9, 10**9)            # a billion attempts, 11.6 days apart
    reply, seconds = _timed_job(url, job_for(proxy, strategy=[{"pattern": "retry", "params": huge_wait}],
                                             max_requests=10**6, max_duration_ms=max_duration_ms))
    _assert_bounded(reply, seconds, max_duration_ms, "a retry waiting 10^9 ms")
    call = _cut(reply)
    assert len(call["requests"]) == 1 and call["requests"][0][2] == 503


def check_max_duration_bounds_many_attempts(url: str, proxy, profile: Profile, max_duration_ms: int = 600) -> None:
    proxy.set_fault(abort__abort_percent=100, abort__http_status=503)
    endless = profile.retry_fixed(10**9, 1)
    reply, seconds = _timed_job(url, job_for(proxy, strategy=[{"pattern": "retry", "params": endless}],
                                             max_requests=10**6, max_duration_ms=max_duration_ms))
    _assert_bounded(reply, seconds, max_duration_ms, "a retry of 10^9 attempts")
    assert len(_cut(reply)["requests"]) >= 2


def check_max_duration_bounds_a_request(url: str, proxy, max_duration_ms: int = 600) -> None:
    proxy.set_fault(abort__abort_percent=0, delay__fixed_delay_percent=100, delay__fixed_duration_ms=10_000)
    try:
        reply, seconds = _timed_job(url, job_for(proxy, max_duration_ms=max_duration_ms))
    finally:
        proxy.set_fault(delay__fixed_delay_percent=0, delay__fixed_duration_ms=0)
    _assert_bounded(reply, seconds, max_duration_ms, "a request delayed 10 s")
    call = _cut(reply)
    assert [r[2] for r in call["requests"]] == [0], f"the interrupted request has status 0: {call}"


def check_request_budget_within_a_call(url: str, proxy, profile: Profile) -> None:
    proxy.set_fault(abort__abort_percent=100, abort__http_status=503)
    for attempts, max_requests, sizes in ((200, 5, [5]), (3, 5, [3, 2])):
        params = profile.retry_fixed(attempts, 1)
        reply, _ = _timed_job(url, job_for(proxy, strategy=[{"pattern": "retry", "params": params}],
                                           max_requests=max_requests, max_duration_ms=30_000))
        calls = expand(reply["calls"])
        assert [len(c["requests"]) for c in calls] == sizes, \
            f"{attempts} attempts, max_requests {max_requests}: requests per call {[len(c['requests']) for c in calls]}"
        assert reply["stopped_by"] == "max_requests"
        _cut(reply)


# -- connections ----------------------------------------------------------------------------------------
def check_connection_cap(url: str, proxy, profile: Profile, connections: int = MAX_JOBS + 100,
                         job_ms: int = 10_000) -> None:
    """More concurrent jobs than MAX_JOBS: each answered 200 or 503, at least the excess 503. The
    jobs last job_ms: if opening every connection took longer (a loaded machine), the first jobs may
    have ended and freed their slots before the last came, so it is tried again with longer jobs."""
    proxy.set_fault(abort__abort_percent=100, abort__http_status=503)
    while True:
        job = job_for(proxy, strategy=[{"pattern": "retry", "params": profile.retry_fixed(2, 10**9)}],
                      max_requests=10, max_duration_ms=job_ms)
        timing: dict[str, float] = {}
        statuses = _concurrent_statuses(url, post_raw(json.dumps(job).encode()), connections,
                                        timeout=job_ms / 1000 + 30, timing=timing)
        if timing["sent_s"] < job_ms / 1000 / 2 or job_ms >= 90_000:
            break
        job_ms *= 3
    dropped = statuses.count(None)
    assert dropped == 0, f"{dropped} of {connections} connections were dropped without a reply"
    assert set(statuses) <= {200, 503}, sorted(set(statuses))
    assert statuses.count(503) >= connections - MAX_JOBS, \
        f"{statuses.count(200)} jobs ran at once; at most {MAX_JOBS} (sent within {timing['sent_s']:.1f} s)"
    assert statuses.count(200) >= 1
    assert_healthy(url)


def check_over_capacity_is_answered_promptly(url: str, proxy, profile: Profile, excess: int = 100) -> None:
    """With MAX_JOBS jobs running, each caller beyond them gets its 503 at once: within LATE_S of its
    request, plus what scheduling added to a plain sleep in this process meanwhile, even though
    every caller keeps its connection open until all have their replies (as one reading every reply
    before closing any does). A service that lingers over refused connections one after another
    keeps the last caller waiting for all the others' lingering."""
    proxy.set_fault(abort__abort_percent=100, abort__http_status=503)
    job = job_for(proxy, strategy=[{"pattern": "retry", "params": profile.retry_fixed(2, 10**9)}],
                  max_requests=10, max_duration_ms=180_000)
    request = post_raw(json.dumps(job).encode())
    parts = urlsplit(url)
    before = proxy.counters().get("downstream_rq_total", 0)
    running: list[socket.socket] = []
    try:
        for _ in range(MAX_JOBS):
            running.append(socket.create_connection((parts.hostname, parts.port), timeout=10))
            running[-1].sendall(request)
        # every job has sent its first request and waits to retry: the service is as busy as
        # MAX_JOBS waiting jobs make it, and no busier
        _wait_for_first_requests(proxy, before, MAX_JOBS)
        with PlainSleeps([10.0]) as reference:
            replies = _held_replies(url, request, excess, timeout=60)
        statuses = [status for status, _ in replies]
        assert statuses == [503] * excess, f"callers beyond {MAX_JOBS} jobs got {sorted(set(map(str, statuses)))}"
        worst = max(seconds for _, seconds in replies)
        slack = reference.worst_ms / 1000
        assert worst <= LATE_S + slack, \
            (f"a caller beyond the cap got its 503 {worst:.2f} s after its request (median "
             f"{sorted(s for _, s in replies)[excess // 2]:.2f} s; plain sleeps here were up to {slack:.2f} s late)")
    finally:
        for sock in running:
            sock.close()
    deadline = time.monotonic() + 30     # the jobs notice their callers left within DISCONNECT_CHECK_S
    while (status := post(url, "/health", method="GET")[0]) != 200 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert status == 200, f"GET /health answered {status} 30 s after the jobs' callers left"


def _wait_for_first_requests(proxy, before: int, jobs: int, stall_s: float = 30.0) -> None:
    """Until `jobs` jobs have each sent a request through the proxy. A loaded machine starts them
    slowly (hundreds of waiting jobs share one process), so it is judged by progress: it fails
    once stall_s pass with no new request."""
    started, progress_at = 0, time.monotonic()
    while (now_started := proxy.counters().get("downstream_rq_total", 0) - before) < jobs:
        if now_started > started:
            started, progress_at = now_started, time.monotonic()
        assert time.monotonic() - progress_at < stall_s, \
            f"only {started} of {jobs} jobs sent a request; none more in the last {stall_s:.0f} s"
        time.sleep(0.2)


def _held_replies(url: str, request: bytes, count: int, timeout: float) -> list[tuple[int | None, float]]:
    """Open `count` connections one after another, each sending `request`, and close none until all
    have a reply: (status, seconds from its request to its whole reply) per connection."""
    parts = urlsplit(url)
    selector = selectors.DefaultSelector()
    sent: dict[socket.socket, float] = {}
    received: dict[socket.socket, bytes] = {}
    done: dict[socket.socket, float] = {}

    def read(wait: float) -> None:
        for key, _ in selector.select(timeout=wait):
            sock = key.fileobj
            try:
                chunk = sock.recv(65536)
            except OSError:
                chunk = b""
            received[sock] += chunk
            if not chunk or _complete(received[sock]):
                done[sock] = time.monotonic()
                selector.unregister(sock)

    try:
        for _ in range(count):
            sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
            sock.sendall(request)
            sent[sock] = time.monotonic()
            received[sock] = b""
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
            read(0)                      # replies that came already are timed now, not after the loop
        deadline = time.monotonic() + timeout
        while len(done) < count and time.monotonic() < deadline:
            read(0.5)
        return [(int(received[s][9:12]) if s in done and received[s].startswith(b"HTTP/1.1 ") and _complete(received[s])
                 else None, done.get(s, math.inf) - sent[s]) for s in sent]
    finally:
        for sock in sent:
            sock.close()


def _concurrent_statuses(url: str, request: bytes, count: int, timeout: float,
                         timing: dict | None = None) -> list[int | None]:
    """Open `count` connections at once, send `request` on each, and read each reply's status;
    timing["sent_s"]: how long sending them all took."""
    parts = urlsplit(url)
    selector = selectors.DefaultSelector()
    received: dict[socket.socket, bytes] = {}
    started = time.monotonic()
    for _ in range(count):
        sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
        sock.sendall(request)
        sock.setblocking(False)
        received[sock] = b""
        selector.register(sock, selectors.EVENT_READ)
    if timing is not None:
        timing["sent_s"] = time.monotonic() - started
    deadline = time.monotonic() + timeout
    open_count = count
    while open_count and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=1.0):
            sock = key.fileobj
            try:
                chunk = sock.recv(65536)
            except OSError:
                chunk = b""
            received[sock] += chunk
            if not chunk or _complete(received[sock]):
                selector.unregister(sock)
                sock.close()             # as the runner does: the service may wait for it
                open_count -= 1
    statuses = []
    for sock, data in received.items():
        sock.close()
        statuses.append(int(data[9:12]) if data.startswith(b"HTTP/1.1 ") and _complete(data) else None)
    return statuses


def _complete(data: bytes) -> bool:
    head, _, body = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def check_disconnect_stops_the_job(url: str, proxy, profile: Profile) -> None:
    """A job whose caller closed the connection sends no more requests soon after."""
    proxy.set_fault(abort__abort_percent=100, abort__http_status=503)
    job = job_for(proxy, strategy=[{"pattern": "retry", "params": profile.retry_fixed(10**9, 20)}],
                  max_requests=10**6, max_duration_ms=60_000)
    parts = urlsplit(url)
    before = proxy.counters().get("downstream_rq_total", 0)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(post_raw(json.dumps(job).encode()))
        time.sleep(0.5)
    running = proxy.counters().get("downstream_rq_total", 0)
    assert running > before, "the job sent no request before its caller left"
    time.sleep(1.5)                      # the job notices within DISCONNECT_CHECK_S plus a wait
    stopped = proxy.counters().get("downstream_rq_total", 0)
    time.sleep(1.0)
    assert proxy.counters().get("downstream_rq_total", 0) == stopped, \
        "the job still sends requests 1.5 s after its caller disconnected"
    assert_healthy(url)
