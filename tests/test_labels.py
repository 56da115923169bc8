"""Configuration labels in the spec's spelling with units, from the plan: native axes by their
value as written, `use` clients by their neutral value, older plans by their native values."""

from __future__ import annotations

from pathlib import Path

from rbl.compiler.expand import iter_scenarios
from rbl.compiler.pipeline import compile_file
from rbl.compiler.plan import plan_header
from rbl.report.labels import Labeller

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def labels_of(name: str) -> set[str]:
    space = compile_file(EXAMPLES / name).space
    labeller = Labeller(plan_header(space))
    return {labeller.label(s) for s in iter_scenarios(space)}


def test_native_axes_keep_their_units():
    assert labels_of("quickstart.rbl") == {
        "tenacity.baseline", "tenacity.retry multiplier=5ms", "tenacity.retry multiplier=10ms",
        "pybreaker.circuit_breaker reset_timeout=20ms", "pybreaker.circuit_breaker reset_timeout=50ms"}
    assert "resilience4j.circuit_breaker waitDurationInOpenState=20ms" in labels_of("ccpe-listing4-resilience4j.rbl")


def test_use_clients_are_labelled_by_their_neutral_value():
    labels = labels_of("equivalent-retry.rbl")
    assert {"resilience4j.retry backoff.initial=20ms", "resilience4j.retry backoff.initial=40ms",
            "tenacity.retry backoff.initial=20ms", "tenacity.retry backoff.initial=40ms"} <= labels
    assert not any("initialIntervalMillis" in label or "multiplier=0.0" in label for label in labels)


def test_a_plan_without_labels_falls_back_to_native_values():
    space = compile_file(EXAMPLES / "quickstart.rbl").space
    header = plan_header(space)
    for client in header["clients"]:
        for parameter in client["parameters"].values():
            parameter.pop("labels", None)
    labeller = Labeller(header)
    assert {labeller.label(s) for s in iter_scenarios(space)} >= {"tenacity.retry multiplier=0.005"}
