"""A local CPU budget (rbl/backends/local/cpu_budget.py) enforces and records the same share, down to
the kernel's smallest; cgroups left by a runner killed with kill -9 are removed by the next one; and
`rbl calibrate` stopped by SIGTERM leaves no temporary directory and no service behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rbl.backends.local import cpu_budget
from rbl.backends.local.cpu_budget import budget_name, create_budget, quota_and_period, remove_orphans

from .conftest import REPO


@pytest.mark.parametrize("cpus, quota, period", [
    (0.25, 2_500, 10_000), (2.0, 20_000, 10_000), (0.1, 1_000, 10_000),
    (0.05, 1_000, 20_000), (0.003, 1_000, 333_334), (0.0005, 1_000, 1_000_000)])
def test_a_budget_under_a_tenth_of_a_core_lengthens_the_period_instead_of_rounding_up(cpus, quota, period):
    assert quota_and_period(cpus) == (quota, period)


@pytest.fixture
def fake_cgroups(tmp_path, monkeypatch) -> Path:
    """A cgroup v2 root with the cpu controller, in a directory of the test's own."""
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory\n")
    monkeypatch.setattr(cpu_budget, "CGROUP_ROOT", tmp_path)
    return tmp_path


def test_what_a_budget_records_is_what_it_enforces(fake_cgroups):
    budget, why = create_budget("rbl-test-small", 0.05)
    assert why == "" and (fake_cgroups / "rbl-test-small" / "cpu.max").read_text() == "1000 20000"
    assert budget.cpus == 0.05 and budget.describe().startswith("0.05 CPU")
    # below what the kernel can enforce: the smallest it can, recorded as such (was: the asked 0.0005)
    budget, _ = create_budget("rbl-test-tiny", 0.0005)
    assert (fake_cgroups / "rbl-test-tiny" / "cpu.max").read_text() == "1000 1000000"
    assert budget.cpus == 0.001 and budget.describe().startswith("0.001 CPU")


def test_the_cgroups_of_a_runner_that_is_gone_are_removed(fake_cgroups):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    orphan = fake_cgroups / f"rbl-{gone.pid}-abcdefgh-target0"
    busy = fake_cgroups / f"rbl-{gone.pid}-abcdefgh-target1"
    mine = fake_cgroups / budget_name("abcdefgh", 0)                # this process's: alive
    other = fake_cgroups / "system.slice"
    for path in (orphan, busy, mine, other):
        path.mkdir()
    (busy / "cgroup.procs").write_text("1\n")                         # not empty: rmdir refuses it
    assert remove_orphans() == [orphan]
    assert not orphan.exists() and busy.exists() and mine.exists() and other.exists()
    # and a budget made later sweeps them first
    busy.joinpath("cgroup.procs").unlink()
    create_budget(budget_name("ijklmnop", 0), 0.5)
    assert not busy.exists() and mine.exists()


SPEC = """space stopped_calibration {
  load = open
  load.rate = 50%
  load.duration = 4s
  target = "/factorial/2345"
  target.cpus = 0.25
  client istio.circuit_breaker { http2MaxRequests = 4 }
}
"""


def test_calibrate_stopped_by_sigterm_leaves_nothing_behind(tmp_path):
    (tmp_path / "c.rbl").write_text(SPEC)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {**os.environ, "TMPDIR": str(temporary), "PYTHONPATH": str(REPO)}   # stopped: it stores nothing
    process = subprocess.Popen([sys.executable, "-m", "rbl", "calibrate", "c.rbl", "--force", "--proxy", "builtin"],
                               cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    deadline = time.monotonic() + 300
    while not list(temporary.glob("rbl-calibrate-*/steps")) and process.poll() is None:
        assert time.monotonic() < deadline, "calibration never started measuring"
        time.sleep(0.1)
    assert process.poll() is None, process.communicate()
    time.sleep(1.0)                                                   # measuring a step
    os.kill(process.pid, signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    assert list(temporary.iterdir()) == [], list(temporary.iterdir())
    survivors = subprocess.run(["pgrep", "-s", str(process.pid)], capture_output=True, text=True).stdout.split()
    assert survivors == [], f"processes of the stopped calibration still running: {survivors}"
