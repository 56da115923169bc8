"""Other work on the machine while a run runs (rbl/runner/other_work.py) and what the report's
verdict makes of it (rbl/report/noise.py, noise_view.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np

from rbl.report.noise import noise_check
from rbl.report.noise_view import verdict
from rbl.report.other_work import SHARED_MACHINE_CORES, run_other_work, shared_machine_note
from rbl.runner.other_work import OtherWork, own_ticks_between, process_table, tree_ticks

from .test_noise import METRIC, cells_with, quickstart

SPIN = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass\n"


def test_the_tree_holds_the_root_and_its_descendants_only():
    table = {1: (0, 5), 10: (1, 7), 11: (10, 3), 12: (11, 2), 20: (1, 100)}
    assert tree_ticks(10, table) == {10: 7, 11: 3, 12: 2}
    assert tree_ticks(99, table) == {}


def test_own_ticks_count_each_process_from_where_it_was():
    before = {10: 100, 11: 50}
    after = {10: 130, 12: 8}           # 11 ended (its ticks are not taken back), 12 started
    assert own_ticks_between(before, after) == 30 + 8


def test_a_spinning_child_is_the_runs_own_work_and_anothers_is_not():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        ticks = os.sysconf("SC_CLK_TCK")
        spun_before = process_table()[spinner.pid][1]
        # the same seconds seen from two runs: this process (the spinner is its child) and the sleeper
        with OtherWork(interval=0.5) as mine, OtherWork(root=sleeper.pid, interval=0.5) as theirs:
            started = time.monotonic()
            time.sleep(3)
        spun = (process_table()[spinner.pid][1] - spun_before) / ticks / (time.monotonic() - started)
    finally:
        for process in (spinner, sleeper):
            process.kill()
            process.wait()
    mine, theirs = mine.record(), theirs.record()
    assert mine["cores"] == theirs["cores"] == os.cpu_count()
    assert spun > 0.05                                 # it ran, however busy the machine is
    # what tells the two apart is the spinner (and this process's own bit of work), nothing else
    difference = theirs["otherCores"] - mine["otherCores"]
    assert abs(difference - spun) < max(0.25, spun / 3), (mine, theirs, spun)


def test_a_run_takes_every_sessions_and_shards_record_weighted_by_time():
    record = lambda other, peak, seconds: {"cores": 2, "otherCores": other, "otherCoresPeak": peak, "seconds": seconds}
    manifest = {"sessions": [{"otherWork": record(0.1, 0.3, 30)}, {"status": "interrupted"}],
                "shards": [{"sessions": [{"otherWork": record(1.0, 1.8, 10)}]}, {"sessions": []}]}
    assert run_other_work(manifest) == {"cores": 2, "otherCores": 0.325, "otherCoresPeak": 1.8, "seconds": 40}
    assert run_other_work({"sessions": [{"otherWork": {"cores": "2"}}]}) is None
    assert run_other_work(None) is None and run_other_work({}) is None


def alike_cells(scenarios):
    rng = np.random.default_rng(3)
    return cells_with(scenarios, 3, lambda s, r, u: 10 * np.exp(rng.normal(0, 0.05)))


def test_a_run_beside_other_work_fails_the_check_and_says_so():
    header, scenarios = quickstart()
    busy = {"sessions": [{"otherWork": {"cores": 2, "otherCores": 1.4, "otherCoresPeak": 2.0, "seconds": 12}}]}
    check = noise_check(header, alike_cells(scenarios), [METRIC], "auto", resamples=50, manifest=busy)
    assert check.cells_passed and check.shared_machine and not check.passed
    text = verdict(check)
    assert text["level"] == "warning"
    assert text["headline"].startswith("A/A check failed: this run shared its machine: other processes used 1.4 "
                                       "of its 2 cores on average")
    assert "a machine of its own" in text["details"][-1]
    note = shared_machine_note(busy["sessions"][0]["otherWork"])
    assert note.startswith("note: other processes used 1.4 of 2 cores") and "rbl report" in note


def test_a_little_background_work_is_reported_but_passes():
    header, scenarios = quickstart()
    quiet = {"sessions": [{"otherWork": {"cores": 2, "otherCores": SHARED_MACHINE_CORES / 5,
                                         "otherCoresPeak": 0.2, "seconds": 12}}]}
    check = noise_check(header, alike_cells(scenarios), [METRIC], "auto", resamples=50, manifest=quiet)
    assert check.passed and not check.shared_machine
    text = verdict(check)
    assert text["level"] == "ok" and any(line.startswith("Other work on the machine") for line in text["details"])
    assert shared_machine_note(quiet["sessions"][0]["otherWork"]) is None


def test_without_alike_cells_the_other_work_still_stands():
    header, scenarios = quickstart()
    at_50 = [s for s in scenarios if s["fault"]["rate"] == 50]          # no 0% cells: no A/A group
    busy = {"sessions": [{"otherWork": {"cores": 2, "otherCores": 0.9, "otherCoresPeak": 1.1, "seconds": 5}}]}
    check = noise_check(header, cells_with(at_50, 3, lambda s, r, u: 10.0), [METRIC], manifest=busy)
    text = verdict(check)
    assert text["level"] == "warning" and text["headline"].startswith("Noise floor: not measured.")
    assert "But this run shared its machine: other processes used 0.9 of its 2 cores" in text["headline"]
    quiet = noise_check(header, cells_with(at_50, 3, lambda s, r, u: 10.0), [METRIC])
    assert verdict(quiet)["level"] == "unknown" and not verdict(quiet)["details"]
