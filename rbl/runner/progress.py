"""Progress on stderr. On a terminal: a rich bar whose counts, elapsed time and ETA come first
(they never get cut; the scenario's description is cut instead). Elsewhere (a pipe, a CI log):
one plain line per finished round, at most one every LINE_INTERVAL seconds, and always the last.
BuildNotice keeps a long client build from looking like a hang."""

from __future__ import annotations

import threading
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column

from ..report.labels import plural

LINE_INTERVAL = 2.0          # seconds between plain progress lines
BUILD_TICK = 10.0            # seconds between "still building" lines


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class RunProgress:
    def __init__(self, console: Console, scenarios: int, rounds: int, labeller=None, plan_scenarios=None,
                 plan_size: int | None = None):
        self.console = console
        self.scenarios = scenarios                 # the ones this run executes (a shard's, or all)
        self.plan_size = plan_size or scenarios    # a scenario is named by its number in the plan
        self.rounds = rounds
        self.total = scenarios * rounds
        self.done = 0
        self.started = time.monotonic()
        self._last_line = float("-inf")
        self._labeller = labeller
        self._current = ""
        self._bar: Progress | None = None
        self._task = None
        # the ETA weighs rounds by their modelled duration (rbl/estimate.py): a retry round under an
        # 80% fault takes far longer than a baseline round, and a count of rounds says "4 s" for 40
        self._model_total = _modelled_total(plan_scenarios, rounds) if plan_scenarios is not None else None
        self._model_done = 0.0

    def __enter__(self) -> "RunProgress":
        if self.console.is_terminal:
            self._bar = Progress(MofNCompleteColumn(), TextColumn("rounds"), TimeElapsedColumn(),
                                 TextColumn("ETA {task.fields[eta]}"), BarColumn(bar_width=20),
                                 TextColumn("{task.description}",
                                            table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1)),
                                 console=self.console, transient=False, expand=True)
            self._bar.start()
            self._task = self._bar.add_task("starting", total=self.total, eta="-:--:--")
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()

    def _describe(self, scenario: dict, round_number: int) -> str:
        fault = scenario["fault"]
        label = self._labeller.label(scenario) if self._labeller else scenario["client"]
        return (f"scenario {scenario['index'] + 1}/{self.plan_size} round {round_number}/{self.rounds}: "
                f"{label}, {fault['kind']} {fault['rate']:g}%, {plural(scenario['users'], 'user')}")

    def round_started(self, scenario: dict, round_number: int) -> None:
        self._current = self._describe(scenario, round_number)
        if self._bar is not None:
            self._bar.update(self._task, description=self._current)

    def advance(self, scenario: dict, round_number: int, skipped: bool = False) -> None:
        self.done += 1
        if self._model_total is not None and not skipped:
            self._model_done += _modelled_round(scenario)
        elif self._model_total is not None:
            self._model_total = max(0.0, self._model_total - _modelled_round(scenario))   # done before
        now = time.monotonic()
        if self._bar is not None:
            self._bar.update(self._task, advance=1, eta=_clock(self._eta(now - self.started)))
            return
        if skipped or (now - self._last_line < LINE_INTERVAL and self.done < self.total):
            return
        self._last_line = now
        elapsed = now - self.started
        eta = self._eta(elapsed)
        described = self._current or self._describe(scenario, round_number)
        self.console.print(f"[{_clock(elapsed)}] {self.done}/{self.total} rounds, ETA {_clock(eta)}; "
                           f"last: {described}", highlight=False, markup=False, soft_wrap=True)

    def _eta(self, elapsed: float) -> float:
        if self._model_total and self._model_done > 0:
            return elapsed / self._model_done * max(0.0, self._model_total - self._model_done)
        return elapsed / self.done * (self.total - self.done) if self.done else 0.0

    def note(self, message: str) -> None:
        self.console.print(message, highlight=False, markup=False)


def _modelled_round(scenario: dict) -> float:
    from ..estimate import DEFAULT_REQUEST_MS, ROUND_OVERHEAD_S, user_seconds
    try:
        return user_seconds(scenario, DEFAULT_REQUEST_MS) + ROUND_OVERHEAD_S
    except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError):
        return ROUND_OVERHEAD_S


def _modelled_total(plan_scenarios, rounds: int) -> float | None:
    """The modelled duration of every round of the plan's scenarios (a sample of a huge plan, scaled)."""
    from ..estimate import SAMPLE
    total, count, sampled = 0.0, 0, 0
    for scenario in plan_scenarios():
        count += 1
        if sampled < SAMPLE:
            total += _modelled_round(scenario)
            sampled += 1
    return total / sampled * count * rounds if sampled else None


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
