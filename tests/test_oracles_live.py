"""The oracles in real runs: real httpbin, the real fault proxy, the real Python client (tenacity,
pybreaker) and the real Resilience4j client in a JVM. A deliberately mis-mapped client (a
forwarder that rewrites each job the way a wrong parameter mapping would, as in
tests/conformance/mismapped.py) breaks exactly the oracle it should, the run exits 3, and
--allow-violations keeps the rows but exits 0; the real clients stay silent over the examples."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.request
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import pytest
from rich.console import Console

from rbl.compiler.expand import iter_scenario_lines
from rbl.compiler.pipeline import compile_source
from rbl.compiler.plan import plan_header
from rbl.backends.local.backend import LocalBackend, LocalOptions, LocalServices
from rbl.runner.run import RunSettings, start_run

from .conftest import run_rbl
from .test_run import rows

EXAMPLES = Path(__file__).parent.parent / "examples"

SPACE = """
space mismapped {
  users = 3
  successes = 5
  max_requests = 60
  target = "/bytes/64"
  fault.rate in [80%]              // high enough that every mis-mapping shows in every run
  client tenacity.baseline {}
  client tenacity.retry {
    stop_after_attempt = 3
    wait = fixed
    wait_fixed = 20ms
  }
  client pybreaker.circuit_breaker {
    fail_max = 2
    reset_timeout = 60ms
  }
}
"""

JVM_SPACE = """
space mismapped_jvm {
  users = 3
  successes = 5
  max_requests = 60
  target = "/bytes/64"
  fault.rate in [80%]
  client resilience4j.retry {
    maxAttempts = 3
    waitDuration = 10ms
  }
}
"""


def _params(job: dict, pattern: str, change: Callable[[dict], None]) -> dict:
    for step in job["strategy"]:
        if step["pattern"] == pattern:
            change(step["params"])
    return job


def _hidden_request(job: dict) -> dict:
    """A client whose HTTP library retries on its own: one request the client never reports."""
    try:
        urllib.request.urlopen(job["target_url"], timeout=10).read()
    except OSError:
        pass                     # an injected 503 is a request too
    return job


REWRITES: dict[str, Callable[[dict], dict]] = {
    # a baseline that was handed a retry
    "baseline.requests": lambda job: {**job, "strategy": job["strategy"] or
                                      [{"pattern": "retry", "params": {"stop_after_attempt": 3, "wait": "none"}}]},
    # attempts mapped off by one (retry counted instead of attempts)
    "retry.attempts": lambda job: _params(job, "retry", lambda p: p.update(stop_after_attempt=p["stop_after_attempt"] + 1)),
    # a wait handed over in the wrong unit, four times too short
    "retry.wait": lambda job: _params(job, "retry", lambda p: p.update(wait_fixed=p["wait_fixed"] / 4)),
    # the open duration mapped to a third of itself
    "breaker.open_duration": lambda job: _params(job, "circuit_breaker",
                                                 lambda p: p.update(reset_timeout=p["reset_timeout"] / 3)),
    # "failures allowed before breaking" read as "failures that break it"
    "breaker.opened_early": lambda job: _params(job, "circuit_breaker", lambda p: p.update(fail_max=p["fail_max"] - 1)),
    "requests.count": _hidden_request,
}


@contextmanager
def forwarder(real: tuple[str, int], rewrite: Callable[[dict], dict]):
    """Yields the address of a client service that rewrites each job, then runs it on the real one."""

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _relay(self, method: str, body: bytes | None) -> None:
            connection = http.client.HTTPConnection(*real, timeout=120)
            try:
                connection.request(method, self.path, body=body, headers={"content-type": "application/json"})
                response = connection.getresponse()
                data = response.read()
            finally:
                connection.close()
            self.send_response(response.status)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._relay("GET", None)

        def do_POST(self):
            job = json.loads(self.rfile.read(int(self.headers["content-length"])))
            self._relay("POST", json.dumps(rewrite(job)).encode())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address
    finally:
        server.shutdown()
        server.server_close()


def mismapped_backend(rewrite: Callable[[dict], dict], fault_scale: float = 1.0):
    """The local backend with every client service behind a forwarder, and optionally a proxy
    that applies another fault rate than the scenario's."""

    class Mismapped(LocalServices):
        def __enter__(self):
            super().__enter__()
            self.stack = ExitStack()
            self.forwarded = {library: self.stack.enter_context(forwarder(("127.0.0.1", port), rewrite))
                              for library, (_, port) in self.clients.items()}
            if fault_scale != 1.0:
                apply = self.fault.apply
                self.fault.apply = lambda fault: apply({**fault, "rate": fault["rate"] * fault_scale})
            return self

        def __exit__(self, *exc):
            self.stack.close()
            super().__exit__(*exc)

        def client_address(self, library):
            return self.forwarded[library]

    class MismappedBackend(LocalBackend):
        def start(self, header, run_dir, logs, prepared):
            local = super().start(header, run_dir, logs, prepared)
            return Mismapped(local.logs, local.libraries, local.options, local.max_users)

    return MismappedBackend


def run_space(tmp_path: Path, spec: str, backend, allow: bool = False, jars: dict | None = None) -> int:
    space = compile_source(spec, "mismapped.rbl").space
    options = LocalOptions(seed=1, client_jars=dict(jars or {}))
    return start_run(plan_header(space), iter_scenario_lines(space), tmp_path / "out", backend(options),
                     Console(stderr=True, quiet=True), RunSettings(allow_violations=allow))


def broken(out: Path) -> dict[str, set[str]]:
    """client -> the oracles its rows broke."""
    found: dict[str, set[str]] = {}
    for row in rows(out):
        for v in row["oracleViolations"]:
            found.setdefault(row["client"], set()).add(v["oracle"])
    return found


@pytest.mark.parametrize("oracle", sorted(REWRITES))
def test_a_mismapped_python_client_breaks_exactly_its_oracle_and_the_run_exits_3(tmp_path, oracle):
    code = run_space(tmp_path, SPACE, mismapped_backend(REWRITES[oracle]))
    found = broken(tmp_path / "out")
    assert code == 3, found
    assert set().union(*found.values()) == {oracle}, found
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["oracleViolations"][oracle] > 0


def test_a_proxy_that_faults_at_another_rate_breaks_the_fault_rate_oracle(tmp_path):
    code = run_space(tmp_path, SPACE, mismapped_backend(lambda job: job, fault_scale=0.4))
    found = broken(tmp_path / "out")
    assert code == 3
    assert set().union(*found.values()) == {"fault.rate"}, found


def test_the_same_run_through_a_faithful_forwarder_is_silent(tmp_path):
    code = run_space(tmp_path, SPACE, mismapped_backend(lambda job: job))
    assert code == 0
    assert broken(tmp_path / "out") == {}
    assert all(row["oracleViolations"] == [] for row in rows(tmp_path / "out"))


def test_allow_violations_exits_0_and_keeps_them_in_the_rows_and_the_csv(tmp_path):
    code = run_space(tmp_path, SPACE, mismapped_backend(REWRITES["retry.attempts"]), allow=True)
    assert code == 0
    assert broken(tmp_path / "out") == {"tenacity.retry": {"retry.attempts"}}
    csv_text = (tmp_path / "out" / "results.csv").read_text()
    assert "retry.attempts: call" in csv_text
    from rbl.report.build import build_report
    made = build_report(tmp_path / "out", None, ["totalRequests"], Console(quiet=True))
    violating = {r["client"]: r["oracleViolations"] for r in made.records}
    assert violating["tenacity.retry"] == 3 and violating["tenacity.baseline"] == 0   # rows of the 3 users
    assert "oracle violations: 3 row(s) in 1 cell(s)" in (made.out_dir / "report.html").read_text()


def test_a_mismapped_jvm_client_breaks_the_attempts_oracle(tmp_path):
    from rbl.targets import client_builds
    jar = client_builds.client_jar("resilience4j")
    rewrite = lambda job: _params(job, "retry", lambda p: p.update(maxAttempts=p["maxAttempts"] + 1))  # noqa: E731
    code = run_space(tmp_path, JVM_SPACE, mismapped_backend(rewrite), jars={"resilience4j": jar})
    assert code == 3
    assert broken(tmp_path / "out") == {"resilience4j.retry": {"retry.attempts"}}


@pytest.mark.parametrize("proxy", ["envoy", "builtin"])
@pytest.mark.parametrize("example, options", [("quickstart.rbl", ()), ("equivalent-retry.rbl", ()),
                                              ("ccpe-listing4-resilience4j.rbl", ("--users", "5")),
                                              ("polyglot.rbl", ())])
def test_the_real_clients_break_no_oracle_over_the_examples(tmp_path, example, options, proxy):
    """Every example the local backend can run (the others need a Polly client), as written, on
    real Envoy and on the built-in proxy; the JVM one with its smaller user count only, to keep
    the suite's time. polyglot.rbl runs the Python, JVM, Node.js and Go clients."""
    result = run_rbl("run", str(EXAMPLES / example), "-o", "out", "--proxy", proxy, *options, cwd=tmp_path,
                     timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["sessions"][0]["proxy"] == proxy
    assert broken(tmp_path / "out") == {}
    assert "oracle violation" not in result.stdout + result.stderr
