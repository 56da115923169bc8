"""httpbin for gunicorn with the run's token on every response, so the runner can tell its own target;
plus `/factorial/N`, an endpoint whose cost is CPU work of a chosen size (the service-mesh papers'
factorial service), so a target with a CPU budget can be driven into overload."""

from __future__ import annotations

import os
import socket

from httpbin import app as httpbin

from .target_settings import DROP_ABANDONED_ENV
from .target_token import TOKEN_ENV, TOKEN_HEADER

# Read once at import (gunicorn imports this module in each worker); a missing token is a
# misuse of this module, so it fails at start-up, where the runner's readiness check sees it.
_TOKEN = os.environ[TOKEN_ENV]
FACTORIAL_PREFIX = "/factorial/"
MAX_FACTORIAL = 100_000               # about 1.5 s of CPU here: beyond that a path is a typo
_DROP_ABANDONED = os.environ.get(DROP_ABANDONED_ENV) == "1"
CHECK_EVERY = 256                     # multiplications between two looks at the caller (~0.3 ms of CPU)
ABANDONED = "499 Client Closed Request"   # nginx's name for it; nobody reads it: the caller is gone


class CallerGone(Exception):
    """The caller closed its connection while its request waited or was worked on."""


def caller_gone(sock: socket.socket | None) -> bool:
    """Whether the peer closed (FIN) or reset its connection: a peek that finds the end of the
    stream, or an error. Data waiting (a next request) or nothing yet means it is still there."""
    if sock is None:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True


def factorial_digits(n: int, gone=lambda: False) -> int:
    """n! by repeated multiplication (deliberately not math.factorial: the work is the point, and
    it grows with n as the papers' service does), returned as its number of decimal digits. `gone`
    is asked before the work and every CHECK_EVERY steps; once it says the caller left, the work
    stops (CallerGone)."""
    product = 1
    for k in range(2, n + 1):
        if k % CHECK_EVERY == 2 and gone():
            raise CallerGone
        product *= k
    return product.bit_length()


def _factorial(path: str, environ, start_response):
    digits = path[len(FACTORIAL_PREFIX):]
    if not (digits.isascii() and digits.isdigit()) or int(digits) > MAX_FACTORIAL:     # not "²"
        start_response("400 Bad Request", [("content-type", "text/plain"), (TOKEN_HEADER, _TOKEN)])
        return [f"/factorial/N takes an integer N from 0 to {MAX_FACTORIAL}\n".encode()]
    sock = environ.get("gunicorn.socket") if _DROP_ABANDONED else None
    try:
        body = f"{factorial_digits(int(digits), lambda: caller_gone(sock))}\n".encode()
    except CallerGone:
        start_response(ABANDONED, [("content-length", "0"), (TOKEN_HEADER, _TOKEN)])
        return []
    start_response("200 OK", [("content-type", "text/plain"), ("content-length", str(len(body))),
                              (TOKEN_HEADER, _TOKEN)])
    return [body]


def app(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path.startswith(FACTORIAL_PREFIX):
        return _factorial(path, environ, start_response)

    def start(status, headers, exc_info=None):
        return start_response(status, [*headers, (TOKEN_HEADER, _TOKEN)], exc_info)
    return httpbin(environ, start)
