"""The compiler never raises: random text and bytes and mutated examples give a result or
diagnostics, every error located, in bounded time (issue 15's hostile inputs among the tokens)."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, given, settings, strategies as st

from rbl.compiler.pipeline import compile_bytes, compile_source
from rbl.lang.render import render_all

from .conftest import EXAMPLES

SEEDS = [p.read_text() for p in sorted(EXAMPLES.glob("*.rbl"))]
TOKENS = ["space", "client", "{", "}", "[", "]", "(", ")", "=", "in", "..", "step", ",", ".", "\n",
          "assert", "size", "==", "20ms", "40%", "1.5", "-", "library", "pattern", ":", "?", "&", "as",
          '"x"', "tenacity", "retry", "users", "fault.rate", "0", "1_000", "9999999999999999999", "µs",
          # issue 15: huge numbers, tiny steps, deep brackets, control characters, odd line breaks
          "1" * 5000, "1" + "0" * 400 + "ms", "9223372036854775808", "0.0000000000000000001%",
          "(" * 70, ")" * 70, "constant(" * 70, '"\x00"', '"\x7f"', "\x01", "\f", "\u2028", "\r\n",
          "\ufeff", "1 + " * 600 + "1", "let", "use", "(", ")"]
# Generous: one example compiles in milliseconds; the bound catches a quadratic or endless loop.
BOUNDED = timedelta(seconds=20)


def check(text: str) -> None:
    result = compile_source(text, "fuzz.rbl")
    if result.ok:
        assert result.space.size >= 0
    else:
        errors = [d for d in result.diagnostics if d.severity == "error"]
        assert errors, "a failed compile reports at least one error"
        for d in errors:
            assert d.primary is not None and d.code[0] == "E"
    render_all(result.diagnostics)                     # rendering never raises either


@settings(max_examples=200, deadline=BOUNDED, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_random_bytes(data):
    result = compile_bytes(data, "fuzz.rbl")
    assert result.ok or any(d.severity == "error" and d.primary is not None for d in result.diagnostics)
    render_all(result.diagnostics)


@settings(max_examples=200, deadline=BOUNDED)
@given(seed=st.sampled_from(SEEDS), data=st.data())
def test_mutated_example_bytes(seed, data):
    """Bytes flipped in a real spec: invalid UTF-8 anywhere is a located E0110, not a crash."""
    raw = bytearray(seed.encode("utf-8"))
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    result = compile_bytes(bytes(raw), "fuzz.rbl")
    assert result.ok or any(d.severity == "error" and d.primary is not None for d in result.diagnostics)


@settings(max_examples=300, deadline=BOUNDED, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200))
def test_random_text(text):
    check(text)


@settings(max_examples=300, deadline=BOUNDED, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(TOKENS), max_size=40).map(" ".join))
def test_random_token_soup(text):
    check(text)


@settings(max_examples=400, deadline=BOUNDED, suppress_health_check=[HealthCheck.too_slow])
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
