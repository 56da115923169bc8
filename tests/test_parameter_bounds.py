"""One bound per parameter: every numeric parameter of the catalogue has a lower and an upper bound
(rbl/libraries/prelude.rbl, and the type's ceiling where the prelude states none), and each client
service takes exactly what `rbl check` takes. For every parameter of every library that runs here, the
values on either side of each bound go through the compiler and then to a live client service: a
value the compiler accepts must run (200), one it refuses must be refused by the client too (400),
never kill it. Relations between parameters (a capacity at least its threshold, buckets that divide a
window) are checked the same way, both sides. Istio's values are Envoy's to take: each one the
compiler accepts is put in force in a real sidecar."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest

from rbl.compiler.expand import iter_scenarios
from rbl.compiler.pipeline import compile_source
from rbl.lang.types import ParamDef
from rbl.lang.units import DURATION_UNITS, Value, format_value, handoff
from rbl.libraries.catalogue import builtin_libraries
from rbl.runner.closed_loop import strategy_for

from .conformance.checks import post
from .conformance.conftest import client_services

NUMERIC = ("int", "float", "duration", "percent")
LIVE = ["tenacity", "pybreaker", "resilience4j", "concurrency_limits", "cockatiel", "opossum", "failsafe", "gobreaker",
        "backoff"]
CLOSED_PORT = 9                    # the job's request fails at once: only the verdict on its parameters matters

# What a parameter needs beside it to mean anything (rbl text), where the library ties it to another.
COMPANIONS = {
    ("failsafe", "retry", "maxDelay"): "delay = 1ms",
    ("failsafe", "retry", "delayMin"): "delayMax = 1000000s",
    ("failsafe", "retry", "delayMax"): "delayMin = 1ms",
    ("failsafe", "circuit_breaker", "failureRateThreshold"): "failureThresholdingPeriod = 1s",
    ("failsafe", "circuit_breaker", "failureExecutionThreshold"):
        "failureRateThreshold = 50%\n    failureThresholdingPeriod = 1s",
    ("failsafe", "circuit_breaker", "successThresholdingCapacity"): "successThreshold = 1",
    ("failsafe", "circuit_breaker", "failureThresholdingCapacity"): "failureThreshold = 1",
    ("failsafe", "circuit_breaker", "failureThreshold"): "failureThresholdingCapacity = 100000",
    ("failsafe", "circuit_breaker", "successThreshold"): "successThresholdingCapacity = 100000",
    ("gobreaker", "circuit_breaker", "bucketPeriod"): "interval = 1000000s",
    ("opossum", "circuit_breaker", "rollingCountTimeout"): "rollingCountBuckets = 1",
    ("failsafe", "rate_limiter", "maxExecutions"): "period = 1000000s",
    ("failsafe", "adaptive_limiter", "minLimit"): "initialLimit = 100000\n    maxLimit = 100000",
    ("failsafe", "adaptive_limiter", "initialLimit"): "maxLimit = 100000",
    ("failsafe", "adaptive_limiter", "maxLimit"): "initialLimit = 1",
    ("failsafe", "adaptive_limiter", "recentWindowMin"): "recentWindowMax = 1000000s",
    ("failsafe", "adaptive_limiter", "recentWindowMax"): "recentWindowMin = 0ms",
    ("failsafe", "adaptive_limiter", "initialRejectionFactor"): "maxRejectionFactor = 1000000000",
    ("failsafe", "adaptive_limiter", "maxRejectionFactor"): "initialRejectionFactor = 1",
    # initialLimit within the bounds (the client refuses it outside them, as `rbl check` does)
    ("concurrency_limits", "vegas", "initialLimit"): "maxConcurrency = 100000",
    ("concurrency_limits", "vegas", "maxConcurrency"): "initialLimit = 1",
    ("concurrency_limits", "gradient2", "initialLimit"): "minLimit = 1\n    maxConcurrency = 100000",
    ("concurrency_limits", "gradient2", "minLimit"): "initialLimit = 100000\n    maxConcurrency = 100000",
    ("concurrency_limits", "gradient2", "maxConcurrency"): "initialLimit = 1\n    minLimit = 1",
    ("concurrency_limits", "aimd", "initialLimit"): "minLimit = 1\n    maxLimit = 100000",
    ("concurrency_limits", "aimd", "minLimit"): "initialLimit = 100000\n    maxLimit = 100000",
    ("concurrency_limits", "aimd", "maxLimit"): "initialLimit = 1\n    minLimit = 1",
}

HEAD = """space bounds {
  users = 1
  fault.kind = abort
  fault.status = 503
  fault.rate = 0%
"""


def numeric_params():
    for library in LIVE:
        for pattern in builtin_libraries()[library].patterns.values():
            for param in pattern.params.values():
                if param.type.base in NUMERIC:
                    yield library, pattern.name, param


def grain(param: ParamDef) -> Fraction:
    """The smallest step of a value the client can be handed: a whole unit of its handoff."""
    if param.type.base == "duration":
        return Fraction(DURATION_UNITS[param.handoff]) if param.handoff != "s" else Fraction(DURATION_UNITS["ms"])
    if param.type.base == "int":
        return Fraction(1)
    return Fraction(1, 1000)


def edges(param: ParamDef) -> list[tuple[Value, bool]]:
    """The values on either side of each of the parameter's bounds, and whether each is inside."""
    step, found = grain(param), []
    for bound in param.type.bounds:
        at, base = bound.value.v, param.type.base
        step_here = step * max(1, abs(Fraction(at)) / 10**6) if base == "float" else step
        inside, outside = {">=": (at, at - step_here), ">": (at + step_here, at),
                           "<=": (at, at + step_here), "<": (at - step_here, at)}[bound.op]
        cast = int if base == "int" else Fraction
        found += [(Value(base, cast(inside)), True), (Value(base, cast(outside)), False)]
    return found


def required_values(library: str, pattern: str, assigned: set[str]) -> str:
    """A valid value for each parameter the pattern needs, has no default for, and is not assigned."""
    lines = []
    for param in builtin_libraries()[library].patterns[pattern].params.values():
        if param.required and param.name not in assigned:
            value = param.type.members[0] if param.type.base == "enum" else format_value(edges(param)[0][0])
            lines.append(f"{param.name} = {value}")
    return "\n    ".join(lines)


def compiled_strategy(library: str, pattern: str, assignments: str):
    assigned = set(re.findall(r"^\s*(\w+) =", assignments, re.MULTILINE))
    assignments += "\n    " + required_values(library, pattern, assigned)
    result = compile_source(f"{HEAD}  client {library}.{pattern} {{\n    {assignments}\n  }}\n}}\n", "bounds.rbl")
    if not result.ok:
        return None
    return strategy_for(next(iter(iter_scenarios(result.space))))


def test_every_numeric_parameter_is_bounded_on_both_sides():
    unbounded = [f"{library}.{pattern}.{param.name}: {param.type}"
                 for library, pattern, param in numeric_params()
                 if not ({b.op for b in param.type.bounds} & {">", ">="}
                         and {b.op for b in param.type.bounds} & {"<", "<="})]
    assert not unbounded, unbounded


@pytest.fixture(scope="module")
def services():
    with client_services(LIVE, CLOSED_PORT) as urls:
        yield urls


def verdict(url: str, strategy: list[dict]) -> int:
    job = {"strategy": strategy, "target_url": f"http://127.0.0.1:{CLOSED_PORT}/", "successes": 1,
           "max_requests": 1, "max_duration_ms": 200, "share": "user", "instance": "bounds", "vu": 1}
    return post(url, "/run", job)[0]


@pytest.mark.parametrize("library", LIVE)
def test_each_client_takes_exactly_the_values_the_catalogue_takes(services, library):
    disagreements = []
    for lib, pattern, param in numeric_params():
        if lib != library:
            continue
        companion = COMPANIONS.get((library, pattern, param.name), "")
        for value, inside in edges(param):
            where = f"{library}.{pattern}.{param.name} = {format_value(value)}"
            strategy = compiled_strategy(library, pattern, f"{param.name} = {format_value(value)}\n    {companion}")
            if (strategy is not None) != inside:
                disagreements.append(f"{where}: the compiler {'refuses' if inside else 'accepts'} it")
                continue
            if strategy is None:          # hand the client what the compiler would have, had it accepted it
                strategy = compiled_strategy(library, pattern, f"{param.name} = {format_value(edges(param)[0][0])}"
                                                               f"\n    {companion}")
                assert strategy is not None, where
                strategy[-1]["params"][param.name] = handoff(value, param.handoff)
            expected = 200 if inside else 400
            got = verdict(services[library], strategy)
            if got != expected:
                disagreements.append(f"{where} ({strategy[-1]['params']}): expected {expected}, got {got}")
    assert not disagreements, "\n".join(disagreements)


# -- istio: the values the catalogue takes are values Istio's sidecar Envoy takes -------------------
# The mesh client only forwards (its sidecar holds the policies), so the live check of an istio value
# is Envoy's: each value the compiler accepts is put in force in a real sidecar (Sidecar.apply waits
# for Envoy to accept or reject it). A controller's parameters are the runner's, not Envoy's.
@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    from .conformance.mesh_sidecar import mesh_rig
    with mesh_rig(tmp_path_factory.mktemp("mesh-bounds")) as rig:
        yield rig


def compiled_scenario(library: str, pattern: str, assignments: str) -> dict | None:
    assigned = set(re.findall(r"^\s*(\w+) =", assignments, re.MULTILINE))
    assignments += "\n    " + required_values(library, pattern, assigned)
    result = compile_source(f"{HEAD}  client {library}.{pattern} {{\n    {assignments}\n  }}\n}}\n", "bounds.rbl")
    return next(iter(iter_scenarios(result.space))) if result.ok else None


def test_every_istio_value_the_catalogue_takes_is_one_the_sidecar_envoy_takes(mesh):
    from rbl.libraries.istio import CONTROLLED
    from rbl.mesh.sidecar import SidecarError
    disagreements, tried = [], 0
    for pattern in builtin_libraries()["istio"].patterns.values():
        if pattern.name in CONTROLLED:
            continue
        for param in (p for p in pattern.params.values() if p.type.base in NUMERIC):
            for value, inside in edges(param):
                where = f"istio.{pattern.name}.{param.name} = {format_value(value)}"
                scenario = compiled_scenario("istio", pattern.name, f"{param.name} = {format_value(value)}")
                if (scenario is not None) != inside:
                    disagreements.append(f"{where}: the compiler {'refuses' if inside else 'accepts'} it")
                elif scenario is not None:
                    tried += 1
                    try:
                        mesh.sidecar.apply(scenario["pattern"], scenario["config"])
                    except SidecarError as error:
                        disagreements.append(f"{where}: the sidecar Envoy refused it: {error}")
    assert not disagreements, "\n".join(disagreements)
    assert tried >= 40                       # every bound of every policy's numbers, on the inside


# -- relations: refused by `rbl check` (E0233) and by the client, both sides of each ---------------
RELATION_CASES = [   # (library.pattern, assignments, fits)
    ("failsafe.retry", "delayMin = 5ms", False),
    ("failsafe.retry", "delayMin = 5ms\n    delayMax = 10ms", True),
    ("failsafe.retry", "delayMin = 10ms\n    delayMax = 5ms", False),
    ("failsafe.retry", "maxDelay = 100ms\n    delayMin = 5ms\n    delayMax = 10ms", False),
    ("failsafe.retry", "maxDelay = 100ms", False),
    ("failsafe.retry", "maxDelay = 100ms\n    delay = 10ms", True),
    ("failsafe.retry", "maxDelay = 100ms\n    delay = 200ms", False),
    ("failsafe.retry", "jitter = 5ms\n    jitterFactor = 0.5", False),
    ("failsafe.circuit_breaker", "failureThreshold = 5\n    failureThresholdingCapacity = 3", False),
    ("failsafe.circuit_breaker", "failureThreshold = 5\n    failureThresholdingCapacity = 10", True),
    ("failsafe.circuit_breaker", "failureThreshold = 5\n    failureThresholdingCapacity in [10, 3]", False),
    ("failsafe.circuit_breaker", "failureThresholdingCapacity = 10\n    failureThresholdingPeriod = 1s", False),
    ("failsafe.circuit_breaker", "failureRateThreshold = 50%", False),
    ("failsafe.circuit_breaker", "failureRateThreshold = 50%\n    failureThresholdingPeriod = 1s", True),
    ("failsafe.circuit_breaker", "failureExecutionThreshold = 5", False),
    ("failsafe.circuit_breaker", "successThresholdingCapacity = 5", False),
    ("failsafe.circuit_breaker", "successThreshold = 6\n    successThresholdingCapacity = 5", False),
    ("failsafe.circuit_breaker", "successThreshold = 3\n    successThresholdingCapacity = 5", True),
    ("failsafe.rate_limiter", "maxExecutions = 2000000\n    period = 1ms", False),
    ("failsafe.rate_limiter", "maxExecutions = 2000000\n    period = 1ms\n    limiter = BURSTY", True),
    ("failsafe.rate_limiter", "maxExecutions = 1000\n    period = 1ms", True),
    ("failsafe.adaptive_limiter", "initialLimit = 300", False),
    ("failsafe.adaptive_limiter", "minLimit = 30", False),
    ("failsafe.adaptive_limiter", "minLimit = 5\n    initialLimit = 5\n    maxLimit = 5", True),
    ("failsafe.adaptive_limiter", "recentWindowMin = 2s\n    recentWindowMax = 1s", False),
    ("failsafe.adaptive_limiter", "initialRejectionFactor = 2", False),
    ("failsafe.adaptive_limiter", "initialRejectionFactor = 3\n    maxRejectionFactor = 2", False),
    ("failsafe.adaptive_limiter", "initialRejectionFactor = 2\n    maxRejectionFactor = 3", True),
    ("gobreaker.circuit_breaker", "bucketPeriod = 1s", False),
    ("gobreaker.circuit_breaker", "bucketPeriod = 1s\n    interval = 10s", True),
    ("gobreaker.circuit_breaker", "bucketPeriod = 1ms\n    interval = 1000s", False),
    ("opossum.circuit_breaker", "rollingCountTimeout = 10s\n    rollingCountBuckets = 3", False),
    ("opossum.circuit_breaker", "rollingCountTimeout = 10s\n    rollingCountBuckets = 4", True),
    ("concurrency_limits.vegas", "initialLimit = 30\n    maxConcurrency = 20", False),
    ("concurrency_limits.vegas", "initialLimit = 20\n    maxConcurrency = 20", True),
    ("concurrency_limits.gradient2", "initialLimit = 4", False),
    ("concurrency_limits.gradient2", "initialLimit = 4\n    minLimit = 4", True),
    ("concurrency_limits.gradient2", "initialLimit = 300", False),
    ("concurrency_limits.aimd", "minLimit = 30", False),
    ("concurrency_limits.aimd", "initialLimit = 201", False),
    ("concurrency_limits.aimd", "minLimit = 5\n    initialLimit = 5\n    maxLimit = 5", True),
]


@pytest.mark.parametrize("client, assignments, fits", RELATION_CASES)
def test_a_relation_is_refused_by_check_and_by_the_client_alike(services, monkeypatch, client, assignments, fits):
    library, pattern = client.split(".")
    result = compile_source(f"{HEAD}  client {client} {{\n    {assignments}\n  }}\n}}\n", "bounds.rbl")
    errors = [d for d in result.diagnostics if d.severity == "error"]
    assert [d.code for d in errors] == ([] if fits else ["E0233"]), errors
    if not fits:                      # located at a parameter the spec wrote, naming the values
        assert errors[0].primary.span.line >= 7 and "(client " in errors[0].message and errors[0].help
        from rbl.compiler.checks import relations
        monkeypatch.setattr(relations, "RELATIONS", {})
    strategy = compiled_strategy(library, pattern, assignments)
    assert strategy is not None
    for step in strategy if "in [" not in assignments else ():
        assert verdict(services[library], [step]) == (200 if fits else 400), (client, assignments, step)


# -- a neutral value is held to the same bounds and relations, once mapped -------------------------
@pytest.mark.parametrize("client, use, code, fragment", [
    ("failsafe.circuit_breaker", "circuit_breaker(open_when: consecutive_failures(200000), open_for: 1s, "
                                 "half_open_permits: 1)", "E0203", "`failureThreshold` would be 200000"),
    ("resilience4j.circuit_breaker", "circuit_breaker(open_when: consecutive_failures(200000), open_for: 1s, "
                                     "half_open_permits: 1)", "E0203", "`slidingWindowSize` would be 200000"),
    ("failsafe.retry", "retry(attempts: 3, backoff: exponential(initial: 10ms, multiplier: 2, max: 500000h))",
     "E0203", "`maxDelay` would be 1800000000s"),
    ("failsafe.retry", "retry(attempts: 3, backoff: exponential(initial: 10ms, multiplier: 2, max: 5ms))", None, ""),
])
def test_a_neutral_value_maps_only_within_the_native_bounds(client, use, code, fragment):
    result = compile_source(f"{HEAD}  client {client} {{ use {use} }}\n}}\n", "bounds.rbl")
    errors = [d for d in result.diagnostics if d.severity == "error"]
    if code is None:
        assert not errors, errors
        return
    assert [d.code for d in errors] == [code] and fragment in errors[0].message, errors


def test_a_composed_clients_relation_names_its_qualified_parameters():
    result = compile_source(f"{HEAD}  client failsafe.retry + circuit_breaker {{\n"
                            "    circuit_breaker.failureThreshold = 5\n"
                            "    circuit_breaker.failureThresholdingCapacity in [10, 3]\n  }\n}\n", "bounds.rbl")
    errors = [d for d in result.diagnostics if d.severity == "error"]
    assert [d.code for d in errors] == ["E0233"], errors
    assert "circuit_breaker.failureThresholdingCapacity = 3" in errors[0].message
    assert errors[0].primary.span.line == 8
