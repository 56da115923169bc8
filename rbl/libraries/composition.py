"""A client's configuration split by policy: a composed client (`istio.retry + circuit_breaker`)
holds one flat configuration with parameters qualified by pattern (`retry.attempts`)."""

from __future__ import annotations

from .catalogue import COMPOSED_SEPARATOR


def policies_of(pattern: str, config: dict) -> dict[str, dict]:
    """Each policy's own parameters: `retry+circuit_breaker`, {"retry.attempts": 2} ->
    {"retry": {"attempts": 2}, "circuit_breaker": {}}; one pattern -> {pattern: config};
    baseline -> {} (no policy)."""
    if pattern == "baseline":
        return {}
    names = pattern.split(COMPOSED_SEPARATOR)
    if len(names) == 1:
        return {pattern: dict(config)}
    policies: dict[str, dict] = {name: {} for name in names}
    for key, value in config.items():
        name, _, parameter = key.partition(".")
        policies.setdefault(name, {})[parameter] = value
    return policies
