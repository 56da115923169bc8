"""A composed client's configuration split into its policies (pure logic: only the standard
library, so the plan reader, the runner and the backends all use this one rule).

A client of a library with a `composition` may combine several patterns,
`client istio.retry + circuit_breaker {...}`; the plan then names its pattern
"retry+circuit_breaker" and qualifies its configuration's keys by the pattern they belong to
("retry.attempts"). A single-pattern client keeps plain keys. `baseline` is no policy at all.
With `composition = "nested"` the written order is the nesting, outermost first, and the client
service applies the patterns exactly so; with "policies" the library fixes the order they act in.
"""

from __future__ import annotations

SEPARATOR = "+"
BASELINE = "baseline"


def pattern_names(pattern: str) -> list[str]:
    """The patterns a client combines, in the written order ("retry+timeout" -> [retry, timeout])."""
    names = pattern.split(SEPARATOR)
    if not all(names):
        raise ValueError(f"pattern {pattern!r} has an empty part")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"pattern {pattern!r} names {', '.join(repeated)} more than once")
    return names


def nesting(pattern: str) -> str:
    """How a nested composition wraps the call: "retry+circuit_breaker+timeout" ->
    "retry(circuit_breaker(timeout(call)))" (the written order, outermost first)."""
    names = pattern_names(pattern)
    return "(".join(names) + "(call" + ")" * len(names)


def policies_of(pattern: str, config: dict) -> dict[str, dict]:
    """{policy: its parameters} of one configuration, in the written order; baseline adds none.

    "retry+circuit_breaker", {"retry.attempts": 2, "circuit_breaker.http2MaxRequests": 20}
    -> {"retry": {"attempts": 2}, "circuit_breaker": {"http2MaxRequests": 20}};
    "retry", {"attempts": 2} -> {"retry": {"attempts": 2}}; "baseline", {} -> {}.
    Raises ValueError for a key that names no pattern of the client (or a baseline with parameters).
    """
    names = pattern_names(pattern)
    if len(names) == 1:
        if names[0] == BASELINE:
            if config:
                raise ValueError(f"baseline takes no parameters, got {', '.join(map(str, config))}")
            return {}
        return {names[0]: dict(config)}
    policies: dict[str, dict] = {name: {} for name in names if name != BASELINE}
    for key, value in config.items():
        policy, dot, parameter = str(key).partition(".")
        if not dot or not parameter or policy not in policies:
            raise ValueError(f"parameter {key!r} names none of {', '.join(policies) or 'no policy'} "
                             f"(a combined client's parameters are written POLICY.PARAMETER)")
        policies[policy][parameter] = value
    return policies
