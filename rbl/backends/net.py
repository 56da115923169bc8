"""Loopback addresses every backend uses: where services bind, a free port, a client's health."""

from __future__ import annotations

import json
import random
import socket
import threading
import urllib.request
from pathlib import Path

HOST = "127.0.0.1"


# Listening ports are picked below the kernel's ephemeral range: a port picked inside it can be taken,
# between the pick and the service's own bind, by any outgoing connection on the machine (a load
# generator opens thousands), and the service then fails with "address already in use".
LOWEST_LISTEN_PORT = 20000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
PICK_ATTEMPTS = 64
_PICKER = random.SystemRandom()     # not the global generator, which a run may seed
# Every port this process has handed out: a port picked and not yet bound is free to the kernel, so
# two picks before either service binds could get the same one (a sidecar and a target replica, say:
# the one that binds second dies with "address already in use"). A run hands out a few dozen at most.
_HANDED_OUT: set[int] = set()
_HANDING = threading.Lock()          # services start from several threads


def _ephemeral_start() -> int:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def free_port() -> int:
    """A free port on loopback, random (so parallel runs do not collide) and below the kernel's
    ephemeral range where there is room (so no outgoing connection takes it before the service
    binds it); else one the kernel hands out."""
    with _HANDING:
        port = _pick()
        _HANDED_OUT.add(port)
        return port


def _pick() -> int:
    start = _ephemeral_start()
    for _ in range(PICK_ATTEMPTS if start > LOWEST_LISTEN_PORT + 1000 else 0):
        port = _PICKER.randrange(LOWEST_LISTEN_PORT, start)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as sock:
            try:
                sock.bind((HOST, port))
            except OSError:
                continue
            return port
    for _ in range(PICK_ATTEMPTS):
        with socket.socket() as sock:
            sock.bind((HOST, 0))
            port = sock.getsockname()[1]
        if port not in _HANDED_OUT:
            return port
    raise OSError("no free loopback port that this process has not handed out already")


def reported_version(host: str, port: int) -> str | None:
    """The library version a client service reports on /health."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=5) as response:
            return json.load(response).get("version")
    except (OSError, ValueError):
        return None


def reported_limit(host: str, port: int, instance: str) -> int | None:
    """The limit a client service's shared instance `instance` set itself, as its GET /limits reports
    it now (clients/protocol.py); None when it has none (not built yet) or does not answer in time:
    the window then goes unrecorded."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/limits", timeout=1) as response:
            limits = json.load(response).get("limits")
    except (OSError, ValueError, AttributeError):
        return None
    found = [entry.get("limit") for entry in limits or ()
             if isinstance(entry, dict) and entry.get("instance") == instance]
    return found[0] if found and type(found[0]) is int else None      # not a bool, not a float
