"""examples/polyglot.rbl end to end with small settings: one neutral retry and one neutral breaker run
by Resilience4j (JVM), tenacity (Python), cockatiel (Node.js), failsafe-go and gobreaker (Go), and the
report shows all five; and the equivalence lint's formulas for the Node.js and Go libraries."""

from __future__ import annotations

import csv
import json
import re

from rbl.compiler.pipeline import compile_file, compile_source

from .conftest import EXAMPLES, run_rbl

FIVE = ("resilience4j", "tenacity", "cockatiel", "failsafe", "gobreaker")


def small(text: str) -> str:
    """The example with one user count, one fault rate, one round and few successes."""
    text = re.sub(r"users in \[[^\]]*\]", "users = 2", text)
    text = re.sub(r"fault\.rate in \[[^\]]*\]", "fault.rate = 50%", text)
    text = text.replace("rounds = 2", "rounds = 1").replace("successes = 10", "successes = 3")
    return re.sub(r"\n  assert size[^\n]*", "", text)


def test_the_example_maps_one_behaviour_onto_all_five_libraries():
    result = compile_file(EXAMPLES / "polyglot.rbl")
    assert result.ok and result.diagnostics == []            # no W0501: they behave alike
    assert {c.library.name for c in result.space.clients} == set(FIVE)


def test_the_polyglot_example_runs_end_to_end_and_its_report_shows_all_five(tmp_path):
    (tmp_path / "polyglot.rbl").write_text(small((EXAMPLES / "polyglot.rbl").read_text()))
    done = run_rbl("run", "polyglot.rbl", "-o", "out", "--seed", "3", "--report", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    with (tmp_path / "out" / "results.csv").open() as f:
        found = list(csv.DictReader(f))
    assert len(found) == 8 * 2                               # 8 clients x 2 users
    assert {row["lib"] for row in found} == set(FIVE)
    retries = [row for row in found if row["strategy"] == "retry"]
    # at most 4 requests per call, and under a 50% abort some call needed more than one
    assert all(int(row["totalRequests"]) <= 4 * int(row["totalCalls"]) for row in retries)
    assert any(int(row["totalRequests"]) > int(row["totalCalls"]) for row in retries)
    versions = json.loads((tmp_path / "out" / "manifest.json").read_text())["versions"]
    assert all(versions.get(library) not in (None, "", "unknown") for library in FIVE), versions
    html = (tmp_path / "out" / "report" / "report.html").read_text()
    for library in FIVE:
        assert f"{library}.retry" in html or f"{library}.circuit_breaker" in html, library


def _warns(clients: str) -> list[str]:
    text = ("space s {\n  users = 5\n  fault.kind = abort\n  fault.status = 503\n  fault.rate in [0%, 50%]\n"
            + clients + "\n}\n")
    return [d.code for d in compile_source(text, "s.rbl").diagnostics]


def test_the_lint_knows_gobreakers_strict_bound():
    # ReadyToTrip `ConsecutiveFailures > 3` opens on the fourth failure, cockatiel's breaker on the third
    assert _warns("""  client cockatiel.circuit_breaker { exceptionsAllowedBeforeBreaking = 3
    halfOpenAfter = 50ms }
  client gobreaker.circuit_breaker { consecutiveFailures = 3
    timeout = 50ms }""") == ["W0501"]
    assert _warns("""  client cockatiel.circuit_breaker { exceptionsAllowedBeforeBreaking = 3
    halfOpenAfter = 50ms }
  client gobreaker.circuit_breaker { consecutiveFailures = 2
    timeout = 50ms }""") == []


def test_the_lint_compares_failsafe_and_backoff_waits():
    # failsafe WithBackoffFactor(10ms, 1s, 1.5) and an ExponentialBackOff without randomization agree
    alike = """  client failsafe.retry { maxAttempts = 4
    delay = 10ms
    maxDelay = 1s
    delayFactor = 1.5 }
  client backoff.retry { maxTries = 4
    initialInterval = 10ms
    multiplier = 1.5
    randomizationFactor = 0 }"""
    assert _warns(alike) == []
    assert _warns(alike.replace("maxTries = 4", "maxTries = 3")) == ["W0501"]
    # the default randomization factor (0.5) makes the waits random: never alike
    assert _warns(alike.replace("\n    randomizationFactor = 0", "")) == ["W0501"]


def test_opossum_has_no_exact_neutral_breaker():
    text = ("space s {\n  users = 1\n  client opossum.circuit_breaker {\n"
            "    use circuit_breaker(open_when: consecutive_failures(2), open_for: 40ms)\n  }\n}\n")
    errors = [d for d in compile_source(text, "s.rbl").diagnostics if d.severity == "error"]
    assert [d.code for d in errors] == ["E0504"]
    assert "volumeThreshold = 2" in " ".join([errors[0].message, *errors[0].notes, errors[0].help or ""])
