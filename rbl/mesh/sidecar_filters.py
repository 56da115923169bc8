"""Envoy's HTTP filters in a sidecar that Istio has no API for (a mesh installs them with an
EnvoyFilter): adaptive concurrency and admission control (adaptive_concurrency.py,
admission_control.py; the catalogue's istio.adaptive_concurrency and istio.admission_control).

A filter belongs to the sidecar's listener, which rbl's sidecars fix for a run, so its configuration
comes from a file Envoy watches (extension config discovery, ECDS) beside rds.json and cds.json:
every sidecar has both filters, each switched off unless the configuration has its policy. A switch
writes every filter's config with a runtime key that carries the file's version, so that Envoy
builds fresh state for every configuration and round (an unchanged config would keep the last
round's limit, minimum RTT or success rate).

A request a filter refuses is a local reply with no response flag: the sidecar's flags header then
carries Envoy's response code details (clients/protocol.py, SIDECAR_REFUSAL_DETAILS), which rbl
counts as a sidecar refusal (circuit broken), as it counts a connection-pool limit's UO.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import adaptive_concurrency, admission_control

EXTENSION_CONFIG_TYPE = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"
CEL_FILTER_TYPE = "type.googleapis.com/envoy.extensions.access_loggers.filters.cel.v3.ExpressionFilter"


@dataclass(frozen=True)
class SidecarFilter:
    policy: str                                   # the catalogue's pattern, and the filter's ECDS name
    type_url: str
    refused_details: str                          # Envoy's response code details of its refusal
    typed_config: Callable[[dict | None, dict], dict]

    @property
    def file(self) -> str:
        """Its config's file in the sidecar's directory."""
        return f"ecds-{self.policy.replace('_', '-')}.json"

    @property
    def update_stat(self) -> str:
        return f"extension_config_discovery.http_filter.{self.policy}.update_success"

    @property
    def rejection_stat(self) -> str:
        return f"extension_config_discovery.http_filter.{self.policy}.update_rejected"


FILTERS = (
    SidecarFilter(adaptive_concurrency.POLICY, adaptive_concurrency.TYPE_URL, adaptive_concurrency.REFUSED_DETAILS,
                  adaptive_concurrency.typed_config),
    SidecarFilter(admission_control.POLICY, admission_control.TYPE_URL, admission_control.REFUSED_DETAILS,
                  admission_control.typed_config),
)
POLICIES = tuple(f.policy for f in FILTERS)


def _enabled(sidecar_filter: SidecarFilter, on: bool, generation: int) -> dict:
    return {"default_value": on, "runtime_key": f"rbl.{sidecar_filter.policy}.g{generation}.enabled"}


def filter_config(sidecar_filter: SidecarFilter, policy: dict | None, generation: int) -> dict:
    """The filter's typed config for a configuration's policy (None: off). `generation` makes each
    switch's config distinct, so that Envoy starts the filter afresh."""
    return sidecar_filter.typed_config(policy, _enabled(sidecar_filter, policy is not None, generation))


def filter_resource(sidecar_filter: SidecarFilter, policy: dict | None, generation: int) -> dict:
    """The ECDS resource the sidecar's filter reads: filter_config under the filter's name."""
    return {"@type": EXTENSION_CONFIG_TYPE, "name": sidecar_filter.policy,
            "typed_config": filter_config(sidecar_filter, policy, generation)}


def discovered_filters(directory: str) -> list[dict]:
    """The listener's filters, each config read from its file under `directory` (off until it says otherwise)."""
    return [{"name": f.policy, "config_discovery": {
        "config_source": {"path_config_source": {"path": f"{directory}/{f.file}"}, "resource_api_version": "V3"},
        "default_config": filter_config(f, None, 0), "apply_default_config_without_warming": True,
        "type_urls": [f.type_url]}} for f in FILTERS]


def inline_filters(policies: dict[str, dict]) -> list[dict]:
    """The listener's filters of the policies a configuration has, written in (a self-contained bootstrap)."""
    return [{"name": f.policy, "typed_config": filter_config(f, policies[f.policy], 0)}
            for f in FILTERS if f.policy in policies]


def local_reply_config(flags_header: str) -> dict:
    """The connection manager's local replies: a filter's refusal carries its response code details
    in the flags header (Envoy sets no flag for it), in place of the route's empty flags."""
    details = " || ".join(f"response.code_details == '{f.refused_details}'" for f in FILTERS)
    refused = {"extension_filter": {"name": "envoy.access_loggers.extension_filters.cel", "typed_config": {
        "@type": CEL_FILTER_TYPE, "expression": details}}}
    return {"mappers": [{"filter": refused, "headers_to_add": [{
        "header": {"key": flags_header, "value": "%RESPONSE_CODE_DETAILS%"},
        "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}]}]}
