"""The report's figures drawn side by side: each figure's plan (a callable that builds it) runs in a
worker process forked once matplotlib is imported and the report's data are read, so no worker
imports or reads anything again, while this process goes on with the report's other sections and
then draws the last plan itself (its own sections take a fraction of a figure's time: left idle, it
would leave a core to the workers' longest queue)."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Callable

from matplotlib.figure import Figure

from .figures import figure_facts, write_figure

Plan = Callable[[], tuple[str, str, Figure]]        # () -> (title, file stem, figure)
_PLANS: list[Plan] = []                             # what the forked workers inherit


def _draw(index: int, out_dir: Path) -> tuple[str, list[Path], dict]:
    title, stem, figure = _PLANS[index]()
    paths = write_figure(figure, out_dir, stem)
    return title, paths, figure_facts(figure)


class Drawing:
    """The figures being drawn; results() waits for them: (title, [PNG, SVG], facts) per plan, in order."""

    def __init__(self, plans: list[Plan], out_dir: Path):
        self._pool: ProcessPoolExecutor | None = None
        self._futures: list[Future] = []
        self._done: list[tuple[str, list[Path], dict]] | None = None
        self._out_dir = out_dir
        workers = min(len(plans) - 1, os.cpu_count() or 1)
        _PLANS[:] = plans
        if workers < 1 or (os.cpu_count() or 1) < 2 or "fork" not in multiprocessing.get_all_start_methods():
            self._done = [_draw(index, out_dir) for index in range(len(plans))]
            _PLANS.clear()
            return
        self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
        self._futures = [self._pool.submit(_draw, index, out_dir) for index in range(len(plans) - 1)]

    def results(self) -> list[tuple[str, list[Path], dict]]:
        if self._done is None:
            try:
                last = _draw(len(_PLANS) - 1, self._out_dir)
                self._done = [future.result() for future in self._futures] + [last]
            finally:
                self.close()
        return self._done

    def close(self) -> None:
        """Stops the workers (cancelling what has not started): after results(), or on an error."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
            _PLANS.clear()
