"""`rbl diff` (rbl/report/diff.py) on real runs: a run against itself differs nowhere; an abort
fault against a delay fault at the same rate differs where retries fire (50%), not where no fault
is injected (0%); the bootstrap difference itself on data with a known answer."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from rbl.report.stats import difference

from .conftest import run_rbl
from .test_run import rbl

SPACE = """
space compared {{
  rounds = 3
  users = 10
  successes = 10
  max_requests = 100
  target = "/bytes/64"
  {fault}
  fault.rate in [0%, 50%]
  client tenacity.retry {{
    stop_after_attempt = 4
    wait = fixed
    wait_fixed in [1ms]            // an axis of one value: labels carry it, with its unit
  }}
}}
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("diff")
    for name, fault in (("aborts", "fault.kind = abort"), ("delays", "fault.kind = delay\n  fault.duration = 5ms")):
        (work / f"{name}.rbl").write_text(SPACE.format(fault=fault))
        done = rbl("run", f"{name}.rbl", "-o", name, cwd=work)
        assert done.returncode == 0, done.stderr
    return work


def diff_json(work: Path, a: str, b: str, *options: str) -> dict:
    done = rbl("diff", a, b, "--format", "json", "-o", f"diff-{a}-{b}", *options, cwd=work)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_run_against_itself_differs_nowhere(runs):
    result = diff_json(runs, "aborts", "aborts")
    assert len(result["cells"]) == 2 * 3                       # two cells x the three default metrics
    assert not [c for c in result["cells"] if c["significant"]]
    assert all(c["difference"] == 0 for c in result["cells"])


def test_abort_against_delay_differs_in_requests_at_50_percent_only(runs):
    result = diff_json(runs, "aborts", "delays", "--metric", "totalRequests")
    by_rate = {c["faultRate"]: c for c in result["cells"]}
    assert set(by_rate) == {0, 50}
    assert not by_rate[0]["significant"] and by_rate[0]["difference"] == 0   # no fault: 10 requests either way
    assert by_rate[50]["significant"] and by_rate[50]["difference"] < 0     # aborts retried, delays did not
    assert by_rate[50]["ci95High"] < 0


def test_text_csv_and_figure(runs):
    text = rbl("diff", "aborts", "delays", "-m", "totalRequests", "-m", "successTimePerRequest", cwd=runs)
    assert text.returncode == 0, text.stderr
    assert "differs" in text.stdout and "comparisons differ" in text.stdout
    out = runs / "delays" / "diff-vs-aborts"                  # the default place
    assert {p.name for p in out.iterdir()} == {"diff.csv", "diff.json", "diff.svg"}
    table = list(csv.DictReader(io.StringIO((out / "diff.csv").read_text())))
    assert len(table) == 2 * 2 and {r["significant"] for r in table} <= {"true", "false"}
    plain = rbl("diff", "aborts", "delays", "--format", "csv", "-o", "csv-out", cwd=runs)
    assert plain.stdout.splitlines()[0].startswith("configuration,faultRate,users,metric")


def test_labels_keep_their_units_and_are_never_cut_at_80_columns(runs):
    text = run_rbl("diff", "aborts", "delays", "-m", "totalRequests", "-o", "narrow", cwd=runs, env={"COLUMNS": "80"})
    assert text.returncode == 0, text.stderr
    assert "tenacity.retry wait_fixed=1ms" in text.stdout            # the spec's spelling, not 0.001
    assert "…" not in text.stdout and max(map(len, text.stdout.splitlines())) <= 80


def test_bad_arguments_are_usage_errors(runs, tmp_path):
    unknown = rbl("diff", "aborts", "delays", "--metric", "speed", cwd=runs)
    assert unknown.returncode == 2 and "unknown metric 'speed'" in unknown.stderr
    missing = rbl("diff", "aborts", "nowhere", cwd=runs)
    assert missing.returncode == 2 and "not an rbl run directory" in missing.stderr
    fmt = rbl("diff", "aborts", "delays", "--format", "xml", cwd=runs)
    assert fmt.returncode == 2 and "--format" in fmt.stderr
    assert "Traceback" not in unknown.stderr + missing.stderr + fmt.stderr


def test_difference_interval_on_known_data():
    rng = np.random.default_rng(1)
    a = [list(rng.normal(100, 5, 10)) for _ in range(5)]
    b = [list(rng.normal(120, 5, 10)) for _ in range(5)]
    shifted = difference(a, b, 1000, 0)
    assert shifted.significant and 15 < shifted.difference < 25 and shifted.low > 0
    same = difference(a, a, 1000, 0)
    assert not same.significant and same.difference == 0 and same.low < 0 < same.high
    few = difference([[1.0, 2.0]], b, 1000, 0)
    assert few.low is None and not few.significant


def test_runs_of_three_rounds_get_the_reports_t_interval_unless_asked_otherwise(runs):
    auto = diff_json(runs, "aborts", "delays", "--metric", "totalRequests")
    assert {c["interval"] for c in auto["cells"]} == {"rounds-t"}          # 3 rounds: a bootstrap is too narrow
    forced = diff_json(runs, "aborts", "delays", "--metric", "totalRequests", "--intervals", "bootstrap")
    assert {c["interval"] for c in forced["cells"]} == {"bootstrap"}
    # the same difference of medians; only its interval's method differs
    t50, boot50 = ({c["faultRate"]: c for c in result["cells"]}[50] for result in (auto, forced))
    assert t50["difference"] == boot50["difference"] and t50["ci95Low"] <= t50["difference"] <= t50["ci95High"]
    text = rbl("diff", "aborts", "delays", "-m", "totalRequests", cwd=runs)
    assert "* 2-3 rounds" in text.stdout
    wrong = rbl("diff", "aborts", "delays", "--intervals", "nope", cwd=runs)
    assert wrong.returncode == 2 and "--intervals: unknown method 'nope'" in wrong.stderr
    assert "Traceback" not in wrong.stderr
