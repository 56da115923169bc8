"""Client services for the conformance suite: rbl's own (the Python service for tenacity and
pybreaker, the Resilience4j jar), or one you point it at:

  RBL_CONFORMANCE_URL=http://127.0.0.1:8080 RBL_CONFORMANCE_PROFILE=resilience4j \\
      python3 -m pytest tests/conformance

(the profile says how that client's native parameters are written; see profiles.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rbl.runner.client_builds import client_jar

from .profiles import PROFILES


def selected_profiles(capability: str | None = None) -> list:
    chosen = os.environ.get("RBL_CONFORMANCE_PROFILE")
    profiles = [PROFILES[chosen]] if chosen else list(PROFILES.values())
    return [p for p in profiles if capability is None or getattr(p, capability) is not None]


def _command(profile) -> list[str]:
    if profile.kind == "python":
        return [sys.executable, "-m", "rbl.services.python_client", "--library", profile.library]
    return ["java", "-jar", str(client_jar(profile.kind))]


@pytest.fixture(scope="module")
def client_url():
    """profile -> the URL of a running client service for it (started once per module)."""
    started: dict[str, tuple[subprocess.Popen | None, str]] = {}

    def url_for(profile) -> str:
        if os.environ.get("RBL_CONFORMANCE_URL"):
            return os.environ["RBL_CONFORMANCE_URL"].rstrip("/")
        if profile.name not in started:
            process = subprocess.Popen(_command(profile) + ["--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                                       text=True)
            word, port = process.stdout.readline().split()
            assert word == "listening", word
            started[profile.name] = (process, f"http://127.0.0.1:{port}")
        return started[profile.name][1]

    yield url_for
    for process, _ in started.values():
        process.terminate()
        process.wait(timeout=10)
