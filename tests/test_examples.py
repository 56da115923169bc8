"""The examples: sizes from the papers, and snapshots of their plans."""

from __future__ import annotations

import json

import pytest

from rbl.compiler.pipeline import compile_file

from .conftest import EXAMPLES

PAPER_SIZES = {"ccpe-listing3.rbl": 90, "ccpe-listing4.rbl": 210, "sbrc2022-retry.rbl": 54}
# The papers' Polly/Resilience4j retry pairs are not equivalent (docs/library-semantics.md section 7):
# the equivalence lint must say so, and only there.
EXPECTED_WARNINGS = {"ccpe-listing4.rbl": ["W0501"], "sbrc2022-retry.rbl": ["W0501"],
                     # Envoy's waits are random (accepted with approximate = true), and Istio's default
                     # retry leaves a 503 alone: unlike the three libraries' 4 attempts
                     "mesh-vs-library.rbl": ["W0503", "W0501", "W0501", "W0501"],
                     # the sidecar's retry waits are random (approximate = true)
                     "overload-spikes.rbl": ["W0503"]}
ALL = sorted(p.name for p in EXAMPLES.glob("*.rbl"))


@pytest.mark.parametrize("name,size", sorted(PAPER_SIZES.items()))
def test_plan_prints_the_paper_size_with_breakdown(name, size, cli, monkeypatch):
    monkeypatch.chdir(EXAMPLES)
    code, out, err = cli("plan", name)
    assert code == 0, err
    assert f"= {size} scenarios" in out
    assert "|F| = 5" in out or "|F| = 3" in out
    space = compile_file(EXAMPLES / name).space
    for client in space.clients:
        assert client.label in out


@pytest.mark.parametrize("name", ALL)
def test_every_example_checks_and_asserts_its_size(name):
    result = compile_file(EXAMPLES / name)
    assert result.ok, result.diagnostics
    assert [d.code for d in result.diagnostics] == EXPECTED_WARNINGS.get(name, [])
    assert [a.op for a in result.space.assertions] == ["=="]
    assert result.space.assertions[0].expected == result.space.size


@pytest.mark.parametrize("name", ALL)
def test_plan_snapshot(name, cli, monkeypatch, text_snapshot):
    monkeypatch.chdir(EXAMPLES)
    code, out, err = cli("compile", name, "-o", "-")          # the plan alone, whatever the deployment target
    assert code == 0, err
    plan = json.loads(out)
    assert len(plan["scenarios"]) == plan["size"]
    assert [s["index"] for s in plan["scenarios"]] == list(range(plan["size"]))
    plan["rbl_version"] = "<version>"
    assert json.dumps(plan, indent=1) + "\n" == text_snapshot


@pytest.mark.parametrize("name", ALL)
def test_plan_summary_snapshot(name, cli, monkeypatch, text_snapshot):
    monkeypatch.chdir(EXAMPLES)
    monkeypatch.setattr("rbl.estimate.os.cpu_count", lambda: 2)    # the estimate scales with this machine's cores
    # what a first run adds depends on this machine's caches (tests/test_first_run.py)
    monkeypatch.setattr("rbl.commands.first_run.first_run_costs", lambda space, header: [])
    code, out, _ = cli("plan", name)
    assert code == 0
    assert out == text_snapshot


def test_quickstart_uses_only_python_libraries():
    space = compile_file(EXAMPLES / "quickstart.rbl").space
    assert {c.library.requires for c in space.clients} == {"python"}
    assert space.size <= 40


# The warnings the shipped examples mean to show (each demonstrates its lint); any other is a mistake.
INTENDED_WARNINGS = {
    "ccpe-listing4.rbl": [("W0501", 30)],          # Polly's and Resilience4j's retries differ (the paper's point)
    "sbrc2022-retry.rbl": [("W0501", 20)],
    "mesh-vs-library.rbl": [("W0503", 29), ("W0501", 32), ("W0501", 33), ("W0501", 34)],   # Istio's retry is not theirs
    "overload-spikes.rbl": [("W0503", 28)],        # Istio approximates the neutral retry
}


@pytest.mark.parametrize("name", ALL)
def test_an_example_warns_only_where_it_means_to(name):
    result = compile_file(EXAMPLES / name)
    found = [(d.code, d.primary.span.line) for d in result.diagnostics if d.severity == "warning"]
    assert found == INTENDED_WARNINGS.get(name, []), found
