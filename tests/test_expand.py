"""Expansion: Algorithm 1 order, first-declared axis slowest, Equation 1 in closed form."""

from __future__ import annotations

import itertools
import json

from hypothesis import given, settings, strategies as st

from rbl.compiler.expand import iter_scenario_lines, iter_scenarios
from rbl.compiler.pipeline import compile_source


def space_text(users, rates, clients) -> str:
    lines = ["space gen {", f"  users in [{', '.join(map(str, users))}]",
             f"  fault.rate in [{', '.join(f'{r}%' for r in rates)}]"]
    for fails, timeouts in clients:
        lines.append("  client pybreaker.circuit_breaker {")
        lines.append(f"    fail_max in [{', '.join(map(str, fails))}]")
        lines.append(f"    reset_timeout in [{', '.join(f'{t}ms' for t in timeouts)}]")
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines)


unique_ints = lambda lo, hi, n: st.lists(st.integers(lo, hi), min_size=1, max_size=n, unique=True)


@settings(max_examples=60, deadline=None)
@given(users=unique_ints(1, 500, 3), rates=unique_ints(0, 100, 3),
       clients=st.lists(st.tuples(unique_ints(1, 9, 3), unique_ints(1, 900, 3)), min_size=1, max_size=3))
def test_expansion_order_and_size(users, rates, clients):
    result = compile_source(space_text(users, rates, clients))
    assert result.ok, result.diagnostics
    space = result.space
    scenarios = list(iter_scenarios(space))
    expected = [(r, u, index, f, t) for r in rates for u in users
                for index, (fails, timeouts) in enumerate(clients)
                for f, t in itertools.product(fails, timeouts)]
    assert space.size == len(expected) == len(scenarios)
    labels = [c.label for c in space.clients]
    got = [(s["fault"]["rate"], s["users"], labels.index(s["client"]),
            s["config"]["fail_max"], round(s["config"]["reset_timeout"] * 1000)) for s in scenarios]
    assert got == expected
    assert len({s["id"] for s in scenarios}) == len(scenarios)
    lines = list(iter_scenario_lines(space))
    assert [json.loads(line) for line in lines] == scenarios


def test_ids_are_stable_and_content_based():
    base = space_text([1, 2], [0, 50], [([1, 2], [10])])
    ids = {s["config"]["fail_max"]: s["id"] for s in iter_scenarios(compile_source(base).space)}
    # adding a client in front shifts indexes but not the ids of unchanged scenarios
    shifted = space_text([1, 2], [0, 50], [([7], [10]), ([1, 2], [10])])
    moved = list(iter_scenarios(compile_source(shifted).space))
    first = next(s for s in moved if s["client"].endswith("#2") and s["config"]["fail_max"] == 1)
    assert first["index"] != 0
    assert first["id"] != ids[1]  # the label changed (#2), so this is a different scenario
    again = list(iter_scenarios(compile_source(base).space))
    assert {s["config"]["fail_max"]: s["id"] for s in again} == ids


def test_size_is_closed_form_for_huge_spaces():
    text = """space huge {
      users in 1..1000000
      fault.rate in 0%..100% step 0.0001%
      client tenacity.retry { stop_after_attempt in 1..1000  multiplier in 1ms..1000ms step 1ms }
    }""".replace("1000  multiplier", "1000\n multiplier")
    space = compile_source(text).space
    assert space.size == 1_000_001 * 1_000_000 * 1_000_000 and space.size > 10**17


def test_exact_ranges_do_not_drift():
    text = """space r {
      users in [1]
      fault.rate in 0%..0.3% step 0.1%
      client pybreaker.circuit_breaker { reset_timeout in 0.1s..0.3s step 0.1s }
    }"""
    result = compile_source(text)
    assert result.ok and result.diagnostics == []  # 0.1 steps land exactly on the end
    rates = [s["fault"]["rate"] for s in iter_scenarios(result.space)]
    assert sorted(set(rates)) == [0, 0.1, 0.2, 0.3]
    timeouts = sorted({s["config"]["reset_timeout"] for s in iter_scenarios(result.space)})
    assert timeouts == [0.1, 0.2, 0.3]


def test_defaults_are_explicit_in_each_configuration():
    space = compile_source("space d {\n users in [1]\n client resilience4j.retry { maxAttempts = 2 }\n}").space
    config = next(iter_scenarios(space))["config"]
    assert config["maxAttempts"] == 2
    assert config["waitDuration"] == 500 and config["intervalFunction"] == "FIXED"
    assert "maxIntervalMillis" not in config  # optional, unset
