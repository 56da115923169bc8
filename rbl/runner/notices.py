"""What a backend says while it prepares a run: BuildNotice, for builds that take a while."""

from __future__ import annotations

import threading
import time

from rich.console import Console

BUILD_TICK = 10.0            # seconds between "still building" lines


class BuildNotice:
    """Says that a build started, then that it is still going (every BUILD_TICK seconds, or a
    spinner with the elapsed time on a terminal), then how long it took."""

    def __init__(self, console: Console):
        self.console = console
        self.started: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._status = None

    def say(self, text: str) -> None:
        self.started = time.monotonic()
        self.console.print(text, highlight=False, markup=False)
        if self.console.is_terminal:
            self._status = self.console.status("building (a first build downloads its dependencies) ...")
            self._status.start()
            self._thread = threading.Thread(target=self._tick_status, daemon=True)
        else:
            self._thread = threading.Thread(target=self._tick_lines, daemon=True)
        self._thread.start()

    def _elapsed(self) -> float:
        return time.monotonic() - (self.started or time.monotonic())

    def _tick_status(self) -> None:
        while not self._stop.wait(1.0):
            self._status.update(f"building ... {self._elapsed():.0f} s (a first build downloads its dependencies)")

    def _tick_lines(self) -> None:
        while not self._stop.wait(BUILD_TICK):
            self.console.print(f"  still building ({self._elapsed():.0f} s)", highlight=False, markup=False)

    def __enter__(self) -> "BuildNotice":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._status is not None:
            self._status.stop()
        if self.started is not None and exc_type is None:
            self.console.print(f"  built in {self._elapsed():.0f} s (cached for the next runs)", highlight=False,
                               markup=False)
