"""A CPU budget for a local target replica: a cgroup with a CPU quota (cgroup v2's cpu.max, or v1's
cfs quota), where this machine lets rbl make one (root, a writable cgroup file system). Elsewhere
the budget is not enforced, and the run says so; the manifest records which it was.

The replica's command runs through `sh -c 'echo $$ > .../cgroup.procs; exec ...'`, so it and every
worker it forks are inside the cgroup from their first instruction.
"""

from __future__ import annotations

import math
import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 10_000          # short: a 100 ms period lets a burst run, then stalls the replica for tens of ms
MIN_QUOTA_US = 1_000        # the kernel's smallest quota
MAX_PERIOD_US = 1_000_000   # and its longest period: 0.001 CPU is the smallest budget it can enforce


@dataclass
class CpuBudget:
    cpus: float
    path: Path            # the cgroup's directory
    version: int          # 1 or 2

    def describe(self) -> str:
        return f"{self.cpus:g} CPU (cgroup v{self.version} quota, {self.path})"

    def wrap(self, argv: list[str]) -> list[str]:
        """The command, started inside this cgroup."""
        procs = shlex.quote(str(self.path / "cgroup.procs"))
        return ["sh", "-c", f"echo $$ > {procs} && exec {shlex.join(argv)}"]

    def remove(self, timeout: float = 3.0) -> None:
        """Delete the cgroup once its processes are gone (rmdir fails while any is left)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.05)


def quota_and_period(cpus: float) -> tuple[int, int]:
    """(quota, period) in µs for `cpus` cores: the short period, lengthened for a budget under a
    tenth of a core (the quota cannot go under 1 ms); at least 0.001 CPU."""
    period = min(MAX_PERIOD_US, max(PERIOD_US, math.ceil(MIN_QUOTA_US / cpus)))
    return max(MIN_QUOTA_US, round(cpus * period)), period


def create_budget(name: str, cpus: float) -> tuple[CpuBudget | None, str]:
    """A cgroup limiting its processes to `cpus` cores (what it enforces is what it records), or
    None and why it cannot be made here."""
    remove_orphans()
    quota, period = quota_and_period(cpus)
    enforced = quota / period
    v2 = CGROUP_ROOT / "cgroup.controllers"
    try:
        if v2.is_file() and "cpu" in v2.read_text().split():
            path = CGROUP_ROOT / name
            path.mkdir(exist_ok=True)
            (path / "cpu.max").write_text(f"{quota} {period}")
            return CpuBudget(enforced, path, 2), ""
        v1 = CGROUP_ROOT / "cpu"
        if (v1 / "cpu.cfs_quota_us").is_file():
            path = v1 / name
            path.mkdir(exist_ok=True)
            (path / "cpu.cfs_period_us").write_text(str(period))
            (path / "cpu.cfs_quota_us").write_text(str(quota))
            return CpuBudget(enforced, path, 1), ""
    except OSError as error:
        return None, f"no cgroup could be made here ({error.strerror or error})"
    return None, "this machine has no cgroup CPU controller rbl can use"


def remove_orphans() -> list[Path]:
    """The empty cgroups of runners that are gone (killed with kill -9: nothing of theirs ran its
    clean-up), found by the runner's pid in their names (budget_name); removed, and returned."""
    removed = []
    for parent in (CGROUP_ROOT, CGROUP_ROOT / "cpu"):
        try:
            candidates = [p for p in parent.glob("rbl-*-*") if p.is_dir() and not p.is_symlink()]
        except OSError:
            continue
        for path in candidates:
            pid = path.name.split("-")[1]
            if not pid.isascii() or not pid.isdigit() or _alive(int(pid)):
                continue
            try:
                path.rmdir()                   # refused while any process is left in it
                removed.append(path)
            except OSError:
                pass
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def budget_name(run_token: str, replica: int, what: str = "target") -> str:
    """A cgroup's name: this runner's, this run's, and which replica of what (the target, or a service)."""
    return f"rbl-{os.getpid()}-{run_token[:8]}-{what}{replica}"
