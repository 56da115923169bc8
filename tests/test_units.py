"""Units: parsing, exact formatting and the handoff to clients."""

from __future__ import annotations

from fractions import Fraction

import pytest

from rbl.lang.units import UnitError, Value, format_value, handoff, parse_percent, parse_quantity


@pytest.mark.parametrize("text,ns", [("20ms", 20_000_000), ("1.5s", 1_500_000_000), ("250us", 250_000),
                                     ("2m", 120_000_000_000), ("1h", 3_600_000_000_000), ("7ns", 7),
                                     ("1_000ms", 1_000_000_000), ("3\u00b5s", 3_000)])
def test_parse_durations(text, ns):
    assert parse_quantity(text) == Value("duration", Fraction(ns))


def test_unknown_unit():
    with pytest.raises(UnitError):
        parse_quantity("20xs")


@pytest.mark.parametrize("value,text", [
    (Value("duration", Fraction(20_000_000)), "20ms"),
    (Value("duration", Fraction(1_500_000_000)), "1500ms"),
    (Value("duration", Fraction(60_000_000_000)), "60s"),
    (Value("duration", Fraction(1_500_000)), "1500us"),
    (Value("percent", Fraction(25, 2)), "12.5%"),
    (Value("float", Fraction(3, 2)), "1.5"),
    (Value("float", Fraction(2)), "2.0"),
    (Value("string", 'a "q"'), '"a \\"q\\""'),
])
def test_format_round_trips(value, text):
    assert format_value(value) == text


def test_handoff_units():
    twenty = parse_quantity("20ms")
    assert handoff(twenty, "ms") == 20 and isinstance(handoff(twenty, "ms"), int)
    assert handoff(twenty, "s") == 0.02
    assert handoff(parse_quantity("2s"), "s") == 2
    assert handoff(parse_percent("40%"), None) == 40
    assert handoff(parse_percent("12.5%"), "ratio") == 0.125
    with pytest.raises(UnitError, match="1.5ms is not a whole number of ms"):
        handoff(parse_quantity("1.5ms"), "ms")
