"""How an open-loop request's answer becomes its response class (rbl/runner/open_loop.py), from the
load generator's CSV: library calls by their reply, mesh requests by status and Envoy's flags."""

from __future__ import annotations

from rbl.runner.open_loop import classify

HEADER = "seq,scheduled_ns,sent_ns,latency_ns,status,flags,ok,requests,last_status,error\n"


def table(tmp_path, lines: list[str], mesh: bool, warmup_s: float = 0.0):
    path = tmp_path / "requests.csv"
    path.write_text(HEADER + "".join(line + "\n" for line in lines))
    return classify(path, warmup_s, mesh=mesh)


def test_library_calls_are_classed_by_the_client_services_reply(tmp_path):
    got = table(tmp_path, [
        "0,0,1000,5000000,200,,1,1,200,",              # the call succeeded
        "1,10000000,10002000,7000000,200,,0,3,503,",     # failed after its 3 attempts
        "2,20000000,20001000,1000000,200,,0,0,,",        # refused without a request: an open breaker
        "3,30000000,30001000,0,0,,,,,Get: context deadline exceeded (Client.Timeout exceeded)",
        "4,40000000,40001000,0,0,,,,,dial tcp: connection refused",
        "5,50000000,50001000,1000000,503,,,,,",          # the client service itself refused (too many jobs)
    ], mesh=False)
    assert got["cls"].to_pylist() == ["success", "failed", "rejected", "timed_out", "failed", "failed"]
    assert got["requests"].to_pylist() == [1, 3, 0, None, None, None]
    # response time counts from the scheduled send: lag (1 us) + latency (5 ms)
    assert got["response_ms"].to_pylist()[0] == 5.001
    assert got["response_ms"].to_pylist()[3] is None
    assert got["lag_ms"].to_pylist()[:2] == [0.001, 0.002]


def test_mesh_requests_are_classed_by_status_and_the_sidecars_flags(tmp_path):
    got = table(tmp_path, [
        "0,0,0,1000000,200,-,,,,",
        "1,1000000000,1000000000,1000000,503,UO,,,,",          # the pool refused it
        "2,2000000000,2000000000,1000000,504,UT,,,,",          # the route's timeout
        '3,3000000000,3000000000,1000000,503,"URX,UF",,,,',    # retries exhausted on connection failures
        "4,4000000000,4000000000,1000000,503,-,,,,",           # the target's (or the fault's) 503
    ], mesh=True, warmup_s=1.5)
    assert got["cls"].to_pylist() == ["success", "circuit_broken", "timed_out", "failed", "failed"]
    assert got["flags"].to_pylist()[3] == "URX,UF"
    assert got["warmup"].to_pylist() == [True, True, False, False, False]
    assert got["requests"].null_count == 5                      # the sidecar's retries are not per request
