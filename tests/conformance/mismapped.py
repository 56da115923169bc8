"""A client service with a deliberately wrong parameter mapping, to prove the checks catch one:
it forwards protocol v1 to a real client service, rewriting one parameter on the way, the way a
client that mapped that parameter wrongly would behave."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from .checks import post


@contextmanager
def mismapped_client(real_url: str, rewrite: Callable[[str, dict], dict]):
    """Yields the URL of a forwarder that applies rewrite(pattern, params) to every job's params."""

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
            for step in job.get("strategy", []):
                step["params"] = rewrite(step["pattern"], dict(step["params"]))
            self._answer(*post(real_url, self.path, job))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forwarder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def changed_keys(before: dict, after: dict) -> list[str]:
    """The parameter(s) that differ between two native configurations."""
    return [key for key in before if before[key] != after.get(key)]
