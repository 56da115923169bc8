"""Nested composition in the language: `client resilience4j.retry + circuit_breaker + timeout` hands the
client service the patterns in exactly the written order (outermost first), each pattern's parameters
free to be axes; `rbl plan` shows the nesting; what cannot compose, and a pattern a library lacks, are
located errors naming what can."""

from __future__ import annotations

import pytest

from rbl.compiler.expand import iter_scenarios
from rbl.compiler.pipeline import compile_source
from rbl.runner.closed_loop import strategy_for

HEAD = """space s {
  users = 2
  fault.kind = delay
  fault.duration = 200ms
  fault.rate = 50%
"""


def compiled(clients: str):
    return compile_source(HEAD + clients + "\n}\n", "spec.rbl")


@pytest.mark.parametrize("written", [("retry", "circuit_breaker", "timeout"), ("timeout", "retry", "circuit_breaker"),
                                     ("circuit_breaker", "timeout", "retry")])
def test_the_client_service_gets_the_patterns_in_the_written_order(written):
    result = compiled(f"  client failsafe.{' + '.join(written)} {{\n    timeout.timeout in [50ms, 80ms]\n  }}")
    assert result.ok, result.diagnostics
    scenarios = list(iter_scenarios(result.space))
    assert len(scenarios) == 2                                   # the timeout's axis multiplies
    for scenario, bound in zip(scenarios, (50, 80)):
        strategy = strategy_for(scenario)
        assert [step["pattern"] for step in strategy] == list(written)
        timeout = next(step for step in strategy if step["pattern"] == "timeout")
        assert timeout["params"] == {"timeout": bound}


def test_plan_shows_how_the_patterns_nest(cli, tmp_path):
    spec = tmp_path / "spec.rbl"
    spec.write_text(HEAD + "  client resilience4j.retry + timeout {\n    timeout.timeoutDuration = 50ms\n  }\n}\n")
    code, out, err = cli("plan", str(spec))
    assert code == 0, err
    assert "nests retry(timeout(call)), as written" in out


@pytest.mark.parametrize("clients,code,fragment,help_fragment", [
    ("  client tenacity.retry + retry {}", "E0226", "one pattern per client", "cockatiel, failsafe"),
    ("  client failsafe.retry + retry {}", "E0226", "appears twice", "name each pattern once"),
    ("  client failsafe.baseline + retry {}", "E0226", "cannot be composed", "on its own"),
    ("  client failsafe.retry + timeout { use timeout(after: 50ms) }", "E0226", "cannot `use`", "retry.attempts"),
    ("  client tenacity.bulkhead {}", "E0205", "no pattern `bulkhead`", "`bulkhead` is in cockatiel, failsafe, polly, "
                                                                          "resilience4j"),
    ("  client resilience4j.hedge {}", "E0205", "no pattern `hedge`", "`hedge` is in failsafe"),
    ("  client tenacity.retry { use bulkhead(max_concurrent: 2) }", "E0503", "neutral bulkhead",
     "maps onto resilience4j, polly, cockatiel, failsafe"),
])
def test_what_cannot_compose_or_does_not_exist_is_a_located_error(clients, code, fragment, help_fragment):
    found = [d for d in compiled(clients).diagnostics if d.severity == "error"]
    assert [d.code for d in found] == [code], found
    assert fragment in found[0].message
    assert help_fragment in found[0].help
    assert found[0].primary.span.line == HEAD.count("\n") + 1
