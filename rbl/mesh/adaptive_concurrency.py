"""Envoy's adaptive concurrency filter (the catalogue's istio.adaptive_concurrency; docs/library-
semantics.md, section istio): a concurrency limit that Envoy's gradient controller retunes from
sampled latencies. Istio has no API for it (a mesh installs it with an EnvoyFilter). How a sidecar
carries it: sidecar_filters.py.
"""

from __future__ import annotations

from ..clients.protocol import SIDECAR_REFUSAL_DETAILS

POLICY = "adaptive_concurrency"
TYPE_URL = "type.googleapis.com/envoy.extensions.filters.http.adaptive_concurrency.v3.AdaptiveConcurrency"
REFUSED_DETAILS = SIDECAR_REFUSAL_DETAILS["adaptive_concurrency"]   # Envoy's details of its 503
# the gradient controller's gauge, for the conformance suite
LIMIT_STAT = "adaptive_concurrency.gradient_controller.concurrency_limit"

# The catalogue's defaults, Envoy's where Envoy has one; concurrencyUpdateInterval and
# minRttCalcInterval are required by Envoy, and rbl's defaults are its documentation's example's.
DEFAULTS = {"concurrencyUpdateInterval": 100, "sampleAggregatePercentile": 50, "maxConcurrencyLimit": 1000,
            "minRttCalcInterval": 60_000, "minRttRequestCount": 50, "minRttJitter": 15, "minConcurrency": 3,
            "minRttBuffer": 25}
# switched off, the filter passes every request; its controller's timers then tick once an hour
IDLE_INTERVAL_MS = 3_600_000


def _duration(ms: int) -> str:
    return f"{ms / 1000:.3f}s"


def typed_config(policy: dict | None, enabled: dict) -> dict:
    """The filter's config for a configuration's policy (None: off, every request passed);
    `enabled` is the runtime flag sidecar_filters.py gives it."""
    values = {**DEFAULTS, **(policy or {})}
    if policy is None:
        values["concurrencyUpdateInterval"] = values["minRttCalcInterval"] = IDLE_INTERVAL_MS
    limits = {"max_concurrency_limit": values["maxConcurrencyLimit"],
              "concurrency_update_interval": _duration(values["concurrencyUpdateInterval"])}
    if "minConcurrencyLimit" in values:
        limits["min_concurrency_limit"] = values["minConcurrencyLimit"]
    return {"@type": TYPE_URL,
            "gradient_controller_config": {
                "sample_aggregate_percentile": {"value": float(values["sampleAggregatePercentile"])},
                "concurrency_limit_params": limits,
                "min_rtt_calc_params": {"interval": _duration(values["minRttCalcInterval"]),
                                        "request_count": values["minRttRequestCount"],
                                        "jitter": {"value": float(values["minRttJitter"])},
                                        "min_concurrency": values["minConcurrency"],
                                        "buffer": {"value": float(values["minRttBuffer"])}}},
            "enabled": enabled}
