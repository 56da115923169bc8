"""A/A groups from the plan: cells that cannot differ in behaviour (rbl/report/aa_groups.py)."""

from __future__ import annotations

from rbl.compiler.expand import iter_scenarios
from rbl.compiler.pipeline import compile_file, compile_source
from rbl.compiler.plan import plan_header
from rbl.report.aa_groups import aa_groups


def plan_of(space):
    return plan_header(space), list(iter_scenarios(space))


def compiled(text: str):
    result = compile_source(text, "t.rbl")
    assert result.ok, result.diagnostics
    return plan_of(result.space)


def described(header, scenarios, grouping):
    by_id = {s["id"]: s for s in scenarios}
    label = lambda s: s["client"] + "".join(f" {k}={v}" for k, v in sorted(s["config"].items())
                                             if k in ("multiplier", "reset_timeout", "waitDurationInOpenState",
                                                      "initialIntervalMillis", "slowCallDurationThreshold"))
    return [(g.library, g.users, g.fault, [label(by_id[i]) for i in g.scenario_ids]) for g in grouping.groups]


def test_quickstart_groups_every_configuration_with_the_baseline_at_0_percent_only():
    header, scenarios = plan_of(compile_file("examples/quickstart.rbl").space)
    grouping = aa_groups(header, scenarios)
    assert described(header, scenarios, grouping) == [
        ("tenacity", 5, "abort 0%", ["tenacity.baseline", "tenacity.retry multiplier=0.005",
                                     "tenacity.retry multiplier=0.01"]),
        ("pybreaker", 5, "abort 0%", ["tenacity.baseline", "pybreaker.circuit_breaker reset_timeout=0.02",
                                      "pybreaker.circuit_breaker reset_timeout=0.05"]),
        ("tenacity", 10, "abort 0%", ["tenacity.baseline", "tenacity.retry multiplier=0.005",
                                      "tenacity.retry multiplier=0.01"]),
        ("pybreaker", 10, "abort 0%", ["tenacity.baseline", "pybreaker.circuit_breaker reset_timeout=0.02",
                                       "pybreaker.circuit_breaker reset_timeout=0.05"]),
    ]
    assert grouping.left_out == []
    # no cell at 50% aborts is in a group: retries retry there and breakers open
    grouped = {i for g in grouping.groups for i in g.scenario_ids}
    assert all(s["fault"]["rate"] == 0 for s in scenarios if s["id"] in grouped)
    assert len(grouping.groups[0].pairs) == 3


def test_resilience4j_example_one_group_of_seven_per_user_count():
    header, scenarios = plan_of(compile_file("examples/ccpe-listing4-resilience4j.rbl").space)
    grouping = aa_groups(header, scenarios)
    assert [(g.library, g.users, g.fault, len(g.scenario_ids)) for g in grouping.groups] == [
        ("resilience4j", 5, "abort 0%", 7), ("resilience4j", 10, "abort 0%", 7)]
    assert len(grouping.groups[0].pairs) == 21


DELAY = """space s {{
  rounds = 3
  users = 5
  fault.kind = delay
  fault.duration = {delay}
  fault.rate in [0%, 50%]
  client resilience4j.baseline {{}}
  client resilience4j.retry {{
    maxAttempts = 3
    intervalFunction = FIXED
    waitDuration = 10ms
  }}
  client resilience4j.circuit_breaker {{
    slowCallDurationThreshold in [{slow}]
    waitDurationInOpenState = 50ms
  }}
}}
"""


def test_delay_faults_keep_retries_and_leave_out_breakers_the_delay_can_trip():
    header, scenarios = compiled(DELAY.format(delay="100ms", slow="150ms, 2000ms"))
    grouping = aa_groups(header, scenarios)
    groups = described(header, scenarios, grouping)
    # at 0%: no delay happens; 150 ms is still within the margin of a call's duration and left out
    assert groups[0][2] == "delay 100 ms 0%"
    assert groups[1][2] == "delay 100 ms 50%"
    for group in groups:
        assert [label.split()[0] for label in group[3]] == [
            "resilience4j.baseline", "resilience4j.retry", "resilience4j.circuit_breaker"]
        assert "slowCallDurationThreshold=2000" in group[3][2]
    reasons = [item.reason for item in grouping.left_out]
    assert len(reasons) == 2 and all("slowCallDurationThreshold = 150 ms" in r for r in reasons)


def test_a_delay_at_the_slow_call_threshold_is_named_by_the_semantics():
    header, scenarios = compiled(DELAY.format(delay="300ms", slow="300ms"))
    grouping = aa_groups(header, scenarios)
    at_50 = [item.reason for item in grouping.left_out
             if next(s for s in scenarios if s["id"] == item.scenario_id)["fault"]["rate"] == 50]
    assert at_50 == ["counts calls over 300 ms as failures and the delay reaches it"]


def test_long_delays_and_aborts_above_0_percent_form_no_group():
    header, scenarios = compiled(DELAY.format(delay="2s", slow="5000ms"))
    grouping = aa_groups(header, scenarios)
    assert {g.fault for g in grouping.groups} == {"delay 2000 ms 0%"}


def test_different_user_counts_and_services_are_never_grouped():
    header, scenarios = plan_of(compile_file("examples/polyglot.rbl").space)
    grouping = aa_groups(header, scenarios)
    by_id = {s["id"]: s for s in scenarios}
    services = {c["label"]: c["service"] for c in header["clients"]}
    assert grouping.groups
    for group in grouping.groups:
        members = [by_id[i] for i in group.scenario_ids]
        assert len({s["users"] for s in members}) == 1
        assert len({services[s["client"]] for s in members}) == 1
        assert len({s["fault"]["rate"] for s in members}) == 1
        assert {s["library"] for s in members if s["pattern"] != "baseline"} == {group.library}


def test_a_library_without_formulas_is_left_out_with_the_reason():
    header = {"clients": [{"label": "x.baseline", "service": "x"}, {"label": "x.retry", "service": "x"}]}
    fault = {"kind": "abort", "rate": 0, "status": 503}
    scenarios = [{"id": "a", "client": "x.baseline", "library": "x", "pattern": "baseline", "config": {},
                  "users": 5, "fault": fault},
                 {"id": "b", "client": "x.retry", "library": "x", "pattern": "retry", "config": {},
                  "users": 5, "fault": fault}]
    grouping = aa_groups(header, scenarios)
    assert grouping.groups == []
    assert [(i.scenario_id, i.reason) for i in grouping.left_out] == [("b", "rbl has no formulas for x retry")]


def test_a_bulkhead_and_a_timeout_near_the_calls_duration_are_left_out_and_a_long_timeout_is_grouped():
    header, scenarios = compiled("""space s {
  users = 5
  fault.kind = delay
  fault.duration = 100ms
  fault.rate in [0%, 50%]
  client resilience4j.baseline {}
  client resilience4j.timeout { timeoutDuration in [300ms, 2s] }
  client resilience4j.bulkhead { maxConcurrentCalls = 2 }
}""")
    grouping = aa_groups(header, scenarios)
    by_id = {s["id"]: s for s in scenarios}
    reasons = sorted({item.reason.split(",")[0] for item in grouping.left_out})
    assert reasons == ["a bulkhead refuses calls by their number at once", "times a call out after 300 ms"]
    grouped = sorted((by_id[i]["fault"]["rate"], by_id[i]["pattern"], by_id[i]["config"].get("timeoutDuration"))
                     for group in grouping.groups for i in group.scenario_ids)
    assert grouped == [(0, "baseline", None), (0, "timeout", 2000), (50, "baseline", None), (50, "timeout", 2000)]
