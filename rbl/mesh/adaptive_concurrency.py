"""Envoy's adaptive concurrency filter in a sidecar (the catalogue's istio.adaptive_concurrency;
docs/library-semantics.md, section istio): a concurrency limit that Envoy's gradient controller
retunes from sampled latencies. Istio has no API for it (a mesh installs it with an EnvoyFilter).

The filter is an HTTP filter of the sidecar's listener, which rbl's sidecars fix for a run, so its
configuration comes from a file Envoy watches (extension config discovery, ECDS) beside rds.json and
cds.json: every sidecar has the filter, switched off unless the configuration has the policy. A
switch writes a new filter config, whose runtime key carries the file's version, so Envoy builds a
fresh controller for every configuration and round (an unchanged config would keep the last
round's limit and minimum RTT).

A request the filter refuses is a local reply with no response flag: the sidecar's flags header then
carries Envoy's response code details, `reached_concurrency_limit`, which rbl counts as a sidecar
refusal (circuit broken), as it counts a connection-pool limit's UO.
"""

from __future__ import annotations

from ..clients.protocol import SIDECAR_REFUSAL_DETAILS

FILTER_NAME = "adaptive_concurrency"        # the filter's ECDS resource name, in every sidecar
FILTER_TYPE = "type.googleapis.com/envoy.extensions.filters.http.adaptive_concurrency.v3.AdaptiveConcurrency"
EXTENSION_CONFIG_TYPE = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"
CEL_FILTER_TYPE = "type.googleapis.com/envoy.extensions.access_loggers.filters.cel.v3.ExpressionFilter"
REFUSED_DETAILS = SIDECAR_REFUSAL_DETAILS     # Envoy's response code details of the filter's refusal
POLICY = "adaptive_concurrency"
# the stats of the ECDS subscription: a switch waits for the update and fails on a rejection
UPDATE_STAT = f"extension_config_discovery.http_filter.{FILTER_NAME}.update_success"
REJECTION_STAT = f"extension_config_discovery.http_filter.{FILTER_NAME}.update_rejected"
# the gradient controller's gauge, for the conformance suite and the report
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


def filter_config(policy: dict | None, generation: int) -> dict:
    """The filter's typed config for a configuration's adaptive_concurrency policy (None: off).
    `generation` makes each switch's config distinct, so that Envoy starts a fresh controller."""
    enabled = policy is not None
    values = {**DEFAULTS, **(policy or {})}
    if not enabled:
        values["concurrencyUpdateInterval"] = values["minRttCalcInterval"] = IDLE_INTERVAL_MS
    limits = {"max_concurrency_limit": values["maxConcurrencyLimit"],
              "concurrency_update_interval": _duration(values["concurrencyUpdateInterval"])}
    if "minConcurrencyLimit" in values:
        limits["min_concurrency_limit"] = values["minConcurrencyLimit"]
    return {"@type": FILTER_TYPE,
            "gradient_controller_config": {
                "sample_aggregate_percentile": {"value": float(values["sampleAggregatePercentile"])},
                "concurrency_limit_params": limits,
                "min_rtt_calc_params": {"interval": _duration(values["minRttCalcInterval"]),
                                        "request_count": values["minRttRequestCount"],
                                        "jitter": {"value": float(values["minRttJitter"])},
                                        "min_concurrency": values["minConcurrency"],
                                        "buffer": {"value": float(values["minRttBuffer"])}}},
            "enabled": {"default_value": enabled, "runtime_key": f"rbl.adaptive_concurrency.g{generation}.enabled"}}


def filter_resource(policy: dict | None, generation: int) -> dict:
    """The ECDS resource the sidecar's filter reads: filter_config under the filter's name."""
    return {"@type": EXTENSION_CONFIG_TYPE, "name": FILTER_NAME, "typed_config": filter_config(policy, generation)}


def discovered_filter(ecds_path: str) -> dict:
    """The listener's filter, its config read from `ecds_path` (off until the file says otherwise)."""
    return {"name": FILTER_NAME, "config_discovery": {
        "config_source": {"path_config_source": {"path": ecds_path}, "resource_api_version": "V3"},
        "default_config": filter_config(None, 0), "apply_default_config_without_warming": True,
        "type_urls": [FILTER_TYPE]}}


def inline_filter(policy: dict) -> dict:
    """The listener's filter with one configuration's policy written in (a self-contained bootstrap)."""
    return {"name": FILTER_NAME, "typed_config": filter_config(policy, 0)}


def local_reply_config(flags_header: str) -> dict:
    """The connection manager's local replies: a refusal of the filter carries its response code
    details in the flags header (Envoy sets no flag for it), in place of the route's empty flags."""
    refused = {"extension_filter": {"name": "envoy.access_loggers.extension_filters.cel", "typed_config": {
        "@type": CEL_FILTER_TYPE, "expression": f"response.code_details == '{REFUSED_DETAILS}'"}}}
    return {"mappers": [{"filter": refused, "headers_to_add": [{
        "header": {"key": flags_header, "value": "%RESPONSE_CODE_DETAILS%"},
        "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}]}]}
