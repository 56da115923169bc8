"""Progress on stderr. On a terminal: a rich bar whose counts, elapsed time and ETA come first
(they never get cut; the scenario's description is cut instead). Elsewhere (a pipe, a CI log):
one plain line per finished round, at most one every LINE_INTERVAL seconds, and always the last."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column

from ..report.labels import load_text, plural, target_phrase

LINE_INTERVAL = 2.0          # seconds between plain progress lines


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
        # the load generator's scenarios have one nominal user: say their load instead
        who = load_text(scenario) if "load" in scenario else plural(scenario["users"], "user")
        # --until-resolved runs rounds past the plan's count for the cells not resolved yet
        which = f"{round_number}/{self.rounds}" if round_number <= self.rounds else f"{round_number} (until resolved)"
        return (f"scenario {scenario['index'] + 1}/{self.plan_size} round {which}: "
                f"{label}, {fault['kind']} {fault['rate']:g}%, {who}" + target_phrase(scenario))

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

    def extend(self, rounds: int) -> None:
        """More rounds than planned (a run until resolved adds them as it goes): the total grows, and
        the ETA is the elapsed time per round so far times the rounds left."""
        self.total += rounds
        self._model_total = None
        if self._bar is not None:
            self._bar.update(self._task, total=self.total)

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
