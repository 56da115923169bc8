"""Loopback addresses every backend uses: where services bind, a free port, a client's health."""

from __future__ import annotations

import json
import socket
import urllib.request

HOST = "127.0.0.1"


def free_port() -> int:
    """A port the kernel just handed out on loopback (random, so parallel runs do not collide)."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def reported_version(host: str, port: int) -> str | None:
    """The library version a client service reports on /health."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=5) as response:
            return json.load(response).get("version")
    except (OSError, ValueError):
        return None
