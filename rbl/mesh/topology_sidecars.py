"""The sidecar Envoys of a topology's services: what Istio's control plane would give the sidecar of a
service that calls others (docs/topologies.md).

A caller's sidecar has one outbound listener. Its route configuration has a virtual host per called
service, matched by the Host header the service sends (as Istio's sidecar routes by the service's
name), and a cluster per called service whose endpoints are that service's replicas, balanced by
least requests (Istio's default load balancer since 1.14; Envoy's own is round robin). The policies
placed on a called service (its `host`, rbl/libraries/istio.py placed_policies) go on its route and
cluster in every caller's sidecar, as a VirtualService and a DestinationRule for that host do; a
called service no policy is placed on gets Istio's defaults.
"""

from __future__ import annotations

from .sidecar_config import cluster_for, route_configuration_of, route_fault, route_for

ISTIO_LB_POLICY = "LEAST_REQUEST"


def caller_resources(placed: dict[str, dict[str, dict]], endpoints: dict[str, list[tuple[str, int]]],
                     baseline: bool = False, faults: dict[str, dict] | None = None,
                     release: str | None = None) -> tuple[dict, list[dict]]:
    """(RouteConfiguration, clusters) of one caller's sidecar: for each service it calls (the keys of
    `endpoints`, each with its replicas' addresses), the policies placed on that service, and the fault
    injected into calls of it (`faults`: service -> a plan's fault record; the sidecar's fault filter,
    before its router, so a retry in this sidecar never sees it, as Istio documents). Istio `release`'s
    defaults apply (None: today's)."""
    virtual_hosts, clusters = [], []
    for callee, addresses in endpoints.items():
        policies = placed.get(callee, {})
        route = {"match": {"prefix": "/"}, "route": route_for(policies, callee, baseline=baseline, release=release)}
        if faults and callee in faults:
            route["typed_per_filter_config"] = route_fault(faults[callee])
        virtual_hosts.append({"name": callee, "domains": [callee, f"{callee}:*"], "routes": [route]})
        clusters.append(cluster_for(policies, callee, addresses, lb_policy=ISTIO_LB_POLICY))
    return route_configuration_of(virtual_hosts), clusters
