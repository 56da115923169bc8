"""The client-side sidecar Envoy of an `istio` client: Istio's policies as the Envoy config Istio's
control plane would give the sidecar (docs/library-semantics.md, section istio).

The bootstrap is fixed for a run (listener, admin port, where the dynamic resources live); what a
configuration changes (the route's retry policy and timeout, the cluster's circuit breakers and
outlier detection) comes from two files Envoy watches, rds.json and cds.json, so switching
configurations is a file update, not a restart (bench/sidecar_switch.py measures both).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..clients.protocol import SIDECAR_FLAGS_HEADER
from ..libraries.composition import BASELINE, policies_of
from ..libraries.istio import DEFAULT_ATTEMPTS, UNLIMITED, default_retry_on, enforced_policies
from .sidecar_filters import discovered_filters, inline_filters, local_reply_config

ROUTE_NAME = "outbound"
CLUSTER_NAME = "upstream"
STAT_PREFIX = "outbound"
# Every reply the sidecar sends carries Envoy's response flags (UO: circuit broken by a pool limit,
# UT: timed out, UH: no healthy upstream, URX: retries exhausted), so the mesh client can tell a
# sidecar's own 503 from the target's without guessing from bodies.
FLAGS_HEADER = SIDECAR_FLAGS_HEADER
CONNECT_TIMEOUT = "10s"             # Istio's default tcp.connectTimeout
HOST_SELECTION_ATTEMPTS = 5         # Istio's default: retry on another host where there is one
OUTLIER_DEFAULTS = {"consecutive5xxErrors": 5, "interval": 10_000, "baseEjectionTime": 30_000,
                    "minHealthPercent": 0}
# Istio's retryBudget when a field is unset (applyRetryBudget): 20% and a floor of 3 retries; a
# minRetryConcurrency of 0 is unset there too
RETRY_BUDGET_DEFAULTS = {"percent": 20.0, "minRetryConcurrency": 3}

FAULT_FILTER_NAME = "envoy.filters.http.fault"
FAULT_TYPE = "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"
# with no fault of its own: only what a route's per-filter config sets is injected
FAULT_FILTER = {"name": FAULT_FILTER_NAME, "typed_config": {"@type": FAULT_TYPE}}
ROUTER = {"name": "envoy.filters.http.router",
          "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}
HCM_TYPE = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
HTTP_OPTIONS_TYPE = "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions"


@dataclass(frozen=True)
class SidecarAddresses:
    listen_port: int
    admin_port: int
    upstream_host: str              # the fault proxy, which the sidecar sends every request to
    upstream_port: int
    bind_host: str = "127.0.0.1"


def _duration(ms: int) -> str:
    return f"{ms / 1000:.3f}s"


def _file_source(path: str) -> dict:
    return {"path_config_source": {"path": path}, "resource_api_version": "V3"}


def sidecar_bootstrap(addresses: SidecarAddresses, rds_path: str, cds_path: str, node_id: str = "rbl-sidecar",
                      faults: bool = False, filters_dir: str | None = None) -> dict:
    """The bootstrap: an outbound listener whose route comes from `rds_path`, clusters from `cds_path`;
    with `filters_dir`, Envoy's adaptive concurrency and admission control filters first, configured
    from their files there (sidecar_filters.py); with `faults`, Envoy's fault filter before the router,
    which a route's own fault configures (route_fault: a fault Istio's VirtualService places on the
    calls of its host)."""
    filters = discovered_filters(filters_dir) if filters_dir else []
    manager = {"@type": HCM_TYPE, "stat_prefix": STAT_PREFIX,
               "rds": {"route_config_name": ROUTE_NAME, "config_source": _file_source(rds_path)},
               "http_filters": filters + ([FAULT_FILTER, ROUTER] if faults else [ROUTER]),
               "local_reply_config": local_reply_config(FLAGS_HEADER)}
    listener = {"name": ROUTE_NAME,
                "address": {"socket_address": {"address": addresses.bind_host, "port_value": addresses.listen_port}},
                "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager",
                                                "typed_config": manager}]}]}
    return {"node": {"id": node_id, "cluster": "rbl"},
            "admin": {"address": {"socket_address": {"address": addresses.bind_host,
                                                     "port_value": addresses.admin_port}}},
            "dynamic_resources": {"cds_config": _file_source(cds_path)},
            "static_resources": {"listeners": [listener]}}


def static_bootstrap(addresses: SidecarAddresses, pattern: str, config: dict, node_id: str = "rbl-sidecar",
                     release: str | None = None) -> dict:
    """One configuration's sidecar as a self-contained bootstrap (route and cluster inline): what
    the file-driven sidecar runs for it, in the form Envoy's validation and a restart take."""
    route = {key: value for key, value in route_configuration(pattern, config, release).items() if key != "@type"}
    upstream = {key: value for key, value in cluster(pattern, config, addresses).items() if key != "@type"}
    bootstrap = sidecar_bootstrap(addresses, "unused", "unused", node_id)
    del bootstrap["dynamic_resources"]
    manager = bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    del manager["rds"]
    manager["route_config"] = route
    manager["http_filters"][:0] = inline_filters(policies_of(pattern, config))
    bootstrap["static_resources"]["clusters"] = [upstream]
    return bootstrap


def _retry_policy(retry: dict | None, release: str | None = None) -> dict | None:
    """HTTPRetry as Istio `release` translates it (None: today's); None means no retries."""
    attempts = DEFAULT_ATTEMPTS if retry is None else retry.get("attempts", DEFAULT_ATTEMPTS)
    if attempts == 0:
        return None
    tokens = [t.strip() for t in ((retry or {}).get("retryOn") or default_retry_on(release)).split(",") if t.strip()]
    statuses = [int(t) for t in tokens if t.isascii() and t.isdigit()]     # str.isdigit alone takes "²"
    conditions = [t for t in tokens if not (t.isascii() and t.isdigit())]
    if statuses and "retriable-status-codes" not in conditions:
        conditions.append("retriable-status-codes")   # Istio adds it for a status in retryOn
    policy = {"retry_on": ",".join(conditions), "num_retries": attempts,
              "retry_host_predicate": [{"name": "envoy.retry_host_predicates.previous_hosts", "typed_config": {
                  "@type": "type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"}}],
              "host_selection_retry_max_attempts": HOST_SELECTION_ATTEMPTS}
    if statuses:
        policy["retriable_status_codes"] = statuses
    if retry is not None and "perTryTimeout" in retry:
        policy["per_try_timeout"] = _duration(retry["perTryTimeout"])
    if retry is not None and "backoff" in retry:         # Istio sets the base only; the cap stays 10 x base
        policy["retry_back_off"] = {"base_interval": _duration(retry["backoff"])}
    return policy


def route_configuration(pattern: str, config: dict, release: str | None = None) -> dict:
    """The VirtualService part: the route's retry policy and timeout (Istio `release`'s defaults)."""
    route = route_for(policies_of(pattern, config), CLUSTER_NAME, baseline=pattern == BASELINE, release=release)
    return route_configuration_of([{"name": "all", "domains": ["*"],
                                    "routes": [{"match": {"prefix": "/"}, "route": route}]}])


def route_configuration_of(virtual_hosts: list[dict]) -> dict:
    """A RouteConfiguration of these virtual hosts, every reply carrying Envoy's response flags."""
    return {"@type": "type.googleapis.com/envoy.config.route.v3.RouteConfiguration", "name": ROUTE_NAME,
            "response_headers_to_add": [{"header": {"key": FLAGS_HEADER, "value": "%RESPONSE_FLAGS%"}}],
            "virtual_hosts": virtual_hosts}


def route_for(policies: dict[str, dict], cluster_name: str, baseline: bool = False,
              release: str | None = None) -> dict:
    """A route to `cluster_name` under these policies (policies_of's result): retries and timeout.
    No retry policy among them: Istio `release`'s default retry (none at all for the baseline)."""
    policies = enforced_policies(policies)        # a controller's policy: as its current value holds it
    retry = _retry_policy(policies.get("retry", {"attempts": 0} if baseline else None), release)
    timeout = policies.get("timeout", {}).get("timeout")
    route = {"cluster": cluster_name, "timeout": _duration(timeout) if timeout else "0s"}
    if retry is not None:
        route["retry_policy"] = retry
    return route


def route_fault(fault: dict) -> dict:
    """A plan's fault record as a route's fault filter config (Istio's HTTPFaultInjection: a delay, or an
    abort, on a share of the calls; percentages in millionths, as Istio writes them)."""
    share = {"numerator": round(fault["rate"] * 10_000), "denominator": "MILLION"}
    if fault["kind"] == "abort":
        body = {"abort": {"http_status": fault["status"], "percentage": share}}
    else:
        body = {"delay": {"fixed_delay": _duration(fault["duration_ms"]), "percentage": share}}
    return {FAULT_FILTER_NAME: {"@type": FAULT_TYPE, **body}}


def _limit(pool: dict, name: str) -> int:
    # Istio sets a threshold only for a value above 0; otherwise its default, no limit
    return pool.get(name) or UNLIMITED


def cluster(pattern: str, config: dict, addresses: SidecarAddresses) -> dict:
    """The DestinationRule part: connection-pool limits as circuit breakers, outlier detection."""
    return cluster_for(policies_of(pattern, config), CLUSTER_NAME,
                       [(addresses.upstream_host, addresses.upstream_port)])


def cluster_for(policies: dict[str, dict], name: str, endpoints: list[tuple[str, int]],
                lb_policy: str | None = None) -> dict:
    """A cluster of these endpoints under these policies: pool limits as circuit breakers, outlier
    detection; `lb_policy` as Envoy names it (unset: Envoy's round robin)."""
    policies = enforced_policies(policies)
    pool = policies.get("circuit_breaker", {})
    result = {"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": name,
              "type": "STATIC", "connect_timeout": CONNECT_TIMEOUT,
              "circuit_breakers": {"thresholds": [{
                  "max_connections": _limit(pool, "maxConnections"),
                  "max_pending_requests": _limit(pool, "http1MaxPendingRequests"),
                  "max_requests": _limit(pool, "http2MaxRequests"),
                  "max_retries": _limit(pool, "maxRetries"), "track_remaining": True,
                  **_retry_budget(policies.get("retry_budget"))}]},
              "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [
                  {"endpoint": {"address": {"socket_address": {"address": host, "port_value": port}}}}
                  for host, port in endpoints]}]}}
    if lb_policy is not None:
        result["lb_policy"] = lb_policy
    if pool.get("maxRequestsPerConnection"):
        result["typed_extension_protocol_options"] = {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
            "@type": HTTP_OPTIONS_TYPE,
            "common_http_protocol_options": {"max_requests_per_connection": pool["maxRequestsPerConnection"]},
            "explicit_http_config": {"http_protocol_options": {}}}}
    if "outlier_detection" in policies:
        result["outlier_detection"], panic = _outlier_detection(policies["outlier_detection"])
        result["common_lb_config"] = {"healthy_panic_threshold": {"value": panic}}
    return result


def _retry_budget(given: dict | None) -> dict:
    """TrafficPolicy.retryBudget as Istio translates it: a threshold's retry_budget, which Envoy then
    enforces in place of max_retries ({} without one)."""
    if given is None:
        return {}
    budget = {"budget_percent": {"value": float(given.get("percent", RETRY_BUDGET_DEFAULTS["percent"]))},
              "min_retry_concurrency": given.get("minRetryConcurrency") or RETRY_BUDGET_DEFAULTS["minRetryConcurrency"]}
    if given.get("budgetInterval"):
        budget["budget_interval"] = _duration(given["budgetInterval"])
    return {"retry_budget": budget}


def _outlier_detection(given: dict) -> tuple[dict, int]:
    """OutlierDetection as Istio translates it, and the panic threshold minHealthPercent sets."""
    values = {**OUTLIER_DEFAULTS, **given}
    detection = {"consecutive_5xx": values["consecutive5xxErrors"],
                 "enforcing_consecutive_5xx": 100 if values["consecutive5xxErrors"] > 0 else 0,
                 "interval": _duration(values["interval"]),
                 "base_ejection_time": _duration(values["baseEjectionTime"]),
                 "enforcing_success_rate": 0}
    if values.get("maxEjectionPercent"):                 # unset or 0: Envoy's own 10%, as Istio leaves it
        detection["max_ejection_percent"] = values["maxEjectionPercent"]
    gateway = values.get("consecutiveGatewayErrors")
    if gateway:
        detection["consecutive_gateway_failure"] = gateway
        detection["enforcing_consecutive_gateway_failure"] = 100
    return detection, values["minHealthPercent"]


def discovery_response(resource: dict, version: str) -> dict:
    """A file Envoy's path config source reads: one resource at a version."""
    return {"version_info": version, "resources": [resource]}
