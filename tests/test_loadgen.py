"""rbl-load, the open-loop load generator (clients/loadgen): the real binary, built as rbl builds it,
against a small threaded HTTP server on 127.0.0.1 that this module starts."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rbl.targets.client_builds import client_artifact

MS = 1_000_000  # nanoseconds


class Handler(BaseHTTPRequestHandler):
    """Routes: /ok, /slow (300 ms), /hang (3 s), /flags, /calls/ok, /calls/none, /calls/null,
    /calls/refused, /calls/timed-out, /calls/fallback, /text."""
    protocol_version = "HTTP/1.1"          # keep-alive, as rbl-load expects of its targets

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self.answer(b"")

    def do_POST(self) -> None:
        self.answer(self.rfile.read(int(self.headers.get("content-length", 0))))

    def answer(self, body: bytes) -> None:
        server: Server = self.server
        with server.lock:
            server.seen.append({"path": self.path, "port": self.client_address[1], "body": body,
                                "content_type": self.headers.get("content-type")})
        headers, reply = {}, b"fine"
        if self.path == "/slow":
            time.sleep(0.3)
        elif self.path == "/hang":
            time.sleep(3)
        elif self.path == "/flags":
            headers = {"x-rbl-response-flags": "UO,URX", "x-other": "UT"}
        elif self.path == "/calls/ok":
            reply = json.dumps({"protocol": 1, "calls": [{"ok": True, "requests": [[0, 9, 503], [30, 8, 200]]}]}).encode()
        elif self.path == "/calls/none":
            reply = json.dumps({"protocol": 1, "calls": [{"ok": False, "requests": [], "cut_short": True}]}).encode()
        elif self.path == "/calls/refused":
            reply = json.dumps({"calls": [{"ok": False, "requests": [], "rejected": "bulkhead", "wait_us": 5}]}).encode()
        elif self.path == "/calls/timed-out":
            reply = json.dumps({"calls": [{"ok": False, "requests": [[0, 50, 0]], "timed_out": True}]}).encode()
        elif self.path == "/calls/fallback":
            reply = json.dumps({"calls": [{"ok": False, "requests": [[0, 5, 503]], "fallback": True}]}).encode()
        elif self.path == "/calls/null":
            reply = json.dumps({"calls": [{"ok": False, "requests": [[0, 5, None]]}, {"ok": True}]}).encode()
        elif self.path == "/text":
            reply = b'["calls"]'

        try:
            self.send_response(200)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
        except OSError:
            pass                          # the client gave up (the timeout test)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256              # 50 requests at once must not wait in a short accept queue

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.lock = threading.Lock()
        self.seen: list[dict] = []


@pytest.fixture(scope="module")
def rbl_load() -> Path:
    return client_artifact("loadgen")


@pytest.fixture
def server():
    httpd = Server()
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def url(server: Server, path: str) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{path}"


def run_load(rbl_load: Path, tmp_path: Path, target: str, offsets: list[int], *args: str, timeout: float = 60):
    """Runs rbl-load; returns (completed process, records by seq, summary or None)."""
    schedule, out = tmp_path / "schedule.txt", tmp_path / "out.csv"
    schedule.write_text("".join(f"{o}\n" for o in offsets))
    done = subprocess.run([str(rbl_load), "--url", target, "--schedule", str(schedule), "--out", str(out), *args],
                          capture_output=True, text=True, timeout=timeout)
    return done, read_records(out), (json.loads(done.stdout.splitlines()[-1]) if done.returncode == 0 else None)


def read_records(out: Path) -> dict[int, dict]:
    if not out.exists():
        return {}
    with out.open(newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == ["seq", "scheduled_ns", "sent_ns", "latency_ns", "status", "flags", "ok",
                                     "requests", "last_status", "error", "ending"]
        rows = list(reader)
    records = {int(r["seq"]): r for r in rows}
    assert len(records) == len(rows), "a seq appears twice"
    return records


def test_the_schedule_is_followed(rbl_load, tmp_path, server):
    # irregular gaps, repeated offsets and a pause
    offsets = [0, 0, 2 * MS, 3 * MS, 3 * MS, 10 * MS] + [20 * MS + i * 7 * MS for i in range(30)] + [400 * MS]
    done, records, summary = run_load(rbl_load, tmp_path, url(server, "/ok"), offsets)
    assert done.returncode == 0, done.stderr
    assert sorted(records) == list(range(len(offsets)))
    for seq, record in records.items():
        assert int(record["scheduled_ns"]) == offsets[seq]
        # never early: the pacer hands a hit over only once it is due, and the hit's timestamp is
        # taken after that (even two hits racing for their seq numbers keep sent >= scheduled)
        assert int(record["sent_ns"]) >= offsets[seq], record
        assert int(record["sent_ns"]) - offsets[seq] < 2_000 * MS, record      # lateness: generous
        assert record["status"] == "200" and record["error"] == "" and int(record["latency_ns"]) > 0
        assert record["flags"] == record["ok"] == record["requests"] == record["last_status"] == ""
    assert summary["requests"] == len(offsets)
    assert 0 <= summary["lag_p50_ms"] <= summary["lag_p99_ms"] <= summary["lag_max_ms"]
    assert summary["elapsed_s"] >= 0.4
    assert len(server.seen) == len(offsets)
    # keep-alive: far fewer connections than requests
    assert len({s["port"] for s in server.seen}) < len(offsets) / 2


def test_a_slow_server_does_not_delay_later_sends(rbl_load, tmp_path, server):
    """Open loop: 50 sends 10 ms apart to a server taking 300 ms each; a closed loop would need 15 s."""
    offsets = [i * 10 * MS for i in range(50)]
    done, records, _ = run_load(rbl_load, tmp_path, url(server, "/slow"), offsets)
    assert done.returncode == 0, done.stderr
    assert sorted(records) == list(range(50))
    last = int(records[49]["sent_ns"])
    assert last >= 490 * MS                 # strictly: not early
    assert last < 5_000 * MS                # generously: nowhere near 50 x 300 ms
    assert all(r["status"] == "200" and int(r["latency_ns"]) >= 300 * MS for r in records.values())


def test_max_connections_limits_requests_in_flight(rbl_load, tmp_path, server):
    """One connection: the 300 ms requests go one after the other, and the lag shows it."""
    offsets = [i * 10 * MS for i in range(4)]
    done, records, summary = run_load(rbl_load, tmp_path, url(server, "/slow"), offsets, "--max-connections", "1")
    assert done.returncode == 0, done.stderr
    assert len({s["port"] for s in server.seen}) == 1
    assert max(int(r["sent_ns"]) for r in records.values()) >= 3 * 300 * MS
    assert summary["lag_max_ms"] >= 3 * 300 - 30


def test_a_client_services_reply_fills_ok_requests_and_last_status(rbl_load, tmp_path, server):
    job = tmp_path / "job.json"
    job.write_text('{"protocol": 1, "vu": 0}')
    done, records, _ = run_load(rbl_load, tmp_path, url(server, "/calls/ok"), [0, MS], "--method", "POST",
                                "--body-file", str(job))
    assert done.returncode == 0, done.stderr
    assert [(r["ok"], r["requests"], r["last_status"]) for r in records.values()] == [("1", "2", "200")] * 2
    assert all(s["body"] == job.read_bytes() and s["content_type"] == "application/json" for s in server.seen)

    done, records, _ = run_load(rbl_load, tmp_path, url(server, "/calls/none"), [0], "--method", "POST",
                                "--body-file", str(job))
    assert (records[0]["ok"], records[0]["requests"], records[0]["last_status"]) == ("0", "0", "")
    for path, fields in (("/calls/null", ("0", "1", "")), ("/text", ("", "", ""))):
        done, records, _ = run_load(rbl_load, tmp_path, url(server, path), [0])
        assert (records[0]["ok"], records[0]["requests"], records[0]["last_status"]) == fields, path


def test_how_a_library_pattern_ended_the_call_is_recorded(rbl_load, tmp_path, server):
    for path, ending in (("/calls/refused", "rejected:bulkhead"), ("/calls/timed-out", "timed_out"),
                         ("/calls/fallback", "fallback"), ("/calls/ok", "")):
        done, records, _ = run_load(rbl_load, tmp_path, url(server, path), [0])
        assert done.returncode == 0, done.stderr
        assert records[0]["ending"] == ending, path


def test_the_flags_header_is_recorded(rbl_load, tmp_path, server):
    done, records, _ = run_load(rbl_load, tmp_path, url(server, "/flags"), [0])
    assert done.returncode == 0, done.stderr
    assert records[0]["flags"] == "UO,URX"          # Envoy's several flags, comma and all
    done, records, _ = run_load(rbl_load, tmp_path, url(server, "/flags"), [0], "--flags-header", "X-Other")
    assert records[0]["flags"] == "UT"


def test_a_timeout_is_status_0_with_an_error(rbl_load, tmp_path, server):
    done, records, summary = run_load(rbl_load, tmp_path, url(server, "/hang"), [0], "--timeout", "200ms")
    assert done.returncode == 0, done.stderr
    record = records[0]
    assert record["status"] == "0" and "Timeout" in record["error"]
    assert "," not in record["error"] and "\n" not in record["error"]
    assert int(record["latency_ns"]) >= 200 * MS
    assert summary["requests"] == 1


def test_a_refused_connection_is_status_0_with_an_error(rbl_load, tmp_path):
    probe = Server()                      # a port that nothing listens on once closed
    port = probe.server_address[1]
    probe.server_close()
    done, records, _ = run_load(rbl_load, tmp_path, f"http://127.0.0.1:{port}/", [0, MS])
    assert done.returncode == 0, done.stderr
    assert [r["status"] for r in records.values()] == ["0", "0"]
    assert all("refused" in r["error"] for r in records.values())


@pytest.mark.parametrize("target", ["http://192.0.2.1/", "http://example.com:8080/x", "http://[2001:db8::1]/",
                                    "ftp://127.0.0.1/", "http://127.0.0.1.example.com/"])
def test_a_target_off_this_machine_exits_2(rbl_load, tmp_path, target):
    done, records, _ = run_load(rbl_load, tmp_path, target, [0])
    assert done.returncode == 2
    assert "rbl-load: --url" in done.stderr and ("loopback" in done.stderr or "scheme" in done.stderr)
    assert records == {}                  # nothing was written, so nothing was sent


@pytest.mark.parametrize("target", ["http://localhost:1/", "http://127.7.0.1:1/", "http://[::1]:1/"])
def test_loopback_targets_are_accepted(rbl_load, tmp_path, target):
    done, records, _ = run_load(rbl_load, tmp_path, target, [0], "--timeout", "2s")
    assert done.returncode == 0, done.stderr
    assert records[0]["status"] == "0"    # nothing listens on port 1


@pytest.mark.parametrize("lines, message", [
    ("0\n5\n3\n", "line 3: offset 3 is earlier than the line before (5)"),
    ("0\n1.5\n", 'line 2: "1.5" is not an integer number of nanoseconds'),
    ("-1\n", "line 1: offset -1 is negative"),
    ("", "no send offsets"),
])
def test_a_bad_schedule_exits_2_naming_the_line(rbl_load, tmp_path, server, lines, message):
    (tmp_path / "schedule.txt").write_text(lines)
    done = subprocess.run([str(rbl_load), "--url", url(server, "/ok"), "--schedule", str(tmp_path / "schedule.txt"),
                           "--out", str(tmp_path / "out.csv")], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "goroutine" not in done.stderr and server.seen == []


def test_sigterm_stops_sending_and_writes_what_was_recorded(rbl_load, tmp_path, server):
    schedule, out = tmp_path / "schedule.txt", tmp_path / "out.csv"
    schedule.write_text("".join(f"{i * 10 * MS}\n" for i in range(3000)))      # 30 s of sends
    process = subprocess.Popen([str(rbl_load), "--url", url(server, "/ok"), "--schedule", str(schedule), "--out", str(out)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while len(server.seen) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr
    records = read_records(out)
    summary = json.loads(stdout.splitlines()[-1])
    assert 5 <= len(records) == summary["requests"] < 3000
    assert sorted(records) == list(range(len(records)))
    sent_after = len(server.seen)
    time.sleep(0.3)
    assert len(server.seen) == sent_after     # it sends nothing once it has exited


def test_the_output_replaces_a_link_planted_there_and_never_writes_through_it(rbl_load, tmp_path, server):
    """Before: `--out` was os.Create, which truncated and wrote the file a planted link pointed to."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / "out.csv").symlink_to(victim)
    done, records, _ = run_load(rbl_load, tmp_path, url(server, "/ok"), [0])
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "precious\n" and not (tmp_path / "out.csv").is_symlink() and len(records) == 1


@pytest.mark.parametrize("body, message", [("/dev/zero", "not a regular file"), ("big", "larger than 1048576 bytes")])
def test_a_body_file_is_a_small_regular_file(rbl_load, tmp_path, server, body, message):
    """Before: `--body-file /dev/zero` was read without bound."""
    if body == "big":
        body = str(tmp_path / "big.json")
        Path(body).write_bytes(b" " * (2 << 20))
    done, _, _ = run_load(rbl_load, tmp_path, url(server, "/ok"), [0], "--method", "POST", "--body-file", body,
                          timeout=30)
    assert done.returncode == 2 and f"--body-file {body}: {message}" in done.stderr, done.stderr
    assert server.seen == []


def test_go_unit_tests_gofmt_and_vet():
    """The pacer sleeps (never spins) and allocates nothing; a line is written without allocating."""
    if shutil.which("go") is None:
        pytest.fail("go is needed for the tests")
    sources = Path(__file__).resolve().parent.parent / "clients" / "loadgen"
    env = {**os.environ, "GOFLAGS": "-mod=readonly", "CGO_ENABLED": "0"}
    tested = subprocess.run(["go", "test", "-count=1", "./..."], cwd=sources, capture_output=True, text=True, env=env,
                            timeout=300)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    vetted = subprocess.run(["go", "vet", "./..."], cwd=sources, capture_output=True, text=True, env=env, timeout=300)
    assert vetted.returncode == 0, vetted.stderr
    unformatted = subprocess.run(["gofmt", "-l", "."], cwd=sources, capture_output=True, text=True, timeout=60)
    assert unformatted.returncode == 0 and unformatted.stdout == "", unformatted.stdout
