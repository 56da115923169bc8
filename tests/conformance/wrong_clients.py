"""Deliberately wrong client services, to prove the hostile checks catch what they look for: each
stands in front of a real client service and breaks the protocol in one way, the way a client with
that defect would.

  rewriting_client   rewrites each POST job before the real service sees it, and its reply (an HTTP forwarder)
  relaying_client    relays bytes, but rewrites a request, drops some methods' connections, puts a
                     body in replies to HEAD, or holds 503 replies back (a TCP relay on an asyncio
                     loop of its own, so a few hundred connections cost it no thread each)
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import urlsplit

from rbl.clients.protocol import MAX_INSTANCE_CHARS

from .checks import post


class _Server(ThreadingHTTPServer):
    # many callers at once (a concurrency check): the default backlog of 5 resets the sixth connection
    request_queue_size = 128
    daemon_threads = True


@contextmanager
def rewriting_client(real_url: str, rewrite: Callable[[dict], dict],
                     rewrite_reply: Callable[[dict], dict] = lambda reply: reply):
    """Yields the URL of a forwarder that applies rewrite(job) to every POST body (/run, /call) and
    rewrite_reply(reply) to the real service's answer."""

    class Forwarder(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _answer(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._answer(*post(real_url, self.path, method="GET"))

        def do_POST(self):
            job = json.loads(self.rfile.read(int(self.headers["content-length"])))
            status, reply = post(real_url, self.path, rewrite(job))
            self._answer(status, rewrite_reply(reply) if status == 200 else reply)

    server = _Server(("127.0.0.1", 0), Forwarder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def escaping_what_it_cannot_send(job: dict) -> dict:
    """A lenient client: it percent-encodes what a target path cannot hold (a `%` without two hex
    digits, `@`, brackets, spaces...) and runs the job, where the compiler refuses the path."""
    url = job.get("target_url")
    if isinstance(url, str):
        head, slash, path = url.partition("://")[2].partition("/")
        if slash:
            path = re.sub(r"%(?![0-9A-Fa-f]{2})", "%25", path)
            path = "".join(ch if re.fullmatch(r"[A-Za-z0-9._~!$&'()*+,;=:/?%-]", ch) else
                           "".join(f"%{b:02X}" for b in ch.encode()) for ch in path)
            job["target_url"] = f"http://{head}/{path}"
    return job


def refusing_quotes(job: dict) -> dict:
    """A strict client: it refuses a `'` in a path (as if it only knew RFC 1738), where the compiler
    accepts it; here by making the path one the real service refuses."""
    url = job.get("target_url")
    if isinstance(url, str) and "'" in url:
        job["target_url"] = url.replace("'", "%")
    return job


def counting_utf16_units(job: dict) -> dict:
    """A client that counts `instance` in UTF-16 units (an emoji is two): over MAX_INSTANCE_CHARS
    of them it refuses the job, here by handing the real service an instance too long for it."""
    instance = job.get("instance")
    if isinstance(instance, str) and len(instance.encode("utf-16-le")) // 2 > MAX_INSTANCE_CHARS:
        job["instance"] = "x" * (MAX_INSTANCE_CHARS + 1)
    return job


def routing_by_the_whole_target(request: bytes) -> bytes:
    """A client that takes `/health?x=1` for a route of its own (so, none): the query is made part
    of the path."""
    line, _, rest = request.partition(b"\r\n")
    return line.replace(b"?", b"%3F", 1) + b"\r\n" + rest


def taking_control_characters(request: bytes) -> bytes:
    """A client that takes a NUL or another control character in a header value: here it drops
    them before the real service sees them."""
    head, _, body = request.partition(b"\r\n\r\n")
    lines = re.sub(rb"[\x00-\x08\x0b-\x1f\x7f]", b"", head.replace(b"\r\n", b"\n"))   # all but tab and LF
    return lines.replace(b"\n", b"\r\n") + b"\r\n\r\n" + body


def ignoring_text_after_the_json(request: bytes) -> bytes:
    """A client that reads the first JSON value of a body and ignores what follows it."""
    head, _, body = request.partition(b"\r\n\r\n")
    try:
        _, end = json.JSONDecoder().raw_decode(body.decode())
    except (ValueError, RecursionError):
        return request
    body = body[:end]
    head = re.sub(rb"(?i)content-length: *[0-9]+", b"Content-Length: %d" % len(body), head)
    return head + b"\r\n\r\n" + body


@contextmanager
def relaying_client(real_url: str, rewrite_request: Callable[[bytes], bytes] | None = None,
                    drop_methods: tuple[bytes, ...] = (), body_on_head: bool = False, hold_503_s: float = 0.0):
    """Yields the URL of a TCP relay to the real service that applies rewrite_request to a
    connection's first request (head and Content-Length body), closes the connection of a request
    whose method is in drop_methods without a reply, sends a body after the head of a reply to
    HEAD, or holds a 503 back for hold_503_s."""
    parts = urlsplit(real_url)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    address: list[int] = []
    servers: list[asyncio.Server] = []
    writers: set[asyncio.StreamWriter] = set()   # every connection, closed at the end: the real
    # service's jobs must see their callers leave, or they hold its connections after the check

    async def pipe_requests(reader, writer, first: bytes) -> None:
        writer.write(first)
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    async def pipe_replies(reader, writer, head_request: bool) -> None:
        first = True
        while data := await reader.read(65536):
            if first and hold_503_s and data.startswith(b"HTTP/1.1 503"):
                await asyncio.sleep(hold_503_s)
            if first and head_request and body_on_head and b"\r\n\r\n" in data:
                end = data.index(b"\r\n\r\n") + 4
                data = data[:end] + b'{"error":"a body where HEAD has none"}' + data[end:]
            first = False
            writer.write(data)
            await writer.drain()
        writer.close()

    async def read_request(reader) -> bytes:
        """The first request whole, as far as it comes within a second: its head, and as much body
        as its Content-Length says (a check may send less, and wait for the 408)."""
        data = b""
        deadline = loop.time() + 1.0
        wanted = None                    # the body's length, once the head is in
        while wanted is None or len(data.partition(b"\r\n\r\n")[2]) < wanted:
            try:
                chunk = await asyncio.wait_for(reader.read(65536), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                break
            if not chunk:
                break
            data += chunk
            if wanted is None and b"\r\n\r\n" in data:
                found = re.search(rb"(?i)\r\ncontent-length: *([0-9]{1,7})\r\n", data.partition(b"\r\n\r\n")[0] + b"\r\n")
                wanted = int(found[1]) if found else 0
        return data

    async def handle(reader, writer) -> None:
        upstream = None
        writers.add(writer)
        try:
            first = await read_request(reader) if rewrite_request else await reader.read(65536)
            if not first or first.split(b" ", 1)[0] in drop_methods:
                return
            if rewrite_request:
                first = rewrite_request(first)
            upstream = await asyncio.open_connection(parts.hostname, parts.port)
            writers.add(upstream[1])
            await asyncio.gather(pipe_requests(reader, upstream[1], first),
                                 pipe_replies(upstream[0], writer, first.startswith(b"HEAD ")))
        except (OSError, asyncio.CancelledError):    # a caller gone, or the relay closing
            pass
        finally:
            writer.close()
            if upstream:
                upstream[1].close()

    async def start() -> None:
        servers.append(await asyncio.start_server(handle, "127.0.0.1", 0, backlog=2048))
        address.append(servers[0].sockets[0].getsockname()[1])
        ready.set()

    async def close_all() -> None:
        servers[0].close()
        for writer in list(writers):
            writer.transport.abort()
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()), daemon=True)
    thread.start()
    assert ready.wait(10), "the relay did not start"
    try:
        yield f"http://127.0.0.1:{address[0]}"
    finally:
        # hundreds of relayed connections take a while to abort on a loaded machine
        asyncio.run_coroutine_threadsafe(close_all(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
