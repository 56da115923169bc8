"""The Go client (clients/go: failsafe-go, gobreaker, cenkalti/backoff) in `rbl run`: built with
`go build` on first use and cached by a hash of its sources, exit 4 with advice when Go is needed
and missing, and a binary given with --client-bin that needs no Go at all. (Its protocol and
semantics are checked by tests/conformance.)"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest

from rbl.targets import client_builds

from .conftest import run_spec
from .test_resilience4j_client import bin_with

SPACE = """
space go {
  rounds = 1
  users = 2
  successes = 3
  max_requests = 12
  fault.kind = abort
  fault.status = 503
  fault.rate = 100%
  client failsafe.retry {
    maxAttempts = 3
    delay = 1ms
  }
  client gobreaker.circuit_breaker {
    consecutiveFailures = 1
    timeout = 20ms
  }
  client backoff.retry {
    maxTries = 4
    backOff = CONSTANT
    interval = 1ms
  }
}
"""


def run_go(tmp_path: Path, *args: str, path: str | None = None, cache: Path | None = None):
    return run_spec(tmp_path, "go.rbl", SPACE, *args, path=path, cache=cache)


@pytest.fixture(scope="module")
def built_binary() -> Path:
    return client_builds.client_artifact("go")


def test_missing_go_exits_4_when_the_client_must_be_built(tmp_path):
    done = run_go(tmp_path, path=bin_with(tmp_path), cache=tmp_path / "empty-cache")
    assert done.returncode == 4, done.stderr
    assert "needs go" in done.stderr and "install Go" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_binary_given_with_client_bin_needs_no_go(tmp_path, built_binary):
    given = [arg for library in ("failsafe", "gobreaker", "backoff") for arg in ("--client-bin", f"{library}={built_binary}")]
    done = run_go(tmp_path, *given, path=bin_with(tmp_path), cache=tmp_path / "empty-cache")
    assert done.returncode == 0, done.stderr
    with (tmp_path / "out" / "results.csv").open() as f:
        found = list(csv.DictReader(f))
    by_library = {lib: [r for r in found if r["lib"] == lib] for lib in ("failsafe", "gobreaker", "backoff")}
    # under a 100% abort: maxAttempts 3 and maxTries 4 count every attempt; ConsecutiveFailures > 1 trips at 2
    assert all(r["totalRequests"] == "12" and r["totalCalls"] == "4" for r in by_library["failsafe"])
    assert all(r["totalRequests"] == "12" and r["totalCalls"] == "3" for r in by_library["backoff"])
    # open after 2 failures, then calls rejected without a request and one probe per 20 ms
    assert all(r["totalRequests"] == "12" and int(r["totalCalls"]) > 12 for r in by_library["gobreaker"])
    assert by_library["gobreaker"]


def test_a_file_that_is_not_executable_is_a_usage_error(tmp_path):
    (tmp_path / "client").write_text("not a program")
    done = run_go(tmp_path, "--client-bin", f"gobreaker={tmp_path / 'client'}")
    assert done.returncode == 2 and "not executable" in done.stderr, done.stderr


def test_the_binary_reports_each_librarys_module_version(built_binary):
    for library, module_version in (("failsafe", "v0.9.8"), ("gobreaker", "v2.4.0"), ("backoff", "v5.0.3")):
        process = subprocess.Popen([str(built_binary), "--library", library, "--target", "127.0.0.1:9"],
                                   stdout=subprocess.PIPE, text=True)
        try:
            _, port = process.stdout.readline().split()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
                health = json.load(response)
            assert health["library"] == library and health["version"] == module_version, health
        finally:
            process.terminate()
            process.wait(timeout=10)


def test_the_build_is_cached_by_a_hash_of_the_sources(tmp_path, built_binary):
    assert client_builds.client_artifact("go") == built_binary                 # no second build
    with client_builds.client_sources("go") as root:
        copy = tmp_path / "copy"
        shutil.copytree(root, copy)
        assert client_builds.sources_digest(copy, "go") == client_builds.sources_digest(root, "go")
    assert built_binary.name == f"go-{client_builds.sources_digest(root, 'go')}"
    source = copy / "internal" / "client" / "job.go"
    source.write_text(source.read_text() + "\n// changed\n")
    assert client_builds.sources_digest(copy, "go") != client_builds.sources_digest(root, "go")


BREAKER_WITH_PERIOD = """space period {
  client failsafe.circuit_breaker {
    failureThreshold = 2
    failureThresholdingPeriod = 500us
  }
}
"""


def test_a_thresholding_period_under_a_millisecond_is_refused_by_check_and_by_the_client(tmp_path, start_proxy):
    """failsafe-go splits the period into 10 buckets and divides by a bucket's length: a period under
    10 ns made its first call panic (answered 500). rbl check and the client both refuse it."""
    from .conformance import checks, hostile
    from .conformance.conftest import start_client
    from .conformance.profiles import PROFILES
    from .conftest import run_rbl

    (tmp_path / "p.rbl").write_text(BREAKER_WITH_PERIOD)
    checked = run_rbl("check", "p.rbl", cwd=tmp_path)
    assert checked.returncode != 0 and "failureThresholdingPeriod" in checked.stderr and ">= 1ms" in checked.stderr
    assert "Traceback" not in checked.stderr
    proxy = start_proxy()
    process, url = start_client(PROFILES["failsafe"], proxy.data_port)
    try:
        for period in (0.000001, 0.5):                         # 1 ns and 500 µs, in ms
            job = hostile.job_for(proxy, strategy=[{"pattern": "circuit_breaker",
                                                    "params": {"failureThreshold": 2,
                                                               "failureThresholdingPeriod": period}}])
            status, reply = checks.post(url, "/run", job)
            assert status == 400 and "at least 1 ms" in reply["error"], (period, status, reply)
        job = hostile.job_for(proxy, strategy=[{"pattern": "circuit_breaker",
                                                "params": {"failureThreshold": 2, "failureThresholdingPeriod": 1}}])
        assert checks.post(url, "/run", job)[0] == 200
    finally:
        process.terminate()
        process.wait(timeout=10)
