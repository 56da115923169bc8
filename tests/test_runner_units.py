"""Pure-logic pieces of the runner: Table 2 metrics, fault runtime values, run-directory repair,
and the readiness errors of services."""

from __future__ import annotations

import json
import sys

import pytest

from rbl.errors import UsageError
from rbl.runner.fault_control import runtime_values
from rbl.store.metrics import percentile, vu_metrics
from rbl.backends.local.processes import Service, ServiceNotReady
from rbl.store.results import RunDirectory
from rbl.clients.protocol import CallLog

from .conftest import vu_row

OBSERVATION = {
    "total_us": 100_000,
    "calls": [
        {"ok": True, "requests": [[0, 4_000, 200]]},
        {"ok": True, "requests": [[5_000, 2_000, 503], [9_000, 6_000, 200]]},
        {"ok": False, "requests": [[20_000, 1_000, 503], [30_000, 3_000, 0]]},
        {"ok": False, "requests": [], "repeat": 5},
    ],
}


def test_table_2_metrics_follow_the_original_definitions():
    m = vu_metrics(OBSERVATION)
    assert (m["successfulCalls"], m["unsuccessfulCalls"], m["totalCalls"]) == (2, 6, 8)
    assert (m["successfulRequests"], m["unsuccessfulRequests"], m["totalRequests"]) == (2, 3, 5)
    assert m["successTime"] == 10.0 and m["successTimePerRequest"] == 5.0
    assert m["errorTime"] == 6.0 and m["errorTimePerRequest"] == 2.0
    assert m["totalContentionTime"] == 16.0
    assert m["totalExecutionTime"] == 100.0
    assert m["contentionRate"] == pytest.approx(0.16)
    assert m["throughput"] == pytest.approx(50.0)          # 5 requests in 0.1 s
    assert m["latencyP50"] == 3.0                           # durations 1 2 3 4 6 ms
    assert m["latencyP99"] == pytest.approx(5.92)


def test_averages_over_nothing_are_empty_not_zero():
    m = vu_metrics({"total_us": 10, "calls": [{"ok": False, "requests": [], "repeat": 3}]})
    assert m["totalCalls"] == 3 and m["totalRequests"] == 0
    assert m["successTimePerRequest"] is None and m["errorTimePerRequest"] is None
    assert m["latencyP50"] is None


def test_percentile_interpolates_linearly():
    assert percentile([10.0], 0.95) == 10.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([], 0.5) is None


def test_call_log_run_length_encodes_only_identical_request_less_calls():
    log = CallLog()
    for ok, requests in [(False, []), (False, []), (True, [[0, 1, 200]]), (False, []), (True, [])]:
        log.add(ok, requests)
    assert log.calls == [{"ok": False, "requests": [], "repeat": 2}, {"ok": True, "requests": [[0, 1, 200]]},
                         {"ok": False, "requests": []}, {"ok": True, "requests": []}]
    assert log.requests == 1 and log.successful_calls == 2


def test_runtime_values_hold_the_other_fault_kind_at_zero():
    assert runtime_values({"kind": "abort", "rate": 25, "status": 503}) == {
        "fault.http.abort.abort_percent": "25", "fault.http.abort.http_status": "503",
        "fault.http.delay.fixed_delay_percent": "0", "fault.http.delay.fixed_duration_ms": "0"}
    delay = runtime_values({"kind": "delay", "rate": 12.5, "duration_ms": 40})
    assert delay["fault.http.delay.fixed_delay_percent"] == "12.5"
    assert delay["fault.http.delay.fixed_duration_ms"] == "40"
    assert delay["fault.http.abort.abort_percent"] == "0"


HEADER = {"rbl_plan": 1, "name": "t", "size": 1, "rounds": 2, "runs": 2, "target": {"path": "/status/200"},
          "source": {"path": "t.rbl", "sha256": "0" * 64},
          "clients": [{"label": "c", "library": "tenacity", "service": "python"}]}
SCENARIO = {"id": "a", "index": 0, "fault": {"kind": "abort", "rate": 0, "status": 503}, "users": 2, "client": "c",
            "library": "tenacity", "pattern": "baseline", "config": {}, "successes": 1, "max_requests": 1}


def _row(scenario: str, round_number: int, vu: int, users: int = 2) -> dict:
    observation = {"vu": vu, "total_us": 1000, "calls": [{"ok": True, "requests": [[0, 500, 200]]}]}
    row = vu_row({**SCENARIO, "id": scenario, "users": users}, round_number, HEADER["clients"][0],
                        {}, observation, "t0", "t1")
    return row


def test_resume_drops_incomplete_rounds_and_torn_lines(tmp_path):
    run = RunDirectory.create(tmp_path / "run", HEADER, [json.dumps(SCENARIO)])
    run.append_round([_row("a", 1, 1), _row("a", 1, 2)])
    run.close()
    with (tmp_path / "run" / "results.jsonl").open("a") as out:
        out.write(json.dumps(_row("a", 2, 1)) + "\n")          # a round the crash cut short
        out.write('{"scenarioId": "a", "rou')                  # a torn last line
    resumed = RunDirectory.resume(tmp_path / "run")
    resumed.close()
    assert resumed.completed == {("a", 1)}
    assert [(r["round"], r["userId"]) for r in resumed.rows()] == [(1, 1), (1, 2)]
    assert any("line 4: torn" in w for w in resumed.warnings)


def test_a_non_empty_directory_is_not_taken_over(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "notes.txt").write_text("keep")
    with pytest.raises(UsageError, match="not empty"):
        RunDirectory.create(tmp_path / "x", {}, [])
    with pytest.raises(UsageError, match="not an rbl run directory"):
        RunDirectory.resume(tmp_path / "x")


def test_a_service_that_exits_early_names_itself_and_its_log(tmp_path):
    service = Service("target (test)", [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"],
                      tmp_path / "logs" / "t.log")
    try:
        with pytest.raises(ServiceNotReady) as error:
            service.wait_http("http://127.0.0.1:9/", timeout=10)
    finally:
        service.stop()
    assert "target (test)" in error.value.message and "exited with code 3" in error.value.message
    assert str(tmp_path / "logs" / "t.log") in error.value.message
    assert "boom" in (tmp_path / "logs" / "t.log").read_text()


def test_a_silent_service_times_out_with_a_clear_message(tmp_path):
    service = Service("proxy (test)", [sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / "p.log")
    try:
        with pytest.raises(ServiceNotReady, match=r"proxy \(test\) did not announce `listening` within 0.3 s"):
            service.read_announcement("listening", timeout=0.3)
    finally:
        service.stop(grace=0.5)
    assert not service.alive


def test_clients_are_started_with_room_for_the_largest_round():
    from rbl.targets.compose.deployment import deployment_for
    from rbl.targets.compose.images import parse_image_overrides
    from rbl.clients.protocol import MAX_JOBS, max_jobs_arguments
    assert max_jobs_arguments(MAX_JOBS - 100) == ()
    assert max_jobs_arguments(1000) == ("--max-jobs", "1016")
    header = {"name": "big", "users": [10, 1000], "clients": [{"library": "tenacity", "service": "python"}]}
    client = deployment_for(header, parse_image_overrides([], ["target", "client-python"])).services[1]
    assert client.command[-2:] == ("--max-jobs", "1016")


def test_the_largest_round_of_a_long_users_range_comes_from_its_description(cli, tmp_path):
    from rbl.compiler.plan import axis_largest
    spec = tmp_path / "long.rbl"
    spec.write_text("space long {\n  users in 1..100000\n  client tenacity.retry {}\n}\n")
    code, out, err = cli("compile", spec, "-o", tmp_path / "out")
    assert code == 0, err
    header = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert isinstance(header["users"], dict) and axis_largest(header["users"]) == 100000
    compose = (tmp_path / "out" / "docker-compose.yaml").read_text()
    assert '"--max-jobs"' in compose and '"100016"' in compose
