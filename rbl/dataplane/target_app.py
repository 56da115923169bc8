"""httpbin for gunicorn with the run's token on every response, so the runner can tell its own target."""

from __future__ import annotations

import os

from httpbin import app as httpbin

from .target_token import TOKEN_ENV, TOKEN_HEADER

# Read once at import (gunicorn imports this module in each worker); a missing token is a
# misuse of this module, so it fails at start-up, where the runner's readiness check sees it.
_TOKEN = os.environ[TOKEN_ENV]


def app(environ, start_response):
    def start(status, headers, exc_info=None):
        return start_response(status, [*headers, (TOKEN_HEADER, _TOKEN)], exc_info)
    return httpbin(environ, start)
