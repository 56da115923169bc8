"""Client services for the conformance suite: rbl's own (the Python service for tenacity and
pybreaker, the Resilience4j jar, the Node.js client for cockatiel and opossum, the Go client for
failsafe, gobreaker and backoff), or one you point it at:

  RBL_CONFORMANCE_URL=http://127.0.0.1:8080 RBL_CONFORMANCE_PROFILE=resilience4j \\
  RBL_CONFORMANCE_TARGET=127.0.0.1:9211 python3 -m pytest tests/conformance

(the profile says how that client's native parameters are written; see profiles.py). A client
service only sends requests to its `--target`, so the suite runs one fault proxy per module, on
RBL_CONFORMANCE_TARGET when given (start your client with that `--target`), and starts rbl's own
clients with the proxy's address."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager

import pytest

from rbl.targets import client_builds

from ..live_services import Proxy, start_envoy
from .profiles import PROFILES


def selected_profiles(capability: str | None = None) -> list:
    chosen = os.environ.get("RBL_CONFORMANCE_PROFILE")
    profiles = [PROFILES[chosen]] if chosen else list(PROFILES.values())
    return [p for p in profiles if capability is None or getattr(p, capability) is not None]


def ids(profiles) -> list[str]:
    """Test ids: the profiles' names."""
    return [p.name for p in profiles]


def client_command(profile) -> list[str]:
    if profile.kind == "python":
        return [sys.executable, "-m", "rbl.clients.python.service", "--library", profile.library]
    command = client_builds.client_command(profile.kind, client_builds.client_artifact(profile.kind))
    return command + ["--library", profile.library]


def start_client(profile, target_port: int, *extra: str) -> tuple[subprocess.Popen, str]:
    """A client service for `profile` whose jobs may reach 127.0.0.1:target_port only."""
    process = subprocess.Popen(client_command(profile) + ["--listen", "127.0.0.1:0", "--target",
                                                         f"127.0.0.1:{target_port}", *extra],
                               stdout=subprocess.PIPE, text=True)
    word, port = process.stdout.readline().split()
    assert word == "listening", word
    return process, f"http://127.0.0.1:{port}"


@contextmanager
def client_services(names, target_port: int):
    """One client service per profile name, all with --target 127.0.0.1:target_port: {name: url}.
    Each must still be running when the caller is done with them; all are stopped."""
    started: dict[str, tuple[subprocess.Popen, str]] = {}
    try:
        for name in names:
            process = subprocess.Popen(client_command(PROFILES[name]) + ["--listen", "127.0.0.1:0", "--target",
                                                                         f"127.0.0.1:{target_port}"],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            started[name] = process, ""
            word, port = process.stdout.readline().split()
            assert word == "listening", word
            started[name] = process, f"http://127.0.0.1:{port}"
        yield {name: url for name, (_, url) in started.items()}
        for name, (process, _) in started.items():
            assert process.poll() is None, f"the {name} client service exited with {process.returncode}"
    finally:
        for process, _ in started.values():
            process.terminate()
            process.wait(timeout=10)


# The fault proxies the behaviour checks run on (test_conformance.py parametrizes over them): rbl's
# built-in proxy and real Envoy with the config rbl generates. RBL_CONFORMANCE_PROXY picks one.
PROXIES = [os.environ["RBL_CONFORMANCE_PROXY"]] if os.environ.get("RBL_CONFORMANCE_PROXY") else ["builtin", "envoy"]


@pytest.fixture(scope="module")
def conformance_proxy(request, httpbin, tmp_path_factory):
    """The module's fault proxy: the built-in one unless a test module asks for each of PROXIES."""
    kind = getattr(request, "param", "builtin")
    if kind == "envoy":
        process, proxy = start_envoy(httpbin, tmp_path_factory.mktemp("envoy"))
    else:
        listen = os.environ.get("RBL_CONFORMANCE_TARGET", "127.0.0.1:0")
        process = subprocess.Popen([sys.executable, "-m", "rbl.dataplane.fault_proxy", "--upstream",
                                    f"127.0.0.1:{httpbin}", "--listen", listen, "--seed", "7"],
                                   stdout=subprocess.PIPE, text=True)
        line = process.stdout.readline().split()
        assert line[0] == "listening", line
        proxy = Proxy(int(line[1]), int(line[2]))
    yield proxy
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture
def start_proxy(conformance_proxy):
    """The module's fault proxy with no fault set (the checks set their own)."""
    conformance_proxy.set_fault(abort__abort_percent=0, delay__fixed_delay_percent=0, delay__fixed_duration_ms=0)
    return lambda seed=None: conformance_proxy


@pytest.fixture(scope="module")
def client_url(conformance_proxy):
    """profile -> the URL of a running client service for it (started once per module)."""
    started: dict[str, tuple[subprocess.Popen | None, str]] = {}

    def url_for(profile) -> str:
        if os.environ.get("RBL_CONFORMANCE_URL"):
            return os.environ["RBL_CONFORMANCE_URL"].rstrip("/")
        if profile.name not in started:
            started[profile.name] = start_client(profile, conformance_proxy.data_port)
        return started[profile.name][1]

    yield url_for
    for process, _ in started.values():
        process.terminate()
        process.wait(timeout=10)
