"""`assert size == N` and `rbl plan` agree for every axis the language has: fault rates, users, the
open-loop load's axes, the target's (path and CPU budget), and each client's configuration axes. Generated specs: the
assertion holds exactly when N is the number of scenarios the plan expands to."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from rbl.compiler.expand import iter_scenarios
from rbl.compiler.pipeline import compile_source

values = lambda low, high, most: st.lists(st.integers(low, high), min_size=1, max_size=most, unique=True)  # noqa: E731


def axis(key: str, items: list, unit: str = "") -> str:
    written = [f"{item}{unit}" for item in items]
    return f"  {key} = {written[0]}\n" if len(written) == 1 else f"  {key} in [{', '.join(written)}]\n"


@st.composite
def spaces(draw) -> tuple[str, int]:
    """A spec without its assertion, and the size the axes multiply to (worked out here, not by rbl)."""
    open_loop = draw(st.booleans())
    body, size = "", 1
    if open_loop:
        rates, durations = draw(values(10, 200, 3)), draw(values(2, 9, 2))
        slos, windows = draw(values(50, 400, 2)), draw(values(1, 2, 2))
        body += "  load = open\n  load.capacity = 50\n" + axis("load.rate", rates, "%") \
            + axis("load.duration", durations, "s") + axis("load.slo", slos, "ms") + axis("load.window", windows, "s")
        size *= len(rates) * len(durations) * len(slos) * len(windows)
        paths, budgets = draw(values(1, 9, 3)), draw(st.lists(st.sampled_from([0.25, 0.5, 1, 2]), min_size=0,
                                                             max_size=3, unique=True))
        body += axis("target", [f'"/factorial/{p}000"' for p in paths])
        body += axis("target.cpus", budgets) if budgets else ""
        size *= len(paths) * max(1, len(budgets))
    else:
        users = draw(values(1, 50, 3))
        body += axis("users", users)
        size *= len(users)
    faults = draw(values(0, 90, 3))
    body += axis("fault.rate", faults, "%")
    size *= len(faults)
    configurations = 0
    if draw(st.booleans()):
        attempts, timeouts = draw(values(1, 5, 3)), draw(values(10, 90, 2))
        body += "  client istio.retry {\n" + axis("attempts", attempts) + axis("perTryTimeout", timeouts, "ms") \
            + "  }\n"
        configurations += len(attempts) * len(timeouts)
    pools = draw(values(1, 1024, 3))
    body += "  client istio.circuit_breaker {\n" + axis("http2MaxRequests", pools) + "  }\n"
    configurations += len(pools)
    if not open_loop and draw(st.booleans()):
        waits = draw(values(1, 50, 3))
        body += "  client tenacity.retry {\n    stop_after_attempt = 3\n" + axis("wait_fixed", waits, "ms") + "  }\n"
        configurations += len(waits)
    return body, size * configurations


def test_target_axes_are_a_dimension_of_the_size_it_asserts():
    """Two paths x three budgets x two configurations are twelve scenarios, the budget varying
    slowest, and the note names |T|."""
    body = ('  load = users\n  load.users = 4\n  target in ["/factorial/5000", "/factorial/10000"]\n'
            "  target.cpus in [0.5, 1, 2]\n  client istio.adaptive_breaker { trt in [50ms, 100ms] }\n")
    result = compile_source(with_assertion(body, "== 12"), "s.rbl")
    assert result.space is not None, [d.message for d in result.diagnostics]
    points = [(s["target"]["cpus"], s["target"]["path"]) for s in iter_scenarios(result.space)]
    assert points[::2] == [(cpus, path) for cpus in (0.5, 1.0, 2.0) for path in ("/factorial/5000", "/factorial/10000")]
    failed = compile_source(with_assertion(body, "== 6"), "s.rbl")
    (error,) = [d for d in failed.diagnostics if d.code == "E0304"]
    assert any("|T| 6" in note for note in error.notes), error.notes


def with_assertion(body: str, claim: str) -> str:
    return f"space generated {{\n{body}  assert size {claim}\n}}\n"


@settings(max_examples=60, deadline=None)
@given(spaces())
def test_the_size_assertion_holds_exactly_when_the_plan_has_that_many_scenarios(space):
    body, size = space
    result = compile_source(with_assertion(body, f"== {size}"), "generated.rbl")
    assert result.space is not None, [d.message for d in result.diagnostics]
    assert result.space.size == size == sum(1 for _ in iter_scenarios(result.space))
    assert f"= {size}" in result.space.breakdown()
    for wrong in (size + 1, size - 1):
        failed = compile_source(with_assertion(body, f"== {wrong}"), "generated.rbl")
        assert failed.space is None
        (error,) = [d for d in failed.diagnostics if d.code == "E0304"]
        assert f"the size is {size}," in error.message
    assert compile_source(with_assertion(body, f">= {size}"), "generated.rbl").space is not None
    assert compile_source(with_assertion(body, f"< {size}"), "generated.rbl").space is None


def test_a_load_axis_is_a_dimension_of_the_size_it_asserts():
    """The reproducer: two load rates and one configuration are two scenarios, and the note says why."""
    body = "  load = open\n  load.capacity = 50\n  load.rate in [80%, 120%]\n" \
           "  client istio.circuit_breaker { http2MaxRequests = 4 }\n"
    assert compile_source(with_assertion(body, "== 2"), "s.rbl").space is not None
    failed = compile_source(with_assertion(body, "== 1"), "s.rbl")
    (error,) = [d for d in failed.diagnostics if d.code == "E0304"]
    assert any("|L| 2" in note for note in error.notes), error.notes
