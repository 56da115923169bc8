"""How an open-loop request's answer becomes its response class (rbl/runner/load_generator.py), from the
load generator's CSV: library calls by their reply, mesh requests by status and Envoy's flags."""

from __future__ import annotations

from rbl.runner.load_generator import classify

HEADER = "seq,scheduled_ns,sent_ns,latency_ns,status,flags,ok,requests,last_status,error,ending\n"


def table(tmp_path, lines: list[str], mesh: bool, warmup_s: float = 0.0):
    path = tmp_path / "requests.csv"
    path.write_text(HEADER + "".join(line + "\n" for line in lines))
    return classify(path, warmup_s, mesh=mesh)


def test_library_calls_are_classed_by_the_client_services_reply(tmp_path):
    got = table(tmp_path, [
        "0,0,1000,5000000,200,,1,1,200,,",              # the call succeeded
        "1,10000000,10002000,7000000,200,,0,3,503,,",     # failed after its 3 attempts
        "2,20000000,20001000,1000000,200,,0,0,,,",        # refused without a request: an open breaker
        "3,30000000,30001000,0,0,,,,,Get: context deadline exceeded (Client.Timeout exceeded),",
        "4,40000000,40001000,0,0,,,,,dial tcp: connection refused,",
        "5,50000000,50001000,1000000,503,,,,,,",          # the client service itself refused (too many jobs)
    ], mesh=False)
    assert got["cls"].to_pylist() == ["success", "failed", "rejected", "timed_out", "failed", "failed"]
    assert got["requests"].to_pylist() == [1, 3, 0, None, None, None]
    # response time counts from the scheduled send: lag (1 us) + latency (5 ms)
    assert got["response_ms"].to_pylist()[0] == 5.001
    assert got["response_ms"].to_pylist()[3] is None
    assert got["lag_ms"].to_pylist()[:2] == [0.001, 0.002]


def test_library_patterns_name_how_they_ended_a_call(tmp_path):
    got = table(tmp_path, [
        "0,0,1000,50000000,200,,0,1,0,,timed_out",              # a library timeout cut the call
        "1,10000000,10001000,1000000,200,,0,0,,,rejected:bulkhead",
        "2,20000000,20001000,3000000,200,,0,2,0,,rejected:circuit_breaker",   # a retry ended refused
        "3,30000000,30001000,1000000,200,,0,1,503,,fallback",   # the fallback answered: not a success
    ], mesh=False)
    assert got["cls"].to_pylist() == ["timed_out", "rejected", "rejected", "failed"]


def test_mesh_requests_are_classed_by_status_and_the_sidecars_flags(tmp_path):
    got = table(tmp_path, [
        "0,0,0,1000000,200,-,,,,,",
        "1,1000000000,1000000000,1000000,503,UO,,,,,",          # the pool refused it
        "2,2000000000,2000000000,1000000,504,UT,,,,,",          # the route's timeout
        '3,3000000000,3000000000,1000000,503,"URX,UF",,,,,',    # retries exhausted on connection failures
        "4,4000000000,4000000000,1000000,503,-,,,,,",           # the target's (or the fault's) 503
        "5,5000000000,5000000000,1000000,503,reached_concurrency_limit,,,,,",   # Envoy's adaptive limit
        "6,6000000000,6000000000,1000000,503,denied_by_admission_control,,,,,",  # Envoy's throttling
    ], mesh=True, warmup_s=1.5)
    assert got["cls"].to_pylist() == ["success", "circuit_broken", "timed_out", "failed", "failed", "circuit_broken",
                                      "circuit_broken"]
    assert got["flags"].to_pylist()[3] == "URX,UF"
    assert got["warmup"].to_pylist() == [True, True, False, False, False, False, False]
    assert got["requests"].null_count == 7                      # the sidecar's retries are not per request


SCENARIO = {"id": "0123456789ab", "index": 3, "client": "tenacity.retry", "library": "tenacity", "pattern": "retry",
            "config": {"stop_after_attempt": 2}, "fault": {"kind": "abort", "rate": 0, "status": 503},
            "load": {"kind": "open", "rate": {"rps": 2}, "arrivals": "constant", "duration_s": 2, "warmup_s": 0.5,
                     "profile": {"kind": "constant"}, "timeout_s": 10, "window_s": 1, "slo_ms": 100}}


def test_a_rounds_row_holds_its_metrics_and_checks_the_proxy_saw_the_calls_requests(tmp_path):
    from rbl.runner.open_loop import open_round_row
    from rbl.store.run_checks import row_problem
    requests = table(tmp_path, ["0,0,0,5000000,200,,1,1,200,,", "1,500000000,500000000,5000000,200,,1,2,200,,",
                                "2,1000000000,1000000000,5000000,200,,0,2,503,,",
                                "3,1500000000,1500000000,1000000,200,,0,0,,,"], mesh=False, warmup_s=0.5)
    facts = {"startTime": "t0", "endTime": "t1", "capacityRps": None, "warmup": False}
    row = open_round_row(SCENARIO, 1, requests, {"downstream_rq_total": 5}, None, facts, rounds_in_run=1)
    assert row_problem(row, {SCENARIO["id"]: 1}, 1) is None          # a valid row of the run
    # a row written before the windowed RT50/RT95 existed is still a row; a wrong value in them is not
    older = {key: value for key, value in row.items() if key not in ("windowP50Ms", "windowP95Ms")}
    assert row_problem(older, {SCENARIO["id"]: 1}, 1) is None
    assert "windowP95Ms" in row_problem({**row, "windowP95Ms": "slow"}, {SCENARIO["id"]: 1}, 1)
    assert "offeredRate" in row_problem({k: v for k, v in row.items() if k != "offeredRate"}, {SCENARIO["id"]: 1}, 1)
    assert (row["offeredRequests"], row["successShare"], row["failedShare"], row["rejectedShare"]) == (3, 1 / 3,
                                                                                                     1 / 3, 1 / 3)
    assert row["proxyRequests"] == 5 and row["oracleViolations"] == []   # 1 + 2 + 2 + 0 requests, warm-up included
    wrong = open_round_row(SCENARIO, 1, requests, {"downstream_rq_total": 7}, None, facts, rounds_in_run=1)
    assert [v["oracle"] for v in wrong["oracleViolations"]] == ["requests.count"]


def reference_class(status: int, flags: str, error: str, ok: str, requests: str, ending: str, mesh: bool) -> str:
    """The classes row by row, as the module's docstring defines them (classify does it by columns)."""
    if status == 0:
        return "timed_out" if any(word in error for word in ("timeout", "deadline exceeded", "Client.Timeout")) \
            else "failed"
    if mesh:
        if 200 <= status < 300:
            return "success"
        refused = {"UO", "reached_concurrency_limit", "denied_by_admission_control"} & set(flags.split(","))
        return "circuit_broken" if refused else "timed_out" if "UT" in flags.split(",") else "failed"
    if status != 200 or ok == "":
        return "failed"
    if ok == "1":
        return "success"
    if ending == "timed_out":
        return "timed_out"
    if ending.startswith("rejected:"):
        return "rejected"
    if ending == "fallback":
        return "failed"
    return "rejected" if requests == "0" else "failed"


def test_every_combination_of_fields_gets_the_class_the_rules_give(tmp_path):
    import itertools
    values = {"status": [0, 200, 204, 503], "flags": ["", "-", "UO", "URX,UO", "UT", "UOX", "UF,UT",
                                                      "reached_concurrency_limit", "reached_concurrency",
                                                      "denied_by_admission_control"],
              "error": ["", "dial tcp: connection refused", "context deadline exceeded"], "ok": ["", "0", "1"],
              "requests": ["", "0", "2"], "ending": ["", "timed_out", "rejected:bulkhead", "fallback"]}
    combos = list(itertools.product(*values.values()))
    lines = [f'{i},{i},{i},1,{status},"{flags}",{ok},{requests},,{error},{ending}'
             for i, (status, flags, error, ok, requests, ending) in enumerate(combos)]
    for mesh in (False, True):
        got = table(tmp_path, lines, mesh=mesh)["cls"].to_pylist()
        expected = [reference_class(status, flags, error, ok, requests, ending, mesh)
                    for status, flags, error, ok, requests, ending in combos]
        assert got == expected
        assert len(set(got)) >= 4                       # the combinations reach most classes


def test_a_round_with_no_requests_is_an_empty_table(tmp_path):
    got = table(tmp_path, [], mesh=False)
    assert got.num_rows == 0 and got.column_names[:3] == ["seq", "scheduled_s", "lag_ms"]
