"""Open-loop load in the language (rbl/compiler/workload.py, checks/load.py): the load is one more
dimension of the space, each of its settings may be an axis, and what only one kind of load takes,
or what a profile needs, is a located error."""

from __future__ import annotations

import json

import pytest

from rbl.compiler.expand import iter_scenario_lines, iter_scenarios
from rbl.compiler.pipeline import compile_source
from rbl.compiler.plan import plan_header
from rbl.store.plan_file import PlanProblem, check_header, scenario_check

CLIENTS = """
  client tenacity.retry { stop_after_attempt in [1, 3] }
  client istio.circuit_breaker { http2MaxRequests = 20 }
"""


def compiled(settings: str, clients: str = CLIENTS):
    return compile_source("space s {\n" + settings + clients + "}\n", "spec.rbl")


def errors(settings: str) -> list[tuple[str, str, int]]:
    result = compiled(settings)
    return [(d.code, d.message, d.primary.span.line) for d in result.diagnostics if d.severity == "error"]


def test_load_axes_multiply_the_size_and_each_scenario_carries_its_load():
    result = compiled("""  load = open
  load.rate in [80%, 100%, 120%]
  load.arrivals in [constant, poisson]
  load.duration = 20s
  load.warmup = 5s
  fault.rate in [0%, 10%]
""")
    assert result.ok, result.diagnostics
    space = result.space
    assert space.size == 2 * 1 * 6 * 3          # |F| x |U| x |L| x sum |CONF_i|
    assert space.breakdown() == "|F| 2 x |U| 1 x |L| 6 x (tenacity.retry 2 + istio.circuit_breaker 1) = 36"
    scenarios = list(iter_scenarios(space))
    assert [json.loads(line) for line in iter_scenario_lines(space)] == scenarios
    first = scenarios[0]
    assert first["users"] == 1 and first["load"] == {
        "kind": "open", "rate": {"share": 0.8}, "arrivals": "constant", "duration_s": 20, "warmup_s": 5,
        "profile": {"kind": "constant"}, "timeout_s": 10, "window_s": 5, "slo_ms": 100}
    # Algorithm 1 order with the load inside each fault rate and user count, before the clients
    assert [(s["fault"]["rate"], s["load"]["rate"]["share"], s["load"]["arrivals"], s["client"])
            for s in scenarios[:4]] == [(0, 0.8, "constant", "tenacity.retry"), (0, 0.8, "constant", "tenacity.retry"),
                                        (0, 0.8, "constant", "istio.circuit_breaker"),
                                        (0, 0.8, "poisson", "tenacity.retry")]
    assert len({s["id"] for s in scenarios}) == 36


def test_an_open_loop_plan_passes_the_plan_reader_and_a_tampered_load_does_not():
    result = compiled("""  load = open
  load.rps = 200
  load.profile = spikes
  load.peak_rps = 300
  load.period = 20s
  load.length = 5s
""")
    assert result.ok, result.diagnostics
    header = plan_header(result.space)
    check_header(header, "plan")
    assert header["breakdown"]["loads"] == 1 and header["load"]["settings"]["load.peak_rps"] == ["300"]
    check = scenario_check(header)
    scenarios = list(iter_scenarios(result.space))
    check(scenarios[0])
    assert scenarios[0]["load"]["profile"] == {"kind": "spikes", "peak": {"rps": 300}, "period_s": 20, "length_s": 5}
    tampered = {**scenarios[1], "load": {**scenarios[1]["load"], "arrivals": "bursty"}}
    with pytest.raises(PlanProblem, match="bursty"):
        check(tampered)
    without = {k: v for k, v in scenarios[1].items() if k != "load"}
    with pytest.raises(PlanProblem, match="load"):
        check(without)


def test_a_closed_loop_spec_is_unchanged_by_the_load_settings():
    result = compiled("  users = 4\n")
    assert result.ok and result.space.workload is None
    assert all("load" not in s for s in iter_scenarios(result.space))
    assert "load" not in plan_header(result.space) and "loads" not in plan_header(result.space)["breakdown"]


@pytest.mark.parametrize("settings, code, words, line", [
    ("  users = 2\n  load.rate = 50%\n", "E0219", "only applies to open-loop load", 3),
    ("  load = open\n  users = 5\n  load.rps = 10\n", "E0219", "`users` only applies to closed-loop", 3),
    ("  load = open\n  successes = 5\n  load.rps = 10\n", "E0219", "`successes` only applies", 3),
    ("  load = open\n", "E0213", "needs a rate", 2),
    ("  load = open\n  load.rate = 50%\n  load.rps = 10\n", "E0219", "both give the rate", 4),
    ("  load = open\n  load.rate = 0%\n", "E0203", "", 3),
    ("  load = open\n  load.rps = 10\n  load.profile = spikes\n  load.peak_rps = 20\n  load.period = 10s\n",
     "E0213", "needs `load.length`", 4),
    ("  load = open\n  load.rps = 10\n  load.profile = spikes\n  load.period = 10s\n  load.length = 2s\n",
     "E0213", "needs a peak", 4),
    ("  load = open\n  load.rate = 50%\n  load.profile = ramp\n  load.peak_rps = 20\n",
     "E0219", "different units", 5),
    ("  load = open\n  load.rps = 10\n  load.peak_rps = 20\n", "E0219", "only applies to the spikes", 4),
    ("  load = open\n  load.rps = 10\n  load.period = 20s\n", "E0219", "`load.period` only applies", 4),
    ("  load = open\n  load.rps = 10\n  load.profile = spikes\n  load.peak_rps = 20\n  load.period = 10s\n"
     "  load.length = 10s\n", "E0218", "shorter than the period", 7),
    ("  load = open\n  load.rps = 10\n  load.duration = 10s\n  load.warmup = 10s\n", "E0218",
     "warm-up must be shorter", 5),
    ("  load = open\n  load.rps = 10\n  target.replicas = 0\n", "E0203", "", 4),
    # what one round may ask for (rbl/plan_records.py): before, these compiled and then exhausted the
    # runner's memory (a 1 ns step period: 3 GB in 20 s; 10^6 req/s for 24 h as a list) or hung (2*10^9 windows)
    ("  load = open\n  load.rps = 10\n  load.profile = steps\n  load.peak_rps = 20\n  load.period = 1ns\n",
     "E0218", "more than 100,000 periods of 1 ns", 6),
    ("  load = open\n  load.rps = 10\n  load.window = 1ns\n", "E0218", "more than 100,000 windows", 4),
    ("  load = open\n  load.rps = 10\n  load.duration = 24h\n  load.window in [100ms, 5s]\n", "E0218",
     "a round of 24 h holds more than 100,000 windows of 100 ms", 5),
    ("  load = open\n  load.rps = 1000000\n  load.duration = 24h\n", "E0218",
     "a round would send 86,400,000,000 requests, more than 2,000,000", 3),
    ("  load = open\n  load.rps in [10, 100000]\n", "E0218", "would send 3,000,000 requests", 3),
    ("  load = open\n  load.rps = 10\n  load.profile = ramp\n  load.peak_rps = 100000\n", "E0218",
     "would send 3,000,000 requests", 5),
    ("  load = open\n  load.rate = 100%\n  load.capacity = 1000000\n", "E0218", "would send 30,000,000", 3),
])
def test_misused_load_settings_are_located_errors(settings, code, words, line):
    found = errors(settings)
    assert found, settings
    assert (code, line) in [(c, at) for c, _, at in found], found
    assert any(words in message for c, message, _ in found if c == code), found


def test_target_resources_reach_the_plan():
    result = compiled("  load = open\n  load.rps = 10\n  target.cpus = 0.5\n  target.replicas = 3\n"
                      "  target.noisy_cpus = 0.2\n")
    assert result.ok, result.diagnostics
    assert plan_header(result.space)["target"] == {"path": "/bytes/1000", "cpus": 0.5, "replicas": 3, "noisy_cpus": 0.2}


def test_a_share_of_a_capacity_measured_at_run_time_is_not_bounded_at_compile_time():
    assert compiled("  load = open\n  load.rate = 10000%\n  load.duration = 24h\n").ok


@pytest.mark.parametrize("change, words", [
    ({"window_s": 5e-324}, "window_s"),                        # denormal: OverflowError, 1e-300 hung the run
    ({"window_s": 1e-300}, "window_s"),
    ({"profile": {"kind": "steps", "peak": {"rps": 20}, "period_s": 1e-300}}, "period_s"),
    ({"profile": {"kind": "steps", "peak": {"rps": 20}, "period_s": 1e-6}}, "more than 100,000 periods"),
    ({"window_s": 1e-4}, "more than 100,000 windows"),
    ({"rate": {"rps": 1000000}, "duration_s": 86400}, "more than 2,000,000"),
    ({"rate": {"share": 1.0}, "capacity_rps": 1000000}, "more than 2,000,000"),
])
def test_a_plan_file_asking_more_of_a_round_than_it_may_is_refused(change, words):
    result = compiled("  load = open\n  load.rps = 10\n")
    header = plan_header(result.space)
    scenario = next(iter_scenarios(result.space))
    check = scenario_check(header)
    with pytest.raises(PlanProblem, match=words):
        check({**scenario, "load": {**scenario["load"], **change}})
