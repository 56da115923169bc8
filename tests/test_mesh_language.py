"""The `istio` library and composed clients in the language: `client istio.retry + circuit_breaker`
compiles into one client whose configurations multiply like any client's, with qualified
parameters; what a library cannot compose and what Istio refuses are located errors."""

from __future__ import annotations

import json

import pytest

from rbl.compiler.expand import iter_scenarios
from rbl.compiler.pipeline import compile_source
from rbl.compiler.plan import plan_header
from rbl.runner.closed_loop import strategy_for
from rbl.store.plan_file import PlanProblem, scenario_check

HEAD = """space s {
  users in [2, 4]
  successes = 2
  fault.kind = abort
  fault.rate = 0%
"""


def compiled(clients: str):
    result = compile_source(HEAD + clients + "\n}\n", "spec.rbl")
    return result


def errors(clients: str) -> list:
    return [d for d in compiled(clients).diagnostics if d.severity == "error"]


def test_a_composed_client_multiplies_its_policies_axes_and_qualifies_their_names():
    result = compiled("""  client istio.retry + circuit_breaker as pool {
    retry.attempts in [1, 2]
    circuit_breaker.http2MaxRequests in [1, 20, 1024]
  }""")
    assert result.ok, result.diagnostics
    header = plan_header(result.space)
    (client,) = header["clients"]
    assert client["pattern"] == "retry+circuit_breaker" and client["configurations"] == 6
    assert header["size"] == 2 * 6
    scenarios = list(iter_scenarios(result.space))
    assert {json.dumps(s["config"], sort_keys=True) for s in scenarios} == {
        json.dumps({"retry.attempts": a, "circuit_breaker.http2MaxRequests": m}, sort_keys=True)
        for a in (1, 2) for m in (1, 20, 1024)}
    check = scenario_check(header)
    for scenario in scenarios:
        check(scenario)                            # rbl run's reader takes the composed plan
    broken = {**scenarios[0], "config": {"attempts": 1}}   # a name no policy of the pattern has
    with pytest.raises(PlanProblem, match="names none of retry, circuit_breaker"):
        scenario_check(header)(broken)
    steps = strategy_for(scenarios[0])
    assert [step["pattern"] for step in steps] == ["retry", "circuit_breaker"]
    assert steps[0]["params"] == {"attempts": scenarios[0]["config"]["retry.attempts"]}


def test_the_written_order_is_kept():
    result = compiled("  client istio.timeout + retry { timeout.timeout = 2s\n retry.attempts = 1 }")
    assert result.ok, result.diagnostics
    scenario = next(iter_scenarios(result.space))
    assert scenario["pattern"] == "timeout+retry"
    assert [step["pattern"] for step in strategy_for(scenario)] == ["timeout", "retry"]
    assert strategy_for(scenario)[0]["params"] == {"timeout": 2000}


@pytest.mark.parametrize("clients, code, column, fragment", [
    ("  client tenacity.retry + retry {}", "E0226", 19, "one pattern per client"),
    ("  client istio.retry + retry {}", "E0226", 24, "appears twice"),
    ("  client istio.baseline + retry {}", "E0226", 16, "cannot be composed"),
    ("  client istio.retry + breaker {}", "E0205", 24, "no pattern `breaker`"),
    ("  client istio.retry + circuit_breaker { attempts = 2 }", "E0206", 42, "no parameter `attempts`"),
    ('  client istio.retry { retryOn = "5xx, reset" }', "E0227", 24, "` reset` is not a retry condition"),
    ('  client istio.retry { retryOn = "5xx,599" }', "E0227", 24, "`599`"),
    # str.isdigit() takes a superscript or another script's digits, which int() then refused (exit 70)
    ('  client istio.retry { retryOn = "²" }', "E0227", 24, "`²`"),
    ('  client istio.retry { retryOn = "5xx,٥٠٣" }', "E0227", 24, "`٥٠٣`"),
    ("  client istio.retry { attempts in [0, 2]\n perTryTimeout = 25ms }", "E0227", 24, "attempts 0 together"),
    ("  client istio.circuit_breaker {}", "E0227", 3, "no setting"),
    ("  client istio.retry + circuit_breaker { retry.attempts = 1 }", "E0227", 3, "no setting"),
    ("  let r = circuit_breaker(open_when: consecutive_failures(3), open_for: 1s)\n"
     "  client istio.circuit_breaker { use r }", "E0503", 38, "cannot map a neutral circuit_breaker"),
])
def test_what_cannot_run_is_a_located_error(clients, code, column, fragment):
    found = errors(clients)
    assert [d.code for d in found] == [code], found
    assert fragment in found[0].message
    line = HEAD.count("\n") + 1 + clients.count("\n", 0, clients.rfind("client"))
    assert (found[0].primary.span.line, found[0].primary.span.col) == (line, column)


def test_what_istio_accepts_compiles():
    for clients in ('  client istio.retry { retryOn = "5xx,503,reset"\n perTryTimeout = 25ms\n backoff = 50ms }',
                    "  client istio.retry { attempts = 0 }",
                    "  client istio.outlier_detection { maxEjectionPercent = 100\n consecutive5xxErrors = 2 }",
                    "  client istio.baseline {}"):
        assert not errors(clients), clients


def test_a_neutral_retry_maps_its_attempts_exactly_and_its_waits_only_approximately():
    let = "  let r = retry(attempts: 4, backoff: constant(25ms))\n"
    refused = errors(let + "  client istio.retry { use r }")
    assert [d.code for d in refused] == ["E0504"]
    assert "random" in " ".join(refused[0].notes)
    result = compiled(let + "  client istio.retry { use r\n approximate = true }")
    assert result.ok, result.diagnostics
    scenario = next(iter_scenarios(result.space))
    assert scenario["config"]["attempts"] == 3 and scenario["config"]["backoff"] == 25
    assert scenario["config"]["retryOn"] == "5xx"


def test_istio_retry_behaviour_knows_which_answers_envoy_retries():
    from rbl.neutral.semantics import behaviour_of
    default = behaviour_of("istio", "retry", {"attempts": 2})
    assert (default.attempts, default.waits) == (1, ())          # connection failures only: not a 503
    tuned = behaviour_of("istio", "retry", {"attempts": 3, "retryOn": "5xx", "backoff": 40})
    assert tuned.attempts == 4 and tuned.waits is None and "400 ms" in tuned.random
    assert behaviour_of("istio", "retry", {"attempts": 2, "retryOn": "connect-failure,503"}).attempts == 3
