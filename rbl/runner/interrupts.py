"""SIGTERM as Ctrl-C: a run stopped either way stops its services and keeps its finished rounds."""

from __future__ import annotations

import signal
from contextlib import contextmanager


@contextmanager
def sigterm_as_interrupt():
    """SIGTERM stops a run like Ctrl-C does: services are stopped, finished rounds are kept."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
