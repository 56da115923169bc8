"""What a round did along a topology (rbl/runner/hops.py): counters' increase, percentiles from
buckets, the retry attempts each service's callers make, the worst case and the per-edge oracle."""

from __future__ import annotations

import pytest

from rbl.runner.hops import hop_record, increase, percentile, retry_attempts
from rbl.topology import CallStep, ServiceDef, Topology

CHAIN = Topology("front", (ServiceDef("front", calls=(CallStep("middle", 2),)),
                           ServiceDef("middle", calls=(CallStep("back"),)), ServiceDef("back", replicas=2)))
MESH = {"label": "istio.retry", "service": "mesh"}
LIBRARY = {"label": "tenacity.retry", "service": "python"}


def scenario(pattern: str, config: dict, client: str = "istio.retry") -> dict:
    return {"id": "abc", "index": 0, "client": client, "pattern": pattern, "config": config}


def test_increase_goes_through_nested_counters_and_keeps_the_rest():
    before = {"edges": {"a>b": {"calls": 3, "buckets": {"5": 1}}}, "histogram": (0.01, 1.1)}
    after = {"edges": {"a>b": {"calls": 10, "buckets": {"5": 4, "7": 2}}}, "histogram": (0.01, 1.1)}
    assert increase(before, after) == {"edges": {"a>b": {"calls": 7, "buckets": {"5": 3, "7": 2}}},
                                       "histogram": (0.01, 1.1)}


def test_a_percentile_is_the_upper_bound_of_its_bucket():
    buckets = {"0": 50, "10": 45, "20": 5}          # bounds 0.01, 0.01 x 1.1^10, 0.01 x 1.1^20 ms
    assert percentile(buckets, 0.5, (0.01, 1.1)) == 0.01
    assert percentile(buckets, 0.95, (0.01, 1.1)) == round(0.01 * 1.1 ** 10, 3)
    assert percentile(buckets, 0.99, (0.01, 1.1)) == round(0.01 * 1.1 ** 20, 3)
    assert percentile({}, 0.5, (0.01, 1.1)) is None


def test_retry_attempts_follow_the_placement():
    placed = retry_attempts(CHAIN, scenario("retry", {"attempts": 5, "host": "back"}), MESH)
    assert placed == {"front": 2, "middle": 2, "back": 5}               # Istio's default elsewhere
    assert retry_attempts(CHAIN, scenario("retry", {"attempts": 1, "host": "all"}), MESH) == \
        {"front": 1, "middle": 1, "back": 1}
    assert retry_attempts(CHAIN, scenario("baseline", {}, "istio.baseline"), MESH) == {"front": 0, "middle": 0, "back": 0}
    # a library's scenario places nothing: Istio's defaults govern every call
    assert retry_attempts(CHAIN, scenario("retry", {"stop_after_attempt": 3}, "tenacity.retry"), LIBRARY) == \
        {"front": 2, "middle": 2, "back": 2}


def counters(front_to_middle_upstream: int) -> dict:
    service = lambda n: {"requests": n, "answeredOk": n, "answeredFailed": 0, "workSeconds": 0.1 * n,  # noqa: E731
                         "failedWorkSeconds": 0.0, "cpuSeconds": 0.2 * n}
    edge = lambda calls, upstream: {"calls": calls, "callsFailed": 0, "successBuckets": {"3": calls},  # noqa: E731
                                    "sidecarUpstreamRequests": upstream, "sidecarRetries": upstream - calls}
    return {"services": {"front": service(10), "middle": service(20), "back": service(20)},
            "edges": {"front>middle": edge(20, front_to_middle_upstream), "middle>back": edge(20, 20)},
            "histogram": (0.01, 1.1)}


def test_a_round_record_has_amplification_worst_case_and_latency():
    record = hop_record(CHAIN, scenario("retry", {"attempts": 1, "host": "middle"}), MESH, 1, counters(30))
    assert record["amplification"] == 5.0 and record["entryRequests"] == 10
    by_service = {row["service"]: row for row in record["services"]}
    assert by_service["middle"]["perEntryRequestNominal"] == 2
    assert by_service["middle"]["perEntryRequestWorstCase"] == 4        # 2 calls x (1 + 1 attempt)
    assert by_service["back"]["perEntryRequestWorstCase"] == 12         # 4 tries x 1 call x (1 + 2 default)
    assert by_service["back"]["tier"] == 3
    edge = record["edges"][0]
    assert (edge["caller"], edge["callee"], edge["attempts"]) == ("front", "middle", 1)
    assert edge["successP50Ms"] == round(0.01 * 1.1 ** 3, 3) and "successBuckets" not in edge
    assert record["oracleViolations"] == []


def test_work_beyond_what_the_carried_requests_needed_is_wasted():
    carried_all = hop_record(CHAIN, scenario("retry", {}), MESH, 1, counters(20))
    assert carried_all["wastedCpuSeconds"] == 0.0
    half = counters(20)
    half["services"]["front"]["answeredOk"] = 5              # half the entry requests failed in the end
    record = hop_record(CHAIN, scenario("retry", {}), MESH, 1, half)
    by_service = {row["service"]: row for row in record["services"]}
    # 5 carried x 2 requests each at the back: 10 of its 20 requests were needed
    assert by_service["back"]["wastedShare"] == 0.5 and by_service["back"]["wastedWorkSeconds"] == 1.0
    assert by_service["front"]["wastedCpuSeconds"] == 1.0 and record["entryCarried"] == 5
    assert record["wastedCpuSeconds"] == 1.0 + 2.0 + 2.0


@pytest.mark.parametrize("upstream, broken", [(40, False), (41, True)])
def test_an_edge_that_sent_more_than_its_attempts_allow_breaks_the_oracle(upstream, broken):
    record = hop_record(CHAIN, scenario("retry", {"attempts": 1, "host": "middle"}), MESH, 1, counters(upstream))
    assert bool(record["oracleViolations"]) is broken
    if broken:
        assert record["oracleViolations"][0]["oracle"] == "hop.amplification"
        assert "front -> middle: its sidecar sent 41 requests for 20 calls" in record["oracleViolations"][0]["message"]


def test_the_sampler_keeps_what_each_interval_added():
    from rbl.runner.hops import HopSampler
    reads = iter(range(1, 1000))

    def read():
        n = next(reads)
        return {"services": {"front": {"requests": 10 * n, "answeredOk": 9 * n, "answeredFailed": n}},
                "edges": {"front>back": {"callsFailed": n, "sidecarPoolOverflows": 2 * n}}}
    sampler = HopSampler(read, interval_s=0.05)
    sampler.start({"services": {"front": {"requests": 0, "answeredOk": 0, "answeredFailed": 0}},
                   "edges": {"front>back": {"callsFailed": 0, "sidecarPoolOverflows": 0}}})
    import time
    time.sleep(0.4)
    series = sampler.stop()
    assert len(series) >= 3
    assert series[0]["services"]["front"] == {"requests": 10, "answeredOk": 9, "answeredFailed": 1}
    assert all(point["services"]["front"]["requests"] == 10 for point in series)
    assert all(point["edges"]["front>back"] == {"callsFailed": 1, "sidecarPoolOverflows": 2, "sidecarRetries": 0}
               for point in series)
    assert [point["t"] for point in series] == sorted(point["t"] for point in series)
    count = len(series)
    time.sleep(0.2)
    assert len(sampler.samples) == count + 1          # stopped: no sample after stop()


def test_a_chains_violations_count_and_show_at_the_end_of_a_run(tmp_path):
    from types import SimpleNamespace

    from rbl.runner.violations import violation_counts
    from rbl.store.hops import append_hops
    broken = hop_record(CHAIN, scenario("retry", {"attempts": 1, "host": "middle"}), MESH, 2, counters(41))
    append_hops(tmp_path, broken)
    append_hops(tmp_path, hop_record(CHAIN, scenario("retry", {"attempts": 1, "host": "middle"}), MESH, 3, counters(40)))
    counts, examples = violation_counts(SimpleNamespace(rows=lambda: iter([]), path=tmp_path))
    assert counts == {"hop.amplification": 1}
    assert examples["hop.amplification"][0].startswith("scenario 1 (istio.retry) round 2 along the chain: front -> middle")


def overflowing(overflows: int) -> dict:
    grown = counters(20)
    grown["edges"]["middle>back"]["sidecarPoolOverflows"] = overflows
    return grown


@pytest.mark.parametrize("peak, overflows, broken", [(3, 5, True), (10, 5, False), (3, 0, False)])
def test_a_pool_that_refused_below_its_limit_breaks_the_oracle(peak, overflows, broken):
    pool = scenario("circuit_breaker", {"http2MaxRequests": 20, "host": "back"}, "istio.circuit_breaker")
    record = hop_record(CHAIN, pool, MESH, 1, overflowing(overflows), peaks={"middle>back": peak, "front>middle": 1})
    found = [v for v in record["oracleViolations"] if v["oracle"] == "hop.pool_below_limit"]
    assert bool(found) is broken
    if broken:
        assert "middle -> back: its sidecar refused 5 calls as over the limit of 20 in flight, but middle never " \
               "had more than 3 calls of back in flight" in found[0]["message"]
    assert {(e["caller"], e["callee"]): e["peakCallsInFlight"] for e in record["edges"]}["middle", "back"] == peak


def test_only_a_pool_limited_by_requests_in_flight_alone_is_judged():
    from rbl.runner.hops import pool_limits
    both = scenario("circuit_breaker", {"http2MaxRequests": 20, "maxConnections": 4, "host": "back"},
                    "istio.circuit_breaker")
    assert pool_limits(CHAIN, both, MESH) == {}
    alone = scenario("circuit_breaker", {"http2MaxRequests": 20, "host": "all"}, "istio.circuit_breaker")
    assert pool_limits(CHAIN, alone, MESH) == {"front": 20, "middle": 20, "back": 20}
    assert pool_limits(CHAIN, alone, LIBRARY) == {}


def test_peaks_are_kept_not_subtracted():
    from rbl.runner.hops import PEAKS
    assert increase({"services": {}, PEAKS: {"a": 9}}, {"services": {}, PEAKS: {"a": 4}})[PEAKS] == {"a": 4}
