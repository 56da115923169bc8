"""rbl-chain (services/chain), the synthetic service every tier of a topology runs: the real binary, built as
rbl builds it, in real processes on loopback (a caller's outbound pointed straight at its callee, no sidecar);
its Go unit tests, gofmt and go vet; and the wheel carrying its sources."""

from __future__ import annotations

import http.client
import json
import os
import selectors
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from rbl.backends.net import HOST, free_port
from rbl.dataplane.target_token import TOKEN_HEADER
from rbl.targets import client_builds

REPO = Path(__file__).resolve().parent.parent
SOURCES = REPO / "services" / "chain"
TOKEN = "chain-test-token"


@pytest.fixture(scope="module")
def binary() -> Path:
    return client_builds.chain_binary()


@dataclass
class Chain:
    """One running replica and what it was started with."""
    process: subprocess.Popen
    port: int

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def request(self, method: str = "GET", path: str = "/", body: str | None = None,
                token: str | None = None) -> tuple[int, dict[str, str], str]:
        connection = http.client.HTTPConnection(HOST, self.port, timeout=10)
        try:
            connection.request(method, path, body=body, headers={TOKEN_HEADER: token} if token else {})
            response = connection.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode()
        finally:
            connection.close()

    def stats(self) -> dict:
        status, headers, body = self.request("GET", "/rbl/stats", token=TOKEN)
        assert status == 200 and headers[TOKEN_HEADER.lower()] == TOKEN, (status, body)
        return json.loads(body)

    def set_fault(self, fault: dict) -> None:
        status, _, body = self.request("PUT", "/rbl/fault", json.dumps(fault), token=TOKEN)
        assert status == 200, body


def read_line(process: subprocess.Popen, timeout: float = 10.0) -> str:
    """The next line of a child's stdout, or '' when it exits or says nothing in time."""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return ""
        return process.stdout.readline()


@pytest.fixture
def start(binary, tmp_path):
    """Start replicas from configurations; every one is stopped (SIGTERM, then its exit checked) at the end."""
    started: list[subprocess.Popen] = []

    def start_one(config: dict) -> Chain:
        path = tmp_path / f"{config['service']}-{len(started)}.json"
        path.write_text(json.dumps(config))
        port = free_port()
        process = subprocess.Popen([str(binary), "--listen", f"{HOST}:{port}", "--config", str(path), "--token", TOKEN],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(process)
        line = read_line(process)
        assert line == "ready\n", (line, process.poll())
        return Chain(process, port)

    yield start_one
    codes = []
    for process in started:
        if process.poll() is None:
            process.terminate()
        try:
            codes.append(process.wait(timeout=10))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            codes.append("hung")
        process.stdout.close()
        process.stderr.close()
    assert codes == [0] * len(codes), codes        # SIGTERM is a clean exit


def leaf(work: dict | None = None) -> dict:
    return {"service": "leaf", "replica": 0, "work": work or {"kind": "none"}}


def caller(callee: Chain, times: int, parallel: bool) -> dict:
    return {"service": "front", "replica": 0, "work": {"kind": "none"},
            "calls": [{"service": "leaf", "times": times, "parallel": parallel}], "outbound": callee.address}


def test_a_leaf_does_its_work_answers_with_the_token_and_counts(start):
    service = start(leaf({"kind": "factorial", "n": 3000}))
    before = service.stats()
    for path in ("/", "/any/path?x=1", "/cart"):
        status, headers, body = service.request("GET", path)
        assert status == 200 and headers[TOKEN_HEADER.lower()] == TOKEN and body == "ok\n"
        assert "x-rbl-failed-at" not in headers
    assert service.request("POST", "/", body="ignored")[0] == 200
    after = service.stats()
    assert (after["service"], after["replica"]) == ("leaf", 0)
    assert after["requests"] - before["requests"] == 4 and after["answered"]["200"] == 4
    assert after["work_seconds"]["ok"] > before["work_seconds"]["ok"] and after["work_seconds"]["failed"] == 0
    assert after["cpu_seconds"]["user"] + after["cpu_seconds"]["system"] > 0
    assert after["calls"] == {}


def _counts(call: dict) -> dict:
    """A call's counters without its success buckets and peak (checked on their own)."""
    return {key: call[key] for key in ("sent", "statuses", "flags")}


@pytest.mark.parametrize("parallel", [False, True], ids=["sequential", "parallel"])
def test_one_request_makes_times_requests_at_the_callee(start, parallel):
    callee = start(leaf())
    front = start(caller(callee, times=3, parallel=parallel))
    status, headers, _ = front.request("GET", "/whatever")
    assert status == 200 and headers[TOKEN_HEADER.lower()] == TOKEN
    assert callee.stats()["requests"] == 3
    calls = front.stats()["calls"]
    assert list(calls) == ["leaf"] and _counts(calls["leaf"]) == {"sent": 3, "statuses": {"200": 3}, "flags": {}}
    # the successes' response times, bucketed: three of them
    assert sum(calls["leaf"]["success_ms"]["counts"].values()) == 3
    # one call at a time in sequence; in parallel up to 3 (a fast leaf may answer before the last starts)
    assert calls["leaf"]["peak_in_flight"] in ((1, 2, 3) if parallel else (1,))
    front.request()
    assert callee.stats()["requests"] == 6


def test_an_abort_at_the_callee_is_passed_up_and_stops_the_sequence(start):
    callee = start(leaf({"kind": "factorial", "n": 500}))
    front = start(caller(callee, times=3, parallel=False))
    callee.set_fault({"abort": {"rate": 1.0, "status": 503}})
    status, headers, _ = callee.request()
    assert status == 503 and headers["x-rbl-failed-at"] == "leaf/abort"
    status, headers, _ = front.request()
    # the callee's own abort says where it started; the caller passes that up unchanged
    assert status == 500 and headers["x-rbl-failed-at"] == "leaf/abort" and headers[TOKEN_HEADER.lower()] == TOKEN
    seen = callee.stats()
    assert seen["requests"] == 2 and seen["answered"] == {"503": 2}          # one from the test, one call: not 3
    assert seen["work_seconds"] == {"ok": 0, "failed": 0}                     # an abort does no work
    assert _counts(front.stats()["calls"]["leaf"]) == {"sent": 1, "statuses": {"503": 1}, "flags": {}}
    assert seen["faults"] == {"aborts": 2, "delays": 0}
    assert front.stats()["calls"]["leaf"]["success_ms"]["counts"] == {}       # no success to time
    assert front.stats()["answered"] == {"500": 1}

    callee.set_fault({})
    assert front.request()[0] == 200
    assert callee.stats()["requests"] == 5


def test_a_callee_that_is_gone_is_a_transport_failure(start):
    port = free_port()                          # nothing listens there
    front = start({"service": "front", "work": {"kind": "none"}, "calls": [{"service": "db", "times": 2}],
                   "outbound": f"{HOST}:{port}"})
    status, headers, _ = front.request()
    assert status == 500 and headers["x-rbl-failed-at"] == "db/transport"
    assert _counts(front.stats()["calls"]["db"]) == {"sent": 1, "statuses": {"0": 1}, "flags": {}}


def test_the_control_endpoints_need_the_token_and_refuse_a_bad_fault(start):
    service = start(leaf())
    for method, path, body in (("GET", "/rbl/stats", None), ("PUT", "/rbl/fault", "{}"), ("GET", "/rbl/fault", None)):
        for token in (None, "someone-else"):
            status, headers, _ = service.request(method, path, body, token=token)
            assert status == 403 and headers[TOKEN_HEADER.lower()] == TOKEN, (method, path, token)
    for fault, says in (("not json", "not a fault"), ('{"abort": {"rate": 1.5, "status": 503}}', "abort.rate"),
                        ('{"abort": {"rate": 1, "status": 99}}', "abort.status"),
                        ('{"delay": {"rate": 1, "ms": -5}}', "delay.ms"), ('{"drop": {}}', "unknown field")):
        status, _, body = service.request("PUT", "/rbl/fault", fault, token=TOKEN)
        assert status == 400 and says in body and body.count("\n") == 1, (fault, body)
    assert service.request()[0] == 200                       # nothing of the refused faults took effect
    service.set_fault({"delay": {"rate": 1, "ms": 1}})
    assert json.loads(service.request("GET", "/rbl/fault", token=TOKEN)[2]) == {"delay": {"rate": 1, "ms": 1}}
    assert service.stats()["requests"] == 1                  # control requests are not requests


@pytest.mark.parametrize("address", ["0.0.0.0", "10.1.2.3"])
def test_the_binary_refuses_to_listen_off_loopback(binary, tmp_path, address):
    (tmp_path / "c.json").write_text(json.dumps(leaf()))
    done = subprocess.run([str(binary), "--listen", f"{address}:{free_port()}", "--config", str(tmp_path / "c.json"),
                           "--token", TOKEN], capture_output=True, text=True, timeout=10)
    assert done.returncode == 2 and "not a loopback address" in done.stderr and done.stdout == "", done


@pytest.mark.parametrize("config, says", [
    ({"service": "leaf", "work": {"kind": "factorial"}}, "factorial needs n"),
    ({"service": "a", "work": {"kind": "none"}, "calls": [{"service": "a", "times": 1}], "outbound": "127.0.0.1:1"},
     "a calls itself"),
], ids=["factorial-without-n", "calls-itself"])
def test_a_bad_configuration_is_one_line_and_exit_2(binary, tmp_path, config, says):
    (tmp_path / "c.json").write_text(json.dumps(config))
    done = subprocess.run([str(binary), "--listen", f"{HOST}:{free_port()}", "--config", str(tmp_path / "c.json"),
                           "--token", TOKEN], capture_output=True, text=True, timeout=10)
    assert done.returncode == 2 and says in done.stderr and done.stderr.count("\n") == 1 and done.stdout == "", done


def test_the_build_is_cached_by_a_hash_of_the_sources(binary):
    assert client_builds.client_artifact("chain") == binary
    assert binary.name == f"chain-{client_builds.sources_digest(SOURCES, 'chain')}"
    assert "chain" in client_builds.TOOLS and "chain" not in client_builds.BUILT_CLIENTS


def test_go_unit_tests_gofmt_and_vet(tmp_path):
    if shutil.which("go") is None:
        pytest.fail("go is needed for the tests")
    env = {**os.environ, "GOFLAGS": "-mod=readonly", "CGO_ENABLED": "0"}
    tested = subprocess.run(["go", "test", "-count=1", "./..."], cwd=SOURCES, capture_output=True, text=True, env=env,
                            timeout=300)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    vetted = subprocess.run(["go", "vet", "./..."], cwd=SOURCES, capture_output=True, text=True, env=env, timeout=300)
    assert vetted.returncode == 0, vetted.stderr
    unformatted = subprocess.run(["gofmt", "-l", "."], cwd=SOURCES, capture_output=True, text=True, timeout=60)
    assert unformatted.returncode == 0 and unformatted.stdout == "", unformatted.stdout


def test_a_wheel_carries_exactly_the_sources_the_build_hashes(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(REPO)],
                   check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("rbl-*.whl")
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")
    shipped = tmp_path / "site" / "rbl" / "services" / "chain"
    assert (shipped / "go.mod").is_file()
    assert client_builds.sources_digest(shipped, "chain") == client_builds.sources_digest(SOURCES, "chain")
