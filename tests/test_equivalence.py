"""The equivalence lint (W0501), neutral values in specs, approximation, and `rbl plan --mapping`."""

from __future__ import annotations

import csv
import io
import json

from rbl.compiler.expand import iter_scenarios
from rbl.compiler.pipeline import compile_file, compile_source

from .conftest import EXAMPLES

HEAD = """space s {
  users = 5
  fault.kind = FAULT
  FAULT_DETAIL
  fault.rate in [0%, 50%]
"""


def spec(body: str, fault: str = "abort") -> str:
    detail = "fault.status = 503" if fault == "abort" else "fault.duration = 1000ms"
    return HEAD.replace("FAULT_DETAIL", detail).replace("FAULT", fault) + body + "\n}\n"


def codes(text: str) -> list[str]:
    return [d.code for d in compile_source(text, "s.rbl").diagnostics]


def test_listing4_pair_warns_with_both_wait_sequences():
    result = compile_file(EXAMPLES / "ccpe-listing4.rbl")
    (warning,) = result.diagnostics
    assert warning.code == "W0501" and warning.severity == "warning"
    assert "polly.retry" in warning.message and "resilience4j.retry" in warning.message
    notes = " ".join(warning.notes)
    assert "30, 45, 67.5, 101.25, 151.875 ms (total 395.625 ms)" in notes
    assert "20, 30, 45, 67, 100 ms (total 262 ms)" in notes


def test_the_equivalent_example_has_no_diagnostics():
    result = compile_file(EXAMPLES / "equivalent-retry.rbl")
    assert result.ok and result.diagnostics == []


def test_an_equivalent_native_pair_does_not_warn():
    # Polly's pow^k * 10ms with pow 2 waits 20, 40, 80: exactly Resilience4j's 20 * 2^(k-1)
    assert codes(spec("""
  client polly.retry { retryCount = 3
    sleepDurationType = EXPONENTIAL_BACKOFF
    exponentialBackoffPow = 2
    sleepDuration = 10ms }
  client resilience4j.retry { maxAttempts = 4
    intervalFunction = EXPONENTIAL_BACKOFF
    multiplier = 2
    initialIntervalMillis = 20ms }""")) == []


def test_different_attempt_counts_warn():
    assert codes(spec("""
  client polly.retry { retryCount = 3
    sleepDuration = 10ms }
  client resilience4j.retry { maxAttempts = 3
    waitDuration = 10ms }""")) == ["W0501"]


def test_same_library_clients_are_not_compared():
    assert codes(spec("""
  client tenacity.retry { stop_after_attempt = 3 }
  client tenacity.retry as other { stop_after_attempt = 5 }""")) == []


def test_a_slow_call_threshold_under_the_delay_fault_makes_the_paper_breakers_differ():
    breakers = """
  client polly.circuit_breaker { exceptionsAllowedBeforeBreaking = 2
    durationOfBreaking = 40ms }
  client resilience4j.circuit_breaker { slowCallDurationThreshold = 1000ms
    slidingWindowSize = 2
    failureRateThreshold = 100%
    minimumNumberOfCalls = 2
    permittedNumberOfCallsInHalfOpenState = 1
    waitDurationInOpenState = 40ms }"""
    assert codes(spec(breakers, "abort")) == []
    result = compile_source(spec(breakers, "delay"), "s.rbl")
    (warning,) = result.diagnostics
    assert warning.code == "W0501" and "calls over 1000 ms count as failures" in " ".join(warning.notes)


def test_axes_inside_a_neutral_value_become_client_configurations():
    result = compile_source(spec("""
  let r = retry(attempts in [3, 4], backoff: exponential(initial in [10ms, 20ms, 30ms], multiplier: 2))
  client resilience4j.retry { use r }
  client tenacity.retry { use r }"""), "s.rbl")
    assert result.ok and result.diagnostics == []
    assert [c.configurations for c in result.space.clients] == [6, 6]
    assert result.space.size == 2 * 1 * 12
    configs = [s["config"] for s in iter_scenarios(result.space) if s["client"] == "tenacity.retry"][:6]
    # first declared varies slowest, as for native axes
    assert [(c["stop_after_attempt"], c["multiplier"]) for c in configs] == \
        [(3, 0.01), (3, 0.02), (3, 0.03), (4, 0.01), (4, 0.02), (4, 0.03)]


def test_approximate_runs_the_closest_setting_and_the_plan_records_it(cli, tmp_path):
    path = tmp_path / "approx.rbl"
    path.write_text(spec("""
  client polly.retry {
    use retry(attempts: 4, backoff: exponential(initial: 10ms, multiplier: 2, max: 30ms))
    approximate = true
  }"""))
    code, _, err = cli("compile", path, "-o", tmp_path / "out")
    assert code == 0, err
    assert "warning[W0503]" in err and "no cap" in err
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    neutral = plan["clients"][0]["neutral"]
    assert neutral["approximate"] is True
    assert neutral["approximations"] == ["polly's client has no cap on its waits (max: 30ms); closest: no cap"]
    assert plan["scenarios"][0]["config"]["sleepDurationType"] == "EXPONENTIAL_EXACT"


def test_without_approximate_an_inexpressible_value_is_an_error(cli, tmp_path):
    path = tmp_path / "exact.rbl"
    path.write_text(spec("""
  client pybreaker.circuit_breaker {
    use circuit_breaker(open_when: consecutive_failures(2), open_for: 40ms, half_open_permits: 3)
  }"""))
    code, out, err = cli("check", path)
    assert code == 1 and "error[E0504]" in err and "approximate = true" in err


def test_approximate_needs_a_neutral_value():
    assert codes(spec("""
  client tenacity.retry { stop_after_attempt = 3
    approximate = true }""")) == ["E0219"]


def test_csv_scenarios_of_neutral_clients_carry_native_columns(cli, tmp_path):
    code, _, err = cli("compile", EXAMPLES / "equivalent-retry.rbl", "-o", tmp_path, "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO((tmp_path / "scenarios.csv").read_text())))
    r4j = [r for r in rows if r["client"] == "resilience4j.retry"]
    assert {r["initialIntervalMillis"] for r in r4j} == {"20", "40"}
    assert {r["intervalFunction"] for r in r4j} == {"EXPONENTIAL_EXACT"}
    assert {r["multiplier"] for r in rows if r["client"] == "tenacity.retry"} == {"0.02", "0.04"}


def test_plan_mapping_shows_waits_side_by_side(cli):
    code, out, err = cli("plan", "--mapping", EXAMPLES / "ccpe-listing4.rbl")
    assert code == 0
    assert "sleepDurationType=EXPONENTIAL_BACKOFF" in out
    assert "6 attempts, waits 30, 45, 67.5, 101.25, 151.875 ms (total 395.625 ms)" in out
    assert "6 attempts, waits 20, 30, 45, 67, 100 ms (total 262 ms)" in out
    assert out.count("=> NOT alike across polly, resilience4j") == 3        # the three retry configurations
    assert out.count("=> alike across polly, resilience4j") == 3            # the three breaker configurations
    code, out, _ = cli("plan", "--mapping", EXAMPLES / "equivalent-retry.rbl")
    assert "NOT alike" not in out and out.count("=> alike") == 3
    assert "from retry(attempts: 6, backoff: exponential(initial in [20ms, 40ms], multiplier: 1.5))" in out


def test_plan_mapping_json(cli):
    code, out, _ = cli("plan", "--mapping", "--json", EXAMPLES / "equivalent-retry.rbl")
    rows = json.loads(out)
    assert code == 0 and len(rows) == 6
    tenacity = [r for r in rows if r["client"] == "tenacity.retry"]
    assert [r["native"]["multiplier"] for r in tenacity] == [0.02, 0.04]
    assert tenacity[1]["behaviour"] == "6 attempts, waits 40, 60, 90, 135, 202.5 ms (total 527.5 ms)"


def test_the_equivalent_example_runs_on_this_machine(tmp_path):
    from .conftest import run_rbl
    done = run_rbl("run", EXAMPLES / "equivalent-retry.rbl", "-o", tmp_path / "run", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 12 * 2 * 5                       # scenarios x rounds x users
    assert {r["client"] for r in rows} == {"resilience4j.retry", "tenacity.retry", "resilience4j.circuit_breaker",
                                           "pybreaker.circuit_breaker"}
    assert {r["config"]["intervalFunction"] for r in rows if r["client"] == "resilience4j.retry"} == \
        {"EXPONENTIAL_EXACT"}


def test_timeouts_and_bulkheads_are_compared_by_what_they_do():
    alike = spec("""  client resilience4j.timeout { timeoutDuration = 100ms }
  client failsafe.timeout { timeout = 100ms }
  client resilience4j.bulkhead { maxConcurrentCalls = 3 }
  client cockatiel.bulkhead { limit = 3 }""")
    assert codes(alike) == []
    unlike = spec("""  client resilience4j.timeout { timeoutDuration = 100ms }
  client failsafe.timeout { timeout = 150ms }
  client failsafe.bulkhead {
    maxConcurrency = 3
    maxWaitTime = 20ms
  }
  client cockatiel.bulkhead { limit = 3 }""")
    diagnostics = compile_source(unlike, "s.rbl").diagnostics
    assert [d.code for d in diagnostics] == ["W0501", "W0501"]
    assert "after 150 ms" in diagnostics[0].notes[1] and "waits up to 20 ms" in diagnostics[1].notes[0]
    assert "let v = bulkhead(...)" in diagnostics[1].help
