"""Progress on stderr: a rich bar on a terminal (scenario i/N, round, elapsed, ETA), plain lines elsewhere."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class RunProgress:
    def __init__(self, console: Console, scenarios: int, rounds: int):
        self.console = console
        self.scenarios = scenarios
        self.rounds = rounds
        self.total = scenarios * rounds
        self.done = 0
        self.started = time.monotonic()
        self._bar: Progress | None = None
        self._task = None

    def __enter__(self) -> "RunProgress":
        if self.console.is_terminal:
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("rounds"), TimeElapsedColumn(), TextColumn("ETA"),
                                 TimeRemainingColumn(), console=self.console, transient=False)
            self._bar.start()
            self._task = self._bar.add_task("starting", total=self.total)
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()

    def _describe(self, scenario: dict, round_number: int) -> str:
        fault = scenario["fault"]
        return (f"scenario {scenario['index'] + 1}/{self.scenarios} round {round_number}/{self.rounds} "
                f"{scenario['client']} {fault['kind']} {fault['rate']}% u={scenario['users']}")

    def round_started(self, scenario: dict, round_number: int) -> None:
        text = self._describe(scenario, round_number)
        if self._bar is not None:
            self._bar.update(self._task, description=text)
        elif round_number == 1:
            elapsed = time.monotonic() - self.started
            self.console.print(f"[{elapsed:7.1f}s] {text}", highlight=False)

    def advance(self, scenario: dict, round_number: int, skipped: bool = False) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.advance(self._task)

    def note(self, message: str) -> None:
        self.console.print(message, highlight=False, markup=False)
