"""The compiler never raises: random text and mutated examples give a result or diagnostics."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from rbl.compiler.pipeline import compile_source

from .conftest import EXAMPLES

SEEDS = [p.read_text() for p in sorted(EXAMPLES.glob("*.rbl"))]
TOKENS = ["space", "client", "{", "}", "[", "]", "(", ")", "=", "in", "..", "step", ",", ".", "\n",
          "assert", "size", "==", "20ms", "40%", "1.5", "-", "library", "pattern", ":", "?", "&", "as",
          '"x"', "tenacity", "retry", "users", "fault.rate", "0", "1_000", "9999999999999999999", "µs"]


def check(text: str) -> None:
    result = compile_source(text, "fuzz.rbl")
    if result.ok:
        assert result.space.size >= 0
    else:
        errors = [d for d in result.diagnostics if d.severity == "error"]
        assert errors, "a failed compile reports at least one error"
        for d in errors:
            assert d.primary is not None and d.code[0] == "E"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200))
def test_random_text(text):
    check(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=40).map(" ".join))
def test_random_token_soup(text):
    check(text)


@settings(max_examples=400, deadline=None)
@given(seed=st.sampled_from(SEEDS), data=st.data())
def test_mutated_examples(seed, data):
    text = seed
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(text)))
        action = data.draw(st.sampled_from(["delete", "insert", "duplicate"]))
        if action == "delete":
            text = text[:position] + text[position + data.draw(st.integers(1, 12)):]
        elif action == "insert":
            text = text[:position] + data.draw(st.sampled_from(TOKENS)) + text[position:]
        else:
            text = text[:position] + text[position:position + 30] + text[position:]
    check(text)
