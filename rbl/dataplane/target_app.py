"""httpbin for gunicorn with the run's token on every response, so the runner can tell its own target;
plus `/factorial/N`, an endpoint whose cost is CPU work of a chosen size (the service-mesh papers'
factorial service), so a target with a CPU budget can be driven into overload."""

from __future__ import annotations

import os

from httpbin import app as httpbin

from .target_token import TOKEN_ENV, TOKEN_HEADER

# Read once at import (gunicorn imports this module in each worker); a missing token is a
# misuse of this module, so it fails at start-up, where the runner's readiness check sees it.
_TOKEN = os.environ[TOKEN_ENV]
FACTORIAL_PREFIX = "/factorial/"
MAX_FACTORIAL = 100_000               # about 1.5 s of CPU here: beyond that a path is a typo


def factorial_digits(n: int) -> int:
    """n! by repeated multiplication (deliberately not math.factorial: the work is the point, and
    it grows with n as the papers' service does), returned as its number of decimal digits."""
    product = 1
    for k in range(2, n + 1):
        product *= k
    return product.bit_length()


def _factorial(path: str, start_response):
    digits = path[len(FACTORIAL_PREFIX):]
    if not (digits.isascii() and digits.isdigit()) or int(digits) > MAX_FACTORIAL:     # not "²"
        start_response("400 Bad Request", [("content-type", "text/plain"), (TOKEN_HEADER, _TOKEN)])
        return [f"/factorial/N takes an integer N from 0 to {MAX_FACTORIAL}\n".encode()]
    body = f"{factorial_digits(int(digits))}\n".encode()
    start_response("200 OK", [("content-type", "text/plain"), ("content-length", str(len(body))),
                              (TOKEN_HEADER, _TOKEN)])
    return [body]


def app(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path.startswith(FACTORIAL_PREFIX):
        return _factorial(path, start_response)

    def start(status, headers, exc_info=None):
        return start_response(status, [*headers, (TOKEN_HEADER, _TOKEN)], exc_info)
    return httpbin(environ, start)
