"""A running job's limits (deadline, request budget, caller still there), checked inside a call."""

from __future__ import annotations

import socket
import threading
import time
from typing import Callable

from ..protocol import DISCONNECT_CHECK_S

_current = threading.local()


class CutShort(BaseException):
    """Ends the call in progress at once. A BaseException so that no pattern retries it (tenacity
    retries only RequestFailed) and the job's loop, not the library, decides what it means."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason             # max_duration | max_requests | disconnected


def peer_closed(connection: socket.socket) -> bool:
    """True once the caller closed its side (readable with nothing to read) or the socket broke."""
    # a non-blocking peek (select() fails on descriptors over 1024, with hundreds of callers; a
    # socket with a timeout would wait for data first)
    timeout = connection.gettimeout()
    try:
        connection.settimeout(0)
        return connection.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False                     # nothing to read: still waiting for its reply
    except OSError:
        return True
    finally:
        try:
            connection.settimeout(timeout)
        except OSError:
            pass


class JobGuard:
    """One job's limits. `sent` says how many requests the job has sent so far (its calls' and the
    call in progress); `caller_gone` is checked at most every DISCONNECT_CHECK_S."""

    def __init__(self, max_duration_ms: int, max_requests: int, sent: Callable[[], int],
                 caller_gone: Callable[[], bool] = lambda: False):
        self.started_ns = time.perf_counter_ns()
        self.deadline_ns = self.started_ns + max_duration_ms * 1_000_000
        self.max_requests = max_requests
        self._sent = sent
        self._caller_gone = caller_gone
        self._next_look_ns = 0
        self.gone = False

    def remaining_s(self) -> float:
        return max(0.0, (self.deadline_ns - time.perf_counter_ns()) / 1e9)

    def expired(self) -> bool:
        return time.perf_counter_ns() >= self.deadline_ns

    def caller_gone(self) -> bool:
        now = time.perf_counter_ns()
        if not self.gone and now >= self._next_look_ns:
            self._next_look_ns = now + int(DISCONNECT_CHECK_S * 1e9)
            self.gone = self._caller_gone()
        return self.gone

    def check(self) -> None:
        """Between calls and inside one: end it if the time is up or nobody waits for the reply."""
        if self.expired():
            raise CutShort("max_duration")
        if self.caller_gone():
            raise CutShort("disconnected")

    def before_request(self) -> None:
        if self._sent() >= self.max_requests:
            raise CutShort("max_requests")
        self.check()

    def sleep(self, seconds: float) -> None:
        """A pattern's wait, in slices so a deadline or a gone caller ends it early; a wait that no
        request can follow (the budget is spent) ends at once."""
        if self._sent() >= self.max_requests:
            raise CutShort("max_requests")
        remaining = self.remaining_s()
        end_ns = time.perf_counter_ns() + int(min(max(seconds, 0.0), remaining + 1.0) * 1e9)
        while True:
            self.check()
            left = (min(end_ns, self.deadline_ns) - time.perf_counter_ns()) / 1e9
            if left <= 0:
                if end_ns > self.deadline_ns:
                    raise CutShort("max_duration")
                return
            time.sleep(min(left, DISCONNECT_CHECK_S))

    # -- the job running on this thread, for library hooks that only get a number ----------------
    def __enter__(self) -> "JobGuard":
        _current.guard = self
        return self

    def __exit__(self, *exc) -> None:
        _current.guard = None


def guarded_sleep(seconds: float) -> None:
    """time.sleep for a pattern library: bounded by the limits of the job on this thread."""
    guard = getattr(_current, "guard", None)
    if guard is None:
        time.sleep(seconds)
    else:
        guard.sleep(seconds)
