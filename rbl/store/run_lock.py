"""One runner per run directory: an flock on RUN_DIR/run.lock, held for the whole run."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..errors import UsageError
from .durable import open_own

LOCK_FILE = "run.lock"


class RunLock:
    """Held from the moment a run directory is created or resumed until the run ends.

    flock, not a PID file: the kernel releases it when the holder exits, even after kill -9, so a
    crashed run never blocks its own --resume. The file also names the holder's PID, for the
    error the second runner prints.
    """

    def __init__(self, directory: Path, shown_as: Path | None = None):
        self.path = directory / LOCK_FILE
        self.shown_as = shown_as or directory
        self.descriptor: int | None = None

    def acquire(self) -> "RunLock":
        # not through a link or into another hard link's file: the lock file is truncated below
        descriptor = open_own(self.path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(descriptor)
            os.close(descriptor)
            raise UsageError(f"{self.shown_as} is in use by another rbl run "
                             f"({'process ' + holder if holder else 'another process'})",
                             hint="wait for it to end (or stop it), then `rbl run --resume` the directory") from None
        except BaseException:
            os.close(descriptor)
            raise
        os.ftruncate(descriptor, 0)           # shrinking needs no space: works on a full disk
        try:
            os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass                              # the PID is only for messages; the lock is what counts
        self.descriptor = descriptor
        return self

    def release(self) -> None:
        if self.descriptor is not None:
            # no holder's PID left behind for a run that is over; the file stays (unlinking a flocked
            # file lets two later runners each lock a different file of the same name)
            try:
                os.ftruncate(self.descriptor, 0)
            except OSError:
                pass
            os.close(self.descriptor)         # closing drops the flock
            self.descriptor = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read_holder(descriptor: int) -> str:
    try:
        text = os.pread(descriptor, 32, 0).decode("ascii", errors="replace").strip()
    except OSError:
        return ""
    return text if text.isdigit() else ""
