"""The neutral values a spec can write, as typed signatures, e.g.

    retry(attempts: 6, backoff: exponential(initial: 20ms, multiplier: 1.5))
    circuit_breaker(open_when: consecutive_failures(2), open_for: 40ms, half_open_permits: 1)
    timeout(after: 100ms)
    bulkhead(max_concurrent: 10, max_wait: 0ms)

A parameter takes a value (checked like a library parameter) or, for `backoff` and `open_when`,
a nested call. The checker flattens a call into dotted parameters (`backoff.initial`), so axes
inside a call (`initial in [20ms, 40ms]`) become ordinary client axes.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..lang.types import Bound, ParamDef, ParamType
from ..lang.units import Value

MS = 1_000_000


def _param(name: str, base: str, *bounds: tuple[str, Value], default: Value | None = None,
           optional: bool = False, doc: str = "") -> ParamDef:
    ptype = ParamType(base, (), tuple(Bound(op, value) for op, value in bounds))
    return ParamDef(name, ptype, default, optional, None, None, None, doc)


@dataclass(frozen=True)
class CallParam:
    """A parameter whose value is itself a call to one of `choices`."""

    name: str
    choices: tuple[str, ...]
    default: str | None = None      # a call with no arguments, used when the parameter is left out
    doc: str = ""


@dataclass(frozen=True)
class Signature:
    name: str
    params: tuple[ParamDef | CallParam, ...]   # in positional order
    doc: str = ""
    example: str = ""

    def param(self, name: str) -> ParamDef | CallParam | None:
        return next((p for p in self.params if p.name == name), None)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.params]


_INT_1 = (">=", Value("int", 1))
SIGNATURES: dict[str, Signature] = {s.name: s for s in (
    Signature("retry", (
        _param("attempts", "int", _INT_1, doc="calls in all, the first one included (1 = no retry)"),
        CallParam("backoff", ("none", "constant", "exponential"), default="none",
                  doc="the waits between attempts"),
    ), "a retry", "retry(attempts: 6, backoff: exponential(initial: 20ms, multiplier: 1.5))"),
    Signature("none", (), "no wait between attempts", "none()"),
    Signature("constant", (
        _param("delay", "duration", (">=", Value("duration", Fraction(0)))),
    ), "the same wait before every retry", "constant(50ms)"),
    Signature("exponential", (
        _param("initial", "duration", (">", Value("duration", Fraction(0))), doc="the wait before the first retry"),
        _param("multiplier", "float", (">=", Value("float", Fraction(1))), doc="wait k = initial * multiplier^(k-1)"),
        _param("max", "duration", (">", Value("duration", Fraction(0))), optional=True, doc="the cap of every wait"),
    ), "waits growing by a factor", "exponential(initial: 20ms, multiplier: 1.5)"),
    Signature("circuit_breaker", (
        CallParam("open_when", ("consecutive_failures",), doc="when a closed breaker opens"),
        _param("open_for", "duration", (">=", Value("duration", Fraction(0))), doc="how long it stays open"),
        _param("half_open_permits", "int", _INT_1, default=Value("int", 1),
               doc="probe calls let through after open_for; a failed probe opens it again"),
    ), "a circuit breaker",
        "circuit_breaker(open_when: consecutive_failures(2), open_for: 40ms, half_open_permits: 1)"),
    Signature("consecutive_failures", (
        _param("count", "int", _INT_1),
    ), "opens after this many failed calls in a row", "consecutive_failures(2)"),
    Signature("timeout", (
        _param("after", "duration", (">", Value("duration", Fraction(0))),
               doc="a call still running this long fails, and its request is cancelled"),
    ), "a timeout: composed inside a retry it bounds each attempt, outside it the whole call", "timeout(after: 100ms)"),
    Signature("bulkhead", (
        _param("max_concurrent", "int", _INT_1, doc="calls admitted at once"),
        _param("max_wait", "duration", (">=", Value("duration", Fraction(0))), default=Value("duration", Fraction(0)),
               doc="how long a call beyond them waits for a place before it is refused"),
    ), "a bulkhead (it limits the calls that share it: `share = client`)", "bulkhead(max_concurrent: 10, max_wait: 0ms)"),
)}

# The signatures that are whole pattern values (what `use` and `let` take).
PATTERN_SIGNATURES = ("retry", "circuit_breaker", "timeout", "bulkhead")
