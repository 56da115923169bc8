"""Patterns whose concurrency limit moves by itself while the load runs (an adaptive limiter in a
library, Envoy's adaptive concurrency filter in a sidecar). rbl cannot set such a limit, only read it:
every load window of an open-loop round the runner reads it (the sidecar's gauge, a library client's
GET /limits) and records it beside the window's measurements, as it records a controller's decisions.
Each is named by the algorithm that moves it."""

from __future__ import annotations

from .composition import pattern_names

# (library, pattern) -> the algorithm recorded with its limit (controllers.jsonl's "algorithm")
SELF_LIMITING = {
    ("istio", "adaptive_concurrency"): "envoy-gradient",
    ("failsafe", "adaptive_limiter"): "failsafe-adaptivelimiter",
    ("concurrency_limits", "vegas"): "netflix-vegas",
    ("concurrency_limits", "gradient2"): "netflix-gradient2",
    ("concurrency_limits", "aimd"): "netflix-aimd",
}
SELF_LIMITING_PATTERNS = frozenset(pattern for _, pattern in SELF_LIMITING)


def self_limiting_pattern(library: str, pattern: str) -> str | None:
    """The part of a (possibly composed) pattern whose limit moves by itself, if any."""
    return next((name for name in pattern_names(pattern) if (library, name) in SELF_LIMITING), None)
