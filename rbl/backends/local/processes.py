"""Child processes the runner owns: started in their own process group, logged, always stopped.

Every service gets its own session (so a terminal's Ctrl-C reaches only the runner, which then
stops them in order) and, on Linux, a parent-death signal (so even `kill -9` of the runner does
not leave orphans behind).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from ...errors import EnvironmentMissing

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    os.setsid()
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        except (OSError, AttributeError):
            pass


class ServiceNotReady(EnvironmentMissing):
    """A service did not come up; the message names it and points at its log."""


class Service:
    """One running child process with its log file."""

    def __init__(self, name: str, argv: list[str], log_path: Path, env: dict | None = None,
                 stop_signal: int = signal.SIGTERM):
        self.name = name
        self.stop_signal = stop_signal
        self.argv = argv
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_path.open("ab")
        self._log.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%S')} starting: {' '.join(argv)}\n".encode())
        self._log.flush()
        self._log_start = self._log.tell()
        # stdout goes to the log too (no pipe to fill up); announcements are read back from it
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._log,
                                        stderr=self._log, env=env, preexec_fn=_die_with_parent)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def read_announcement(self, word: str, timeout: float) -> list[str]:
        """Wait for the `word ...` line a service prints once bound; later output goes to the log."""
        deadline = time.monotonic() + timeout
        with self.log_path.open("rb") as log:
            log.seek(self._log_start)
            pending = b""
            while time.monotonic() < deadline:
                pending += log.read()
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    parts = line.decode(errors="replace").split()
                    if parts and parts[0] == word:
                        return parts[1:]
                if not self.alive:
                    raise self.not_ready(f"exited with code {self.process.returncode} before it was ready")
                time.sleep(0.01)
        raise self.not_ready(f"did not announce `{word}` within {timeout:g} s")

    def wait_http(self, url: str, timeout: float) -> None:
        """Poll `url` until it answers 2xx (the health check before a service is used)."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if not self.alive:
                raise self.not_ready(f"exited with code {self.process.returncode} before it was ready")
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if 200 <= response.status < 300:
                        return
                    last = f"HTTP {response.status}"
            except OSError as error:
                last = str(error)
            time.sleep(0.05)
        raise self.not_ready(f"was not ready within {timeout:g} s ({url}: {last})")

    def not_ready(self, what: str) -> ServiceNotReady:
        return ServiceNotReady(f"the {self.name} {what}; see its log: {self.log_path}")

    def stop(self, grace: float = 3.0) -> None:
        """SIGTERM (or the service's own stop signal) to the whole process group, SIGKILL what is
        left after `grace` seconds."""
        self.terminate()
        self.reap(time.monotonic() + grace)

    def terminate(self) -> None:
        """The first half of a stop: ask the process group to go."""
        if self.process.poll() is None:
            self._signal(self.stop_signal)

    def reap(self, deadline: float) -> None:
        """The second half: wait until `deadline`, then SIGKILL the group (workers a graceful
        master may have left) and close the log."""
        if self.process.poll() is None:
            try:
                self.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        self._signal(signal.SIGKILL)
        self.process.wait()
        self._log.close()

    def _signal(self, signum: int) -> None:
        try:
            os.killpg(self.process.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def stop_all(services: list[Service], grace: float = 3.0) -> None:
    """Stop services at once: every group is asked to go first, then each is waited for within
    one shared grace period (one after another, a run's stop took the sum of their exits)."""
    for service in services:
        service.terminate()
    deadline = time.monotonic() + grace
    for service in services:
        service.reap(deadline)
