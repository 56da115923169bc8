"""Warm-up rounds (`warmup = N`): run and stored first for every scenario, flagged in the rows,
left out of the report's statistics unless --include-warmup (a real run on the Python client)."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import median

import pytest

from .test_run import rbl, rows

SPACE = """
space warm {
  rounds = 2
  warmup = 1
  order = blocked
  users = 3
  successes = 3
  max_requests = 20
  target = "/bytes/64"
  fault.rate in [0%, 50%]
  client tenacity.retry {
    stop_after_attempt = 3
    wait = none
  }
}
"""


@pytest.fixture(scope="module")
def warm_run(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("warm")
    (work / "warm.rbl").write_text(SPACE)
    done = rbl("run", "warm.rbl", "-o", "out", cwd=work)
    assert done.returncode == 0, done.stderr
    return work


def test_warmup_rounds_run_first_and_are_flagged(warm_run):
    found = rows(warm_run / "out")
    assert len(found) == 2 * 3 * (1 + 2)                    # warm-up rows are stored
    assert {r["round"] for r in found if r["warmup"]} == {1}
    assert {r["round"] for r in found if not r["warmup"]} == {2, 3}
    first_start = min(r["startTime"] for r in found if not r["warmup"])
    assert all(r["startTime"] < first_start for r in found if r["warmup"])   # blocked: every warm-up first
    manifest = json.loads((warm_run / "out" / "manifest.json").read_text())
    assert manifest["warmup"] == 1
    assert "warmup" in (warm_run / "out" / "results.csv").read_text().splitlines()[0].split(",")


def cells(work: Path, out: str, *options: str) -> list[dict]:
    done = rbl("report", "out", "-o", out, "--metric", "totalExecutionTime", *options, cwd=work)
    assert done.returncode == 0, done.stderr
    return json.loads((work / out / "cells.json").read_text())


def test_the_report_leaves_warmup_rows_out_of_its_statistics(warm_run):
    found = rows(warm_run / "out")
    for cell in cells(warm_run, "report"):
        measured = [r["totalExecutionTime"] for r in found if r["scenarioId"] == cell["scenarioId"] and not r["warmup"]]
        assert cell["totalExecutionTime.n"] == 3 * 2
        assert cell["totalExecutionTime.median"] == pytest.approx(median(measured))
        assert cell["status"] == "ok"
    html = (warm_run / "report" / "report.html").read_text()
    assert "are left out of the statistics" in html


def test_include_warmup_counts_them(warm_run):
    assert all(cell["totalExecutionTime.n"] == 3 * 3 for cell in cells(warm_run, "with-warmup", "--include-warmup"))
