"""The four client runtimes take the same target URLs, the ones whose path the compiler accepts
(rbl/compiler/urlpath.py), and refuse the rest with a 400 without dying: one rule, written once
per runtime (protocol.py's TARGET_URL), checked here against the compiler's and against each
other on live services. (tests/conformance holds the per-client checks; these pin the agreement.)"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from rbl.targets import client_builds
from rbl.clients import protocol
from rbl.clients.protocol import JobError
from rbl.clients.python.job_request import parse_job
from rbl.compiler.urlpath import MAX_TARGET_LENGTH, TARGET_PATH

from .conformance import hostile
from .conformance.checks import post
from .conformance.conftest import client_services
from .conformance.test_fuzz import target_urls

CLIENTS = Path(__file__).resolve().parents[1] / "clients"
CLOSED_PORT = 9                          # jobs' requests fail at once: only the verdict on the URL matters


def test_the_protocols_path_rule_is_the_compilers():
    # TARGET_URL's path group is TARGET_PATH, with an optional path instead of anchors
    path_rule = TARGET_PATH.pattern.removeprefix("^").removesuffix("$")
    assert f"((?:{path_rule})?)" in protocol.TARGET_URL
    assert protocol.MAX_TARGET_PATH_CHARS == MAX_TARGET_LENGTH


SOURCES = {
    "node": (CLIENTS / "node/src/protocol.js", r"MAX_TARGET_PATH_CHARS = (\d+)"),
    "go": (CLIENTS / "go/internal/client/protocol.go", r"MaxTargetPathChars\s*=\s*(\d+)"),
    "resilience4j": (CLIENTS / "resilience4j/src/main/java/dev/rbl/client/Job.java", r"MAX_TARGET_PATH_CHARS = (\d+)"),
}


@pytest.mark.parametrize("kind", SOURCES)
def test_each_runtime_caps_the_path_where_the_compiler_does(kind):
    path, constant = SOURCES[kind]
    assert [int(n) for n in re.findall(constant, path.read_text())] == [MAX_TARGET_LENGTH]


def compiler_verdict(target_url: str) -> bool:
    return hostile.runs(target_url, CLOSED_PORT)


@settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(target_url=target_urls(CLOSED_PORT))
def test_the_python_client_takes_exactly_the_urls_the_compiler_accepts(target_url):
    job = {"target_url": target_url, "successes": 1, "max_requests": 1}
    try:
        parsed = parse_job(job, ("127.0.0.1", CLOSED_PORT))
    except JobError:
        assert not compiler_verdict(target_url), f"{target_url!r:.120} refused; the compiler accepts its path"
        return
    assert compiler_verdict(target_url), f"{target_url!r:.120} taken; the compiler refuses its path"
    assert parsed.path == (re.sub(r"^http://[^/?#]*", "", target_url) or "/"), "the path is sent as written"


# -- live: one service per runtime, all given the same URLs ----------------------------------------
RUNTIMES = ["tenacity", "resilience4j", "cockatiel", "failsafe"]


@pytest.fixture(scope="module")
def services():
    with client_services(RUNTIMES, CLOSED_PORT) as urls:
        yield urls


def verdicts(services: dict[str, str], target_url: str) -> dict[str, int]:
    job = {"target_url": target_url, "successes": 1, "max_requests": 1, "max_duration_ms": 5000}
    return {name: post(url, "/run", job)[0] for name, url in services.items()}


def test_the_four_runtimes_agree_with_the_compiler(services):
    disagreements = []
    for target_url in hostile.target_urls(CLOSED_PORT):
        expected = 200 if compiler_verdict(target_url) else 400
        got = verdicts(services, target_url)
        if set(got.values()) != {expected}:
            disagreements.append(f"{target_url!r:.80}: expected {expected}, got {got}")
    assert not disagreements, "\n".join(disagreements)


def test_the_four_runtimes_agree_on_random_urls(services):
    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(target_url=target_urls(CLOSED_PORT))
    def agree(target_url):
        expected = 200 if compiler_verdict(target_url) else 400
        got = verdicts(services, target_url)
        assert set(got.values()) == {expected}, f"{target_url!r:.80}: expected {expected}, got {got}"

    agree()


@pytest.mark.parametrize("library", ["failsafe", "gobreaker", "backoff"])
def test_a_bad_escape_does_not_kill_the_go_client(library):
    # every Go library: the request was built in code they share, and one `%` panicked the process
    binary = client_builds.client_artifact("go")
    process = subprocess.Popen([str(binary), "--library", library, "--listen", "127.0.0.1:0", "--target",
                                f"127.0.0.1:{CLOSED_PORT}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{process.stdout.readline().split()[1]}"
        for path in ("/%", "/%zz", "/a?%", "/%4"):
            status, reply = post(url, "/run", {"target_url": f"http://127.0.0.1:{CLOSED_PORT}{path}", "successes": 1,
                                               "max_requests": 1})
            assert status == 400 and "%XX" in reply["error"], (path, status, reply)
        assert post(url, "/health", method="GET")[0] == 200
        assert process.poll() is None
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=10)
    assert "panic" not in stderr, stderr[-2000:]
