"""`rbl run` against hostile conditions (issue 15, "The runner"): dead or impostor services, two
runners on one directory, a full disk, damaged run files, plan names that are paths.

Most cases drive the real run loop in-process with a scripted backend (fast, deterministic); the
reproducers that need the real thing (an impostor on gunicorn's port, concurrent --resume, a real
full filesystem) run `rbl` as a process."""

from __future__ import annotations

import errno
import http.server
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from rbl.compiler.expand import iter_scenario_lines
from rbl.compiler.pipeline import compile_source
from rbl.compiler.plan import plan_header
from rbl.errors import EXIT_ENVIRONMENT, EXIT_STORAGE, StorageError, UsageError
from rbl.runner import closed_loop as closed_loop_module, run as run_module
from rbl.store import durable
from rbl.dataplane.target_token import TOKEN_HEADER
from rbl.runner.backend import Prepared
from rbl.runner.liveness import ServicesLost, probe_target
from rbl.store.results import PARTIAL, RunDirectory

from .conftest import run_rbl, vu_row
from .test_run import rows, start_run_in_background

SPEC = """space h {
  rounds = 3
  users = 2
  successes = 1
  max_requests = 1
  fault.rate in [0%, 50%]
  client tenacity.baseline {}
}
"""
_SPACE = compile_source(SPEC, "h.rbl").space
HEADER = plan_header(_SPACE)
LINES = list(iter_scenario_lines(_SPACE))
SCENARIOS = [json.loads(line) for line in LINES]
A, B = SCENARIOS[0]["id"], SCENARIOS[1]["id"]
ALL_ROUNDS = 2 * 3


# -- a scripted backend, so the run loop runs in-process ----------------------------------------------
class FakeFault:
    def apply(self, fault): pass
    def clear(self): pass
    def reset_counters(self): pass
    def counters(self): return {"downstream_rq_total": 2}


class OwnServices:
    """A backend (rbl/runner/backend.py) that hands the runner the test's own services and checks nothing."""

    name = "test"
    samples_other_work = True

    def __init__(self, services):
        self.services = services

    def check(self, header, console): return Prepared()
    def session_settings(self): return {}
    def start(self, header, run_dir, logs, prepared): return self.services


class FakeBackend:
    """Services where every round succeeds; `lose_after` rounds in, the target "dies"; `probe` is
    what target_probe gives."""

    proxy_kind = "fake"
    proxy_version = None
    target_description = ""

    def __init__(self, lose_after: int | None = None, probe=None):
        self.fault = FakeFault()
        self.lose_after = lose_after
        self.probe = probe
        self.checks = 0

    def __enter__(self): return self
    def __exit__(self, *exc): pass
    def pids(self): return {}
    def client_versions(self): return {}
    def target_url(self, path, library=None): return "http://127.0.0.1:9" + path
    def client_address(self, library): return "127.0.0.1", 9
    def entry_url(self, path, library): return self.target_url(path, library)
    def configure_client(self, library, pattern, config): pass
    def client_counters(self, library): return None
    def hop_counters(self): return None
    def restart_client(self, library): pass
    def target_probe(self): return self.probe

    def lost_services(self):
        self.checks += 1                       # two checks per round: before and after
        if self.lose_after is not None and self.checks > 2 * self.lose_after + 1:
            return [(None, "the target (httpbin under gunicorn) exited (killed by signal 9)")]
        return []


def fake_job(address, job, timeout):
    observation = {"vu": job["vu"], "total_us": 1000, "stopped_by": "successes", "version": "1",
                   "calls": [{"ok": True, "requests": [[0, 500, 200]]}]}
    return observation, "t0", "t1"


@pytest.fixture
def scripted(monkeypatch):
    """run(backend, out) -> exit code of start_run; resume(backend, out) likewise."""
    monkeypatch.setattr(closed_loop_module, "post_job", fake_job)
    console = Console(file=io.StringIO(), width=200)
    monkeypatch.setattr(run_module, "print_summary", lambda *args: None)

    def start(services, out: Path) -> int:
        return run_module.start_run(dict(HEADER), iter(LINES), out, OwnServices(services), console)

    def resume(services, out: Path) -> int:
        return run_module.resume_run(out, OwnServices(services), console)

    start.resume = resume
    start.console = console
    return start


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def assert_each_row_once(out: Path) -> None:
    keys = Counter((r["scenarioId"], r["round"], r["userId"]) for r in rows(out))
    assert len(keys) == ALL_ROUNDS * 2 and max(keys.values()) == 1


# -- dead or impostor services -------------------------------------------------------------------------
def test_a_target_that_dies_fails_its_round_and_stops_the_run(scripted, tmp_path):
    with pytest.raises(ServicesLost) as stopped:
        scripted(FakeBackend(lose_after=2), tmp_path / "out")
    assert stopped.value.exit_code == EXIT_ENVIRONMENT == 4
    assert "killed by signal 9" in stopped.value.message and "the run stops" in stopped.value.message
    assert "--resume" in stopped.value.hint
    out = tmp_path / "out"
    assert len(rows(out)) == 2 * 2                     # the round during which it died is not kept
    failures = [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines()]
    assert [(f["scenarioId"], f["round"]) for f in failures] == [(A, 3)]
    assert manifest(out)["status"] == "failed" and "killed" in manifest(out)["sessions"][-1]["reason"]
    assert scripted.resume(FakeBackend(), out) == 0
    assert_each_row_once(out)


class _Answer(http.server.BaseHTTPRequestHandler):
    token: str | None = None

    def do_GET(self):
        self.send_response(200)
        if self.token:
            self.send_header(TOKEN_HEADER, self.token)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def answering():
    """start(token) -> base URL of a server that answers every GET with that token (or none)."""
    servers = []

    def start(token):
        handler = type("Handler", (_Answer,), {"token": token})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_the_probe_tells_the_runs_target_from_an_impostor(answering):
    assert probe_target(answering("t0k3n"), "t0k3n") is None
    assert "without the run's token" in probe_target(answering(None), "t0k3n")
    assert "another run's token" in probe_target(answering("other"), "t0k3n")
    assert "failed" in probe_target("http://127.0.0.1:9", "t0k3n", timeout=2)


def test_a_target_that_accepts_and_does_not_answer_in_time_is_busy_not_lost():
    """A retry storm's backlog keeps every worker busy past the drain: the probe waits, it is no
    lost target; a closed port is (above)."""
    from rbl.runner.liveness import BUSY
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)                    # accepted by the kernel, never read: no answer
    try:
        began = time.monotonic()
        problem = probe_target(f"http://127.0.0.1:{listener.getsockname()[1]}", "t0k3n", timeout=0.5)
        assert problem is not None and problem.startswith(BUSY), problem
        assert 0.5 <= time.monotonic() - began < 5
    finally:
        listener.close()


class _SlowAtFirst(_Answer):
    """Answers with the token only after `slow_s`: until then, each request waits a second first."""
    slow_until = 0.0

    def do_GET(self):
        if time.monotonic() < self.slow_until:
            time.sleep(1.0)
        super().do_GET()


class _Probed:
    """A round's services reduced to what check_services asks: nothing lost, a target to probe."""

    def __init__(self, url: str):
        self.url = url
        self.fault = type("Fault", (), {"clear": lambda self: None})()

    def lost_services(self):
        return []

    def target_probe(self):
        return self.url, "t0k3n"


@pytest.mark.parametrize("slow_s, waited", [(1.5, True), (60.0, False)])
def test_a_round_starts_once_a_busy_target_answers_and_a_target_that_stays_silent_is_lost(monkeypatch, slow_s, waited):
    import functools
    from rbl.runner import round as round_module
    from rbl.runner.round import RoundFrame
    monkeypatch.setattr(round_module, "probe_target", functools.partial(probe_target, timeout=0.3))
    monkeypatch.setattr(round_module, "BUSY_GRACE_S", 4.0)
    monkeypatch.setattr(round_module, "DRAIN_POLL_S", 0.05)
    handler = type("Handler", (_SlowAtFirst,), {"token": "t0k3n", "slow_until": time.monotonic() + slow_s})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    frame = RoundFrame(_Probed(f"http://127.0.0.1:{server.server_port}"), {"clients": []}, "s")
    try:
        began = time.monotonic()
        if waited:
            frame.check_services("lib", through_proxy=True)         # busy, then answering: the round starts
            assert time.monotonic() - began >= 1.0
        else:
            with pytest.raises(ServicesLost, match="no answer within 0.3 s"):
                frame.check_services("lib", through_proxy=True)
            assert time.monotonic() - began >= 4.0                 # the whole grace, no more than a probe beyond
    finally:
        server.shutdown()
        server.server_close()


def test_an_impostor_behind_the_proxy_fails_the_first_round_and_stops_the_run(scripted, tmp_path, answering):
    with pytest.raises(ServicesLost, match="not this run's target"):
        scripted(FakeBackend(probe=(answering(None), "t0k3n")), tmp_path / "out")
    assert rows(tmp_path / "out") == []
    assert manifest(tmp_path / "out")["status"] == "failed"


def test_the_target_app_adds_the_token_to_every_response(monkeypatch):
    monkeypatch.setenv("RBL_TARGET_TOKEN", "abc123")
    sys.modules.pop("rbl.dataplane.target_app", None)
    from rbl.dataplane.target_app import app
    seen = {}

    def start_response(status, headers, exc_info=None):
        seen.update(status=status, headers=dict(headers))
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/status/418", "SERVER_NAME": "x", "SERVER_PORT": "1",
               "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(), "wsgi.errors": io.StringIO()}
    b"".join(app(environ, start_response))
    assert seen["status"].startswith("418") and seen["headers"][TOKEN_HEADER] == "abc123"


@pytest.mark.parametrize("digits, status", [("12", "200"), ("\u00b2", "400"), ("\u0663", "400"), ("", "400")])
def test_the_target_apps_factorial_takes_ascii_digits_only(monkeypatch, digits, status):
    """Before: /factorial/%B2 (PATH_INFO "/factorial/\u00b2") passed str.isdigit() and int() failed: a 500."""
    monkeypatch.setenv("RBL_TARGET_TOKEN", "abc123")
    sys.modules.pop("rbl.dataplane.target_app", None)
    from rbl.dataplane.target_app import app
    seen = {}

    def start_response(status, headers, exc_info=None):
        seen.update(status=status)
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/factorial/" + digits, "SERVER_NAME": "x", "SERVER_PORT": "1",
               "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(), "wsgi.errors": io.StringIO()}
    b"".join(app(environ, start_response))
    assert seen["status"].startswith(status)


def test_a_columns_setting_rich_cannot_read_is_ignored(tmp_path):
    """Before: COLUMNS="\u00b2" passed rich's str.isdigit() and its int() crashed every command."""
    from .conftest import run_rbl
    from .test_run_dir_hostile import make_run
    make_run(tmp_path / "R")
    done = run_rbl("report", "R", "--resamples", "100", cwd=tmp_path, env={"COLUMNS": "\u00b2", "LINES": "\u0663"})
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


# -- one runner per run directory ----------------------------------------------------------------------
def test_a_locked_run_directory_names_the_process_holding_it(tmp_path):
    first = RunDirectory.create(tmp_path / "out", HEADER, LINES)
    try:
        with pytest.raises(UsageError, match=rf"in use by another rbl run \(process {os.getpid()}\)") as error:
            RunDirectory.resume(tmp_path / "out")
        assert error.value.exit_code == 2
    finally:
        first.close()
    RunDirectory.resume(tmp_path / "out").close()       # free again once the first one ends
    assert (tmp_path / "out" / "run.lock").read_text() == ""       # and no ended holder's PID is left in it


# -- a full disk, and run directories made whole or not at all -----------------------------------------
@pytest.fixture
def disk_fills_up(monkeypatch):
    """After `fill()`, every fsync fails with ENOSPC until the run gives back its ballast, as on a
    real disk that the run itself filled up."""
    real_fsync = os.fsync
    state = {"full_in": None}

    def fsync(descriptor):
        if state["full_in"] is not None and any(Path(d, durable.BALLAST).exists() for d in state["dirs"]):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_fsync(descriptor)

    def fill(*directories):
        state["full_in"], state["dirs"] = True, directories
    monkeypatch.setattr(os, "fsync", fsync)
    return fill


def test_a_full_disk_stops_the_run_with_exit_5_and_a_resumable_directory(scripted, tmp_path, monkeypatch,
                                                                          disk_fills_up):
    out = tmp_path / "out"
    appended = []
    real_append = RunDirectory.append_round

    def append_round(self, round_rows):
        if len(appended) == 2:                     # the disk fills up during the third round's write
            disk_fills_up(out)
        real_append(self, round_rows)
        appended.append(round_rows)
    monkeypatch.setattr(RunDirectory, "append_round", append_round)
    with pytest.raises(StorageError) as stopped:
        scripted(FakeBackend(), out)
    assert stopped.value.exit_code == EXIT_STORAGE == 5
    assert "No space left on device" in stopped.value.message and "--resume" in stopped.value.hint
    assert manifest(out)["status"] == "failed"      # not "running": the ballast made room for it
    lines = (out / "results.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b"" and all(json.loads(line) for line in lines[:-1])   # whole lines only
    assert len(rows(out)) == 2 * 2
    assert not (out / durable.BALLAST).exists()


def test_resume_after_a_full_disk_gives_each_row_once(scripted, tmp_path, monkeypatch, disk_fills_up):
    out = tmp_path / "out"
    real_append = RunDirectory.append_round
    calls = []

    def append_round(self, round_rows):
        calls.append(1)
        if len(calls) == 4:
            disk_fills_up(out)
        real_append(self, round_rows)
    monkeypatch.setattr(RunDirectory, "append_round", append_round)
    with pytest.raises(StorageError):
        scripted(FakeBackend(), out)
    monkeypatch.undo()                              # space freed
    scripted_again = _fresh_scripted(monkeypatch)
    assert scripted_again.resume(FakeBackend(), out) == 0
    assert_each_row_once(out)
    assert manifest(out)["status"] == "finished"


def _fresh_scripted(monkeypatch):
    monkeypatch.setattr(closed_loop_module, "post_job", fake_job)
    monkeypatch.setattr(run_module, "print_summary", lambda *args: None)
    console = Console(file=io.StringIO())

    class Again:
        @staticmethod
        def resume(services, out):
            return run_module.resume_run(out, OwnServices(services), console)
    return Again


def test_a_full_disk_while_creating_leaves_no_run_directory(tmp_path, monkeypatch):
    def lines():
        yield LINES[0]
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    with pytest.raises(StorageError, match="No space left on device") as error:
        RunDirectory.create(tmp_path / "out", HEADER, lines())
    assert "nothing was started" in error.value.hint
    assert os.listdir(tmp_path) == []                # neither out nor a partial directory


def test_a_kill_while_creating_leaves_a_partial_that_the_next_run_ignores_or_removes(tmp_path):
    def lines():
        yield LINES[0]
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        RunDirectory.create(tmp_path / "out", HEADER, lines())
    assert os.listdir(tmp_path) == []
    # kill -9 leaves what the cleanup above would have removed: a young one is ignored, an old one removed
    young, old = tmp_path / f".out{PARTIAL}young", tmp_path / f".out{PARTIAL}old"
    for leftover in (young, old):
        leftover.mkdir()
        (leftover / "scenarios.jsonl").write_text(LINES[0][:20])
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    RunDirectory.create(tmp_path / "out", HEADER, LINES).close()
    assert young.exists() and not old.exists()
    with pytest.raises(UsageError, match="not an rbl run directory"):
        RunDirectory.resume(tmp_path / "elsewhere")
    RunDirectory.resume(tmp_path / "out").close()


def test_a_partial_directory_with_foreign_files_is_never_removed(tmp_path):
    foreign = tmp_path / f".out{PARTIAL}x"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("mine")
    os.utime(foreign, (0, 0))
    RunDirectory.create(tmp_path / "out", HEADER, LINES).close()
    assert (foreign / "thesis.tex").read_text() == "mine"


# -- damaged run files ---------------------------------------------------------------------------------
def _finished_run(tmp_path: Path) -> Path:
    """A run directory whose first scenario's rounds 1 and 2 are done."""
    out = tmp_path / "out"
    run = RunDirectory.create(out, HEADER, LINES)
    for round_number in (1, 2):
        run.append_round([vu_row(SCENARIOS[0], round_number, HEADER["clients"][0], {},
                                                         fake_job(None, {"vu": vu}, 0)[0], "t0", "t1")
                          for vu in (1, 2)])
    run.close()
    return out


def _good_row(out: Path) -> dict:
    return json.loads((out / "results.jsonl").read_text().splitlines()[0])


CORRUPT_LINES = {
    "non-UTF-8 byte": lambda row: json.dumps(row).encode().replace(b'"t0"', b'"t\xff"'),
    "a list": lambda row: b"[]",
    "a number": lambda row: b"42",
    "an empty object": lambda row: b"{}",
    "a row missing keys": lambda row: json.dumps({k: v for k, v in row.items() if k != "totalCalls"}).encode(),
    "a string round": lambda row: json.dumps({**row, "round": "1"}).encode(),
    "an unknown scenario": lambda row: json.dumps({**row, "scenarioId": "zzz"}).encode(),
    "a userId out of range": lambda row: json.dumps({**row, "userId": 7}).encode(),
    "a metric that is text": lambda row: json.dumps({**row, "throughput": "fast"}).encode(),
    "deep nesting": lambda row: b"[" * 100_000 + b"]" * 100_000,
}


@pytest.mark.parametrize("kind", CORRUPT_LINES)
def test_a_corrupt_results_line_is_dropped_with_its_line_number_and_its_round_redone(tmp_path, kind):
    out = _finished_run(tmp_path)
    lines = (out / "results.jsonl").read_bytes().split(b"\n")
    lines[2] = CORRUPT_LINES[kind](_good_row(out))           # line 3: in round 2
    (out / "results.jsonl").write_bytes(b"\n".join(lines))
    run = RunDirectory.resume(out)
    run.close()
    assert run.completed == {(A, 1)}
    assert any(w.startswith("results.jsonl line 3:") and "dropped" in w for w in run.warnings), run.warnings
    assert [(r["round"], r["userId"]) for r in run.rows()] == [(1, 1), (1, 2)]


def test_duplicated_rounds_from_two_runners_are_redone(tmp_path):
    out = _finished_run(tmp_path)
    text = (out / "results.jsonl").read_text()
    (out / "results.jsonl").write_text(text + text.splitlines()[0] + "\n")   # round 1 has vu 1 twice
    run = RunDirectory.resume(out)
    run.close()
    assert run.completed == {(A, 2)}
    assert any(f"round 1 of scenario {A} has 3 rows for 2 virtual users" in w for w in run.warnings)


def test_a_damaged_manifest_is_set_aside_and_the_run_resumes(scripted, tmp_path):
    out = _finished_run(tmp_path)
    (out / "manifest.json").write_bytes(b'{"versions": [1, 2], "sessions": "\xff"')
    assert scripted.resume(FakeBackend(), out) == 0
    assert (out / "manifest.json.damaged").exists()
    assert manifest(out)["status"] == "finished"
    assert "manifest.json was damaged" in scripted.console.file.getvalue()
    assert_each_row_once(out)


@pytest.mark.parametrize("content, expected", [
    (b"", "not readable JSON"),
    (b"[1, 2]", "JSON list, not an object"),
    (b'{"rbl_plan": 1}', "`size` is not a positive integer"),
    (b"\xff\xfe", "not readable JSON"),
])
def test_a_damaged_plan_is_named_not_a_traceback(tmp_path, content, expected):
    out = _finished_run(tmp_path)
    (out / "plan.json").write_bytes(content)
    with pytest.raises(UsageError, match=re.escape(expected)) as error:
        RunDirectory.resume(out)
    assert "plan.json" in error.value.message and error.value.exit_code == 2


@pytest.mark.parametrize("line, expected", [
    (b'{"id": "a", "ind', "line 2 is not JSON"),
    (b"\xff", "line 2 is not UTF-8"),
    (b"[]", "line 2 is a JSON list"),
    (json.dumps({**SCENARIOS[1], "users": 0}).encode(), "line 2: `users` is missing or not a positive integer"),
    (json.dumps({**SCENARIOS[1], "client": "other"}).encode(), "line 2: client 'other' is not one of"),
    (LINES[0].encode(), f"line 2: repeats scenario {A}"),
])
def test_a_damaged_scenario_line_is_named(tmp_path, line, expected):
    out = _finished_run(tmp_path)
    (out / "scenarios.jsonl").write_bytes(LINES[0].encode() + b"\n" + line + b"\n")
    with pytest.raises(UsageError, match=re.escape(expected)):
        RunDirectory.resume(out)
    # and the lock was given back: the next attempt gets the same message, not "in use"
    with pytest.raises(UsageError, match=re.escape(expected)):
        RunDirectory.resume(out)


# -- the default run directory stays under runs/ -------------------------------------------------------
@pytest.mark.parametrize("name", ["/tmp/x/ABS", "../../etc", "..", ".", "", "a/b\\c", "\x00\x7f", 42, None,
                                  "x" * 500])
def test_the_default_run_directory_is_one_safe_component_under_runs(name):
    path = run_module.default_run_dir(name)
    assert path.parent == Path("runs")
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*-\d{8}-\d{6}", path.name), path.name
    assert len(path.name) < 100


# -- the reproducers, as processes ---------------------------------------------------------------------
PLAN_ABS = """space s {
  users = 1
  successes = 1
  max_requests = 1
  client tenacity.baseline {}
}
"""


def test_a_plan_named_like_an_absolute_path_runs_under_runs(tmp_path):
    (tmp_path / "s.rbl").write_text(PLAN_ABS)
    assert run_rbl("compile", "s.rbl", "-o", "plan", "--format", "jsonl", cwd=tmp_path).returncode == 0
    plan = json.loads((tmp_path / "plan" / "plan.json").read_text())
    victim = tmp_path / "victim"
    plan["name"] = str(victim / "ABS")
    (tmp_path / "plan" / "plan.json").write_text(json.dumps(plan))
    done = run_rbl("run", "plan/plan.json", cwd=tmp_path, timeout=120)
    assert not victim.exists() and not Path("/ABS").exists()
    if done.returncode == 2:                           # the plan file's validation refused the name: fine
        assert "Traceback" not in done.stderr and not (tmp_path / "runs").exists()
        return
    assert done.returncode == 0, done.stderr
    (made,) = (tmp_path / "runs").iterdir()
    assert made.name.startswith(re.sub(r"[^A-Za-z0-9._-]+", "-", str(victim)).strip(".-"))


LONG_ROUNDS = 30          # long enough (seconds) for a second runner to start meanwhile on a busy machine
LONG = """space long {
  rounds = 30
  users = 2
  successes = 4
  max_requests = 4
  fault.kind = delay
  fault.duration = 40ms
  fault.rate = 100%
  client tenacity.baseline {}
}
"""


def _long_run(work: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    return start_run_in_background(work, LONG, *args, first_round_within=90)


def test_a_second_runner_on_the_same_directory_is_refused_with_the_holders_pid(tmp_path):
    process, out = _long_run(tmp_path)
    try:
        second = run_rbl("run", "--resume", "out", cwd=tmp_path, timeout=60)
    finally:
        _, stderr = process.communicate(timeout=240)
    assert second.returncode == 2, second.stderr
    assert f"in use by another rbl run (process {process.pid})" in second.stderr
    assert process.returncode == 0, stderr
    keys = Counter((r["scenarioId"], r["round"], r["userId"]) for r in rows(out))
    assert len(keys) == LONG_ROUNDS * 2 and max(keys.values()) == 1


def _target_port(out: Path) -> int:
    started = (out / "logs" / "proxy.log").read_text()
    return int(re.search(r"--upstream 127\.0\.0\.1:(\d+)", started).group(1))


IMPOSTOR = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_an_impostor_on_the_targets_port_stops_the_run_with_exit_4(tmp_path):
    process, out = _long_run(tmp_path, "--proxy", "builtin")
    port = _target_port(out)
    target = json.loads((out / "manifest.json").read_text())["sessions"][-1]["pids"]["target (httpbin under gunicorn)"]
    os.killpg(target, signal.SIGKILL)                   # gunicorn and its workers
    impostor = None
    try:
        deadline = time.monotonic() + 20
        while impostor is None or impostor.poll() is not None:
            assert time.monotonic() < deadline, "could not bind the target's port"
            impostor = subprocess.Popen([sys.executable, "-c", IMPOSTOR, str(port)], stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        _, stderr = process.communicate(timeout=240)
    finally:
        if impostor is not None:
            impostor.kill()
            impostor.wait()
    assert process.returncode == 4, stderr
    # whichever check sees it first: the process check, or the probe meeting the impostor
    noticed = ("the target (httpbin under gunicorn) exited (killed by signal 9)", "not this run's target")
    assert any(text in stderr for text in noticed), stderr
    assert "the run stops" in stderr and "--resume" in stderr and "Traceback" not in stderr
    assert json.loads((out / "manifest.json").read_text())["status"] == "failed"
    assert len(rows(out)) < LONG_ROUNDS * 2
    failures = (out / "failures.jsonl").read_text()
    assert any(text in failures for text in noticed)


@pytest.fixture
def small_disk(tmp_path):
    """mount(size) -> a fresh tmpfs of that size under tmp_path (needs root and mount rights)."""
    mounted = []

    def mount(size: str) -> Path:
        point = tmp_path / f"disk{len(mounted)}"
        point.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); the injected-ENOSPC tests cover this")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(["umount", "-l", str(point)], capture_output=True)


def test_a_tiny_disk_leaves_no_half_made_run_directory(tmp_path, small_disk):
    disk = small_disk("16k")
    (tmp_path / "s.rbl").write_text(PLAN_ABS)
    done = run_rbl("run", str(tmp_path / "s.rbl"), "-o", str(disk / "out"), cwd=tmp_path, timeout=120)
    assert done.returncode == 5, done.stderr
    assert "No space left on device" in done.stderr and "Traceback" not in done.stderr
    assert os.listdir(disk) == []


FILLS_UP = """space fills {
  rounds = 400
  users = 2
  successes = 1
  max_requests = 1
  target = "/status/200"
  client tenacity.baseline {}
}
"""


def test_a_disk_that_fills_up_mid_run_exits_5_and_resumes_without_duplicates(tmp_path, small_disk):
    disk = small_disk("320k")
    (tmp_path / "fills.rbl").write_text(FILLS_UP)
    done = run_rbl("run", str(tmp_path / "fills.rbl"), "-o", str(disk / "out"), "--seed", "3", cwd=tmp_path,
                   timeout=400)
    out = disk / "out"
    assert done.returncode == 5, done.stderr
    assert "No space left on device" in done.stderr and "--resume" in done.stderr
    assert "Traceback" not in done.stderr
    assert json.loads((out / "manifest.json").read_text())["status"] == "failed"
    data = (out / "results.jsonl").read_bytes()
    assert data.endswith(b"\n") and all(json.loads(line) for line in data.splitlines())
    before = len(data.splitlines())
    assert 0 < before < 400 * 2
    subprocess.run(["mount", "-o", "remount,size=4m", str(disk)], check=True)
    again = run_rbl("run", "--resume", str(out), cwd=tmp_path, timeout=400)
    assert again.returncode == 0, again.stderr
    keys = Counter((r["scenarioId"], r["round"], r["userId"]) for r in rows(out))
    assert len(keys) == 400 * 2 and max(keys.values()) == 1
