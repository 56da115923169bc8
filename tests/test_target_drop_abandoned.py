"""`target.drop_abandoned`: the target app's /factorial/N stops its work once its caller has gone,
checked on real sockets and a real gunicorn, against the same target without it in the same run."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import time
import urllib.request

import pytest

from rbl.backends.net import free_port
from rbl.dataplane.target_settings import DROP_ABANDONED_ENV, target_environment
from rbl.dataplane.target_token import TOKEN_ENV

from .live_services import wait_for

os.environ.setdefault(TOKEN_ENV, "test-token")          # target_app reads it at import
from rbl.dataplane.target_app import CallerGone, caller_gone, factorial_digits  # noqa: E402

WORK = "/factorial/60000"          # about half a second of CPU here


def test_a_connection_is_gone_once_its_peer_closed_or_reset_it():
    mine, theirs = socket.socketpair()
    with mine:
        assert not caller_gone(mine)                 # open, nothing sent
        theirs.sendall(b"GET / HTTP/1.1\r\n\r\n")
        assert not caller_gone(mine)                 # a next request waiting is a caller still there
        mine.recv(100)
        theirs.close()
        assert caller_gone(mine)
    assert not caller_gone(None)                     # no socket to look at: the work goes on


def test_a_reset_connection_is_gone():
    listener = socket.create_server(("127.0.0.1", 0))
    with listener:
        caller = socket.create_connection(listener.getsockname())
        served, _ = listener.accept()
        with served:
            caller.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            caller.close()                           # an RST, as a proxy resetting its upstream sends
            time.sleep(0.05)
            assert caller_gone(served)


def test_the_work_stops_at_the_first_look_after_the_caller_left():
    looks = []

    def gone() -> bool:
        looks.append(True)
        return len(looks) > 2
    with pytest.raises(CallerGone):
        factorial_digits(5000, gone)
    assert len(looks) == 3
    assert factorial_digits(5000, lambda: False) == factorial_digits(5000) == 54233


def test_the_plan_alone_sets_it():
    assert target_environment({"path": WORK, "drop_abandoned": True}) == {DROP_ABANDONED_ENV: "1"}
    assert target_environment({"path": WORK}) == {}


# -- a real gunicorn ----------------------------------------------------------------------------------

def _start_target(drop: bool) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = {key: value for key, value in os.environ.items() if key != DROP_ABANDONED_ENV}
    env.update({TOKEN_ENV: "test-token", **target_environment({"drop_abandoned": drop})})
    process = subprocess.Popen([sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", "1",
                                "--worker-class", "gthread", "--threads", "4", "rbl.dataplane.target_app:app"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(f"http://127.0.0.1:{port}/status/200")
    return process, port


def _worker_cpu_s(master: int) -> float:
    """The CPU time of gunicorn's worker (the master's one child), from /proc."""
    children = open(f"/proc/{master}/task/{master}/children").read().split()
    assert len(children) == 1, children
    fields = open(f"/proc/{children[0]}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _settled_cpu_s(master: int, limit_s: float = 30.0) -> float:
    """The worker's CPU time once it stopped growing for 0.6 s (its work is over)."""
    deadline = time.monotonic() + limit_s
    last, still_since = _worker_cpu_s(master), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = _worker_cpu_s(master)
        if now != last:
            last, still_since = now, time.monotonic()
        elif time.monotonic() - still_since >= 0.6:
            return now
    raise AssertionError(f"the target kept working for {limit_s} s")


def _abandon(port: int, count: int) -> None:
    """`count` requests of WORK, each left 0.1 s after it was sent (one by a reset, the rest closed)."""
    callers = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
    for caller in callers:
        caller.sendall(f"GET {WORK} HTTP/1.1\r\nHost: target\r\n\r\n".encode())
    time.sleep(0.1)
    callers[0].setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    for caller in callers:
        caller.close()


def _costs(drop: bool) -> tuple[float, float]:
    """(CPU of one request answered, CPU of three abandoned) on a target with or without the setting."""
    process, port = _start_target(drop)
    try:
        before = _settled_cpu_s(process.pid)
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}{WORK}", timeout=60).read()
        assert int(body) == factorial_digits(60000)       # a caller that waits gets its answer
        answered = _settled_cpu_s(process.pid) - before
        before += answered
        _abandon(port, 3)
        return answered, _settled_cpu_s(process.pid) - before
    finally:
        process.kill()
        process.wait(timeout=10)


def test_a_target_that_drops_abandoned_work_spends_almost_nothing_on_it():
    answered, abandoned = _costs(drop=True)
    kept_answered, kept_abandoned = _costs(drop=False)
    print(f"\none request answered: {answered:.2f} s of CPU (without the setting {kept_answered:.2f} s); "
          f"three abandoned after 0.1 s: {abandoned:.2f} s dropping them, {kept_abandoned:.2f} s finishing them")
    # finishing them costs about three answers; dropping them, what 0.1 s of each took
    assert kept_abandoned > 2 * kept_answered
    assert abandoned < 0.5 * answered
