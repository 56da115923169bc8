"""How much of the machine other work took while a run ran: the CPU the machine spent outside the
run's own processes (the runner and every process it started: httpbin, the proxy, the clients).

A benchmark that shares its machine measures its neighbours too; the report's A/A check sees the
effect (rbl/report/noise.py), this says the cause (what a record means: rbl/report/other_work.py). Linux only (/proc); elsewhere nothing is
recorded. Sampled once a second on a daemon thread; a sample walks /proc for the run's process
tree, a few milliseconds of one core.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

PROC = Path("/proc")
INTERVAL = 1.0


def machine_busy_ticks() -> tuple[int, int] | None:
    """(busy clock ticks of all cores since boot, cores), from /proc/stat; None without it."""
    try:
        lines = (PROC / "stat").read_text().splitlines()
    except OSError:
        return None
    fields = [int(v) for v in lines[0].split()[1:]]
    # user nice system idle iowait irq softirq steal (guest time is counted in user already)
    busy = fields[0] + fields[1] + fields[2] + sum(fields[5:8])
    cores = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    return busy, max(cores, 1)


def process_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, CPU ticks of the process and of its children it has waited for)."""
    table = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:                    # gone since the listing
            continue
        fields = text[text.rindex(")") + 2:].split()   # after the command, which may hold spaces
        table[int(entry.name)] = (int(fields[1]), sum(int(v) for v in fields[11:15]))
    return table


def tree_ticks(root: int, table: dict[int, tuple[int, int]]) -> dict[int, int]:
    """pid -> CPU ticks, for `root` and every descendant (children that exited count once their
    parent has waited for them, through its children's ticks)."""
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    ticks, stack = {}, [root]
    while stack:
        pid = stack.pop()
        if pid in table:
            ticks[pid] = table[pid][1]
            stack.extend(children.get(pid, ()))
    return ticks


def own_ticks_between(before: dict[int, int], after: dict[int, int]) -> int:
    """The run's own CPU ticks between two samples, process by process: a process that ended in
    between drops out (its last ticks are lost, not taken back from the total), one that started
    counts from 0."""
    return sum(max(0, ticks - before.get(pid, 0)) for pid, ticks in after.items())


class OtherWork:
    """Samples, until stopped, the CPU other work took: with `record()`, how many of the machine's
    cores it used on average and at its peak (over one-second samples)."""

    def __init__(self, root: int | None = None, interval: float = INTERVAL):
        self.root = root or os.getpid()
        self.interval = interval
        self.samples: list[float] = []        # other work's cores, one value per interval
        self.cores = 0
        self.seconds = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "OtherWork":
        if machine_busy_ticks() is not None:
            self._thread = threading.Thread(target=self._sample, name="rbl-other-work", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _sample(self) -> None:
        try:
            self._sample_until_stopped()
        except (OSError, ValueError, IndexError):
            pass                               # a /proc this code cannot read: what was sampled stands

    def _sample_until_stopped(self) -> None:
        ticks_per_second = os.sysconf("SC_CLK_TCK")
        previous = self._reading()
        started = time.monotonic()
        while not self._stop.wait(self.interval):
            current = self._reading()
            if current is None or previous is None:
                return
            elapsed = current[0] - previous[0]
            busy = current[1] - previous[1]
            own = own_ticks_between(previous[2], current[2])
            if elapsed > 0:
                self.samples.append(max(0.0, (busy - own) / ticks_per_second / elapsed))
            self.seconds = time.monotonic() - started
            previous = current

    def _reading(self) -> tuple[float, int, dict[int, int]] | None:
        machine = machine_busy_ticks()
        if machine is None:
            return None
        self.cores = machine[1]
        return time.monotonic(), machine[0], tree_ticks(self.root, process_table())

    def record(self) -> dict | None:
        """What the manifest keeps; None when nothing was measured (not Linux, or under a second)."""
        if not self.samples:
            return None
        return {"cores": self.cores, "otherCores": round(sum(self.samples) / len(self.samples), 3),
                "otherCoresPeak": round(max(self.samples), 3), "seconds": round(self.seconds, 1),
                "samples": len(self.samples)}
