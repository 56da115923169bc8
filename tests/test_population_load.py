"""`load = users`: a closed population of users with exponential think times (HTTPMon's, which the
service-mesh papers ran), as a load kind: checked settings, the plan's record, and a real run in
which no user ever has two requests out, so a slow target slows the load down."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from rbl.compiler.expand import iter_scenarios
from rbl.compiler.pipeline import compile_source
from rbl.plan_records import Load, Population, load_size_problem

from .conftest import run_rbl


def _space(settings: str, client: str = "  client istio.circuit_breaker { http2MaxRequests = 4 }\n") -> str:
    return f"space population {{\n{settings}{client}}}\n"


def _errors(text: str) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in compile_source(text, "s.rbl").diagnostics if d.severity == "error"]


def test_each_user_count_and_think_time_is_a_point_of_the_load_dimension():
    result = compile_source(_space("  load = users\n  load.users in [20, 50]\n  load.think in [500ms, 1s]\n"
                                   "  load.duration = 30s\n  assert size == 4\n"), "s.rbl")
    assert result.ok, [d.message for d in result.diagnostics]
    loads = [scenario["load"] for scenario in iter_scenarios(result.space)]
    assert [(load["users"], load["think_ms"]) for load in loads] == [(20, 500), (20, 1000), (50, 500), (50, 1000)]
    assert loads[0] == {"kind": "users", "users": 20, "think_ms": 500, "duration_s": 30, "warmup_s": 0,
                        "timeout_s": 10, "window_s": 5, "slo_ms": 100}
    assert Load.from_record(loads[0]).population == Population(20, 500.0)


def test_the_think_time_defaults_to_a_second():
    result = compile_source(_space("  load = users\n  load.users = 5\n"), "s.rbl")
    (scenario,) = iter_scenarios(result.space)
    assert scenario["load"]["think_ms"] == 1000


@pytest.mark.parametrize("settings, code, message", [
    ("  load = users\n", "E0213", "needs `load.users`"),
    ("  load = users\n  load.users = 5\n  load.rate = 80%\n", "E0219", "`load.rate` does not apply to `load = users`"),
    ("  load = users\n  load.users = 5\n  load.peak = 140%\n", "E0219", "does not apply to `load = users`"),
    ("  load = open\n  load.rps = 10\n  load.users = 5\n", "E0219", "`load.users` does not apply to `load = open`"),
    ("  users = 2\n  load.users = 5\n", "E0219", "only applies to open-loop load or a population of users"),
    ("  load = users\n  load.users = 5\n  users = 3\n", "E0219", "only applies to closed-loop load"),
    ("  load = users\n  load.users = 4096\n", "E0203", "load.users"),
    ("  load = users\n  load.users = 5\n  load.profile = ramp\n", "E0219", "follows a trace, not ramp"),
    ("  load = users\n  load.users = 5\n  load.profile = trace\n", "E0213", "needs `load.trace`"),
    ('  load = users\n  load.users = 5\n  load.trace = "x.csv"\n', "E0219", "only applies to the trace profile"),
    ("  load = users\n  load.users = 2000\n  load.think = 1ms\n  load.duration = 10m\n", "E0218",
     "more than 2,000,000"),
])
def test_wrong_population_settings_are_located_errors(settings, code, message):
    errors = _errors(_space(settings))
    assert errors and errors[0][0] == code and message in errors[0][1], errors


def test_a_plan_s_population_too_big_for_a_round_is_refused():
    record = {"kind": "users", "users": 2000, "think_ms": 1, "duration_s": 3600, "warmup_s": 0, "timeout_s": 10,
              "window_s": 5, "slo_ms": 100}
    assert "more than 2,000,000" in load_size_problem(record)
    assert load_size_problem({**record, "think_ms": 10_000}) is None


SLOW_TARGET = """
space population {
  load = users
  load.users = 4
  load.think = 50ms
  load.duration = 4s
  load.timeout = 5s
  target = "/bytes/64"
  fault.kind = delay
  fault.duration = 300ms
  fault.rate = 100%
  client istio.baseline {}
}
"""


def test_no_user_has_two_requests_out_so_a_slow_target_slows_the_load(tmp_path: Path):
    (tmp_path / "spec.rbl").write_text(SLOW_TARGET)
    done = run_rbl("run", "spec.rbl", "-o", "run", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    (requests,) = list((tmp_path / "run" / "requests").iterdir())
    table = pq.read_table(requests / "round-1.parquet").to_pydict()
    sent = np.array(table["scheduled_s"]) + np.array(table["lag_ms"]) / 1000
    ended = np.array(table["scheduled_s"]) + np.array(table["response_ms"]) / 1000
    events = sorted([(t, 1) for t in sent] + [(t, -1) for t in ended], key=lambda e: (e[0], e[1]))
    out, most = 0, 0
    for _, step in events:
        out += step
        most = max(most, out)
    # 4 users: at most 4 requests out at once, and each 300 ms answer holds its user back, so the
    # round sends about 4 x 4 s / (0.3 + 0.05) s = 46, far below an open loop's pace at that count
    assert most <= 4 and most >= 3, most
    assert 25 <= len(sent) <= 55, len(sent)
    assert all(r >= 290 for r in table["response_ms"])
    assert row["load"]["kind"] == "users" and not row["oracleViolations"]


DAY = "seconds,factor\n0,0.25\n3,1\n6,0.25\n"
TRACED = """
space population_day {
  load = users
  load.users = 8
  load.think = 100ms
  load.profile = trace
  load.trace = "day.csv"
  target = "/bytes/64"
  client istio.baseline {}
}
"""


def test_a_trace_says_how_many_users_are_active_when(tmp_path: Path):
    (tmp_path / "day.csv").write_text(DAY)
    (tmp_path / "spec.rbl").write_text(TRACED)
    result = compile_source(TRACED, str(tmp_path / "spec.rbl"))
    (scenario,) = iter_scenarios(result.space)
    assert scenario["load"]["profile"] == {"kind": "trace", "source": "day.csv", "points": [[0, 0.25], [3, 1], [6, 0.25]]}
    assert scenario["load"]["duration_s"] == 6 and Load.from_record(scenario["load"]).population.trace[1] == (3.0, 1.0)
    done = run_rbl("run", "spec.rbl", "-o", "run", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (requests,) = list((tmp_path / "run" / "requests").iterdir())
    scheduled = np.array(pq.read_table(requests / "round-1.parquet").column("scheduled_s"))
    edges = np.sum(scheduled < 1) + np.sum(scheduled >= 5)
    middle = np.sum((scheduled >= 2) & (scheduled < 4))
    # 2-3 users active in the first and last second, 6-8 in the middle two: about 3x the requests
    assert middle > 1.8 * edges, (middle, edges)
