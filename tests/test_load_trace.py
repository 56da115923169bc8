"""`load.profile = trace`: an open-loop load whose rate follows a CSV trace (`seconds,factor`), read
and checked at compile time (errors located in the CSV), carried in the plan, replayed by the
schedule evenly along the trace's line, and run for real."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from rbl.compiler.expand import iter_scenarios
from rbl.compiler.pipeline import compile_file
from rbl.plan_records import Load, load_size_problem
from rbl.runner.load_schedule import expected_requests, send_offsets

from .conftest import run_rbl

DAY = "seconds,factor\n# quiet, a peak, quiet\n0,0.5\n4,1.5\n8,0.5\n"


def _spec(tmp_path: Path, trace: str | None = DAY, extra: str = "", name: str = "day.csv") -> Path:
    if trace is not None:
        (tmp_path / name).write_text(trace)
    spec = tmp_path / "spec.rbl"
    spec.write_text("space traced {\n  load = open\n  load.rps = 40\n  load.profile = trace\n"
                    f'  load.trace = "{name}"\n  target = "/bytes/64"\n{extra}  client tenacity.baseline {{}}\n}}\n')
    return spec


def _load(points, duration_s, arrivals="constant", rps=10) -> Load:
    return Load.from_record({"rate": {"rps": rps}, "arrivals": arrivals, "duration_s": duration_s, "warmup_s": 0,
                             "profile": {"kind": "trace", "source": "t.csv", "points": points},
                             "timeout_s": 10, "window_s": 5, "slo_ms": 100})


def test_the_plan_carries_the_trace_and_a_round_replays_it_to_its_end(tmp_path):
    result = compile_file(_spec(tmp_path))
    assert result.ok, [d.message for d in result.diagnostics]
    (scenario,) = iter_scenarios(result.space)
    assert scenario["load"]["profile"] == {"kind": "trace", "source": "day.csv",
                                           "points": [[0, 0.5], [4, 1.5], [8, 0.5]]}
    assert scenario["load"]["duration_s"] == 8                     # no load.duration: to the last point


def test_load_duration_cuts_or_holds_the_trace(tmp_path):
    result = compile_file(_spec(tmp_path, extra="  load.duration = 12s\n"))
    (scenario,) = iter_scenarios(result.space)
    assert scenario["load"]["duration_s"] == 12


def test_a_trace_relative_to_the_spec_is_found_from_any_directory(tmp_path):
    (tmp_path / "traces").mkdir()
    spec = _spec(tmp_path, name="traces/day.csv", trace=None)
    (tmp_path / "traces" / "day.csv").write_text(DAY)
    done = run_rbl("check", str(spec), cwd=Path("/"))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("trace, location, message", [
    ("time,rate\n0,1\n", "day.csv:1:1", "header must be `seconds,factor`"),
    ("seconds,factor\n0,1\n5,x2\n", "day.csv:3:3", "factor must be a plain decimal number"),
    ("seconds,factor\n0,1\n 5 , -1\n", "day.csv:3:6", "factor must be a plain decimal number"),
    ("seconds,factor\n0,1\n1e3,1\n", "day.csv:3:1", "seconds must be a plain decimal number"),
    ("seconds,factor\n0,1\n5,1\n5,2\n", "day.csv:4:1", "times must increase"),
    ("seconds,factor\n0,1\n5,1,3\n", "day.csv:3:1", "holds 2 values"),
    ("seconds,factor\n0,0\n9,0\n", "day.csv:1:1", "every factor of the trace is 0"),
    ("seconds,factor\n0,1\n9,101\n", "day.csv:3:3", "more than 100"),
    ("seconds,factor\n", "day.csv:2:1", "no points"),
    ("seconds,factor\n" + "".join(f"{i},1\n" for i in range(10_001)), "day.csv:10002:1", "more than 10,000 points"),
    (None, "spec.rbl:5:16", "no trace file"),
])
def test_a_wrong_trace_is_an_error_located_in_the_csv(tmp_path, trace, location, message):
    spec = _spec(tmp_path, trace)
    done = run_rbl("check", "spec.rbl", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "error[E0230]" in done.stderr and message in done.stderr, done.stderr
    assert f"--> {location}" in done.stderr, done.stderr
    if trace is not None:                                          # and where the spec names it
        assert "spec.rbl:5:16" in done.stderr or "spec.rbl:5" in done.stderr, done.stderr
    assert spec.exists()


def test_a_trace_setting_without_the_trace_profile_and_the_other_way_round(tmp_path):
    spec = tmp_path / "spec.rbl"
    spec.write_text('space s {\n  load = open\n  load.rps = 40\n  load.trace = "day.csv"\n  client tenacity.baseline {}\n}\n')
    done = run_rbl("check", "spec.rbl", cwd=tmp_path)
    assert done.returncode == 1 and "only applies to the profiles that use it" in done.stderr, done.stderr
    spec.write_text("space s {\n  load = open\n  load.rps = 40\n  load.profile = trace\n  client tenacity.baseline {}\n}\n")
    done = run_rbl("check", "spec.rbl", cwd=tmp_path)
    assert done.returncode == 1 and "needs `load.trace`" in done.stderr, done.stderr


def test_a_trace_s_peak_counts_toward_the_round_s_request_bound(tmp_path):
    peak = "seconds,factor\n0,1\n10,100\n"
    spec = _spec(tmp_path, peak, extra="  load.duration = 24h\n")
    done = run_rbl("check", "spec.rbl", cwd=tmp_path)
    assert done.returncode == 1 and "more than 2,000,000" in done.stderr, done.stderr
    assert spec.exists()


def test_evenly_spaced_sends_follow_the_line_between_points():
    offsets = [t / 1e9 for t in send_offsets(_load([[0, 0], [10, 2]], 10), None, "seed")]
    assert len(offsets) == 100 == round(expected_requests(_load([[0, 0], [10, 2]], 10), None))
    # rate 2t: the k-th send where t^2 = k + 1/2
    assert offsets[:3] == pytest.approx([0.5 ** 0.5, 1.5 ** 0.5, 2.5 ** 0.5])


def test_a_stretch_at_factor_0_sends_nothing():
    offsets = [t / 1e9 for t in send_offsets(_load([[0, 1], [4, 1], [5, 0], [7, 0], [8, 1], [10, 1]], 10), None, "s")]
    assert not [t for t in offsets if 5 <= t <= 7]
    assert len(offsets) == round(10 * (4 + 0.5 + 0.5 + 2))


def test_poisson_sends_follow_the_trace_on_average():
    load = _load([[0, 1], [10, 3]], 10, arrivals="poisson", rps=50)
    counts = [len(list(send_offsets(load, None, f"seed-{i}"))) for i in range(20)]
    assert abs(np.mean(counts) - expected_requests(load, None)) < 0.05 * 1000


@pytest.mark.parametrize("points, problem", [
    ([[0, 1], [5, 1], [5, 2]], "times must increase"),
    ([[0, 0], [5, 0]], "every factor of the trace is 0"),
])
def test_a_plan_with_a_broken_trace_is_refused(points, problem):
    record = {**_load(points, 10).record, "kind": "open"}
    assert problem in load_size_problem(record)


def test_a_traced_round_runs_and_its_sends_follow_the_trace(tmp_path):
    _spec(tmp_path)
    done = run_rbl("run", "spec.rbl", "-o", "run", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    (rounds,) = list((tmp_path / "run" / "requests").iterdir())
    scheduled = np.array(pq.read_table(rounds / "round-1.parquet").column("scheduled_s"))
    per_second = np.histogram(scheduled, bins=8, range=(0, 8))[0]
    # 40 req/s times 0.5 -> 1.5 -> 0.5: 25, 35, 45, 55 per second and back
    assert per_second.tolist() == [25, 35, 45, 55, 55, 45, 35, 25]
    assert row["load"]["profile"]["kind"] == "trace"
