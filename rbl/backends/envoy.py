"""The Envoy bootstrap for the fault proxy role (DESIGN 5.1), as `rbl run --proxy envoy` uses it.

What the runner relies on, and why (../shared/reference/library-semantics.md section 4):
  - both an abort and a delay block at 0%: the current fault filter ignores the runtime abort
    key when no abort block is configured;
  - a layered runtime ending in an admin layer, or /runtime_modify answers 503;
  - stat_prefix `ingress_http`, so the counters have the names the built-in proxy uses;
  - the route timeout disabled: a delay fault must not turn into Envoy's own 504 after 15 s.
The file is JSON, which Envoy reads as YAML. Issue 3 moves this to a jinja2 template shared with
the compose backend and validates it against Envoy's API protos; until then, nothing here has
been run against a real Envoy binary (none exists on the development machines).
"""

from __future__ import annotations

import json
from pathlib import Path

HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
FAULT = "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"
ROUTER = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
ZERO_PERCENT = {"numerator": 0, "denominator": "HUNDRED"}
UNLIMITED = 1_000_000


def _address(host: str, port: int) -> dict:
    return {"socket_address": {"address": host, "port_value": port}}


def envoy_bootstrap(listen_port: int, admin_port: int, upstream_host: str, upstream_port: int,
                    bind_host: str = "127.0.0.1") -> dict:
    manager = {
        "@type": HCM,
        "stat_prefix": "ingress_http",
        "route_config": {"name": "target", "virtual_hosts": [{
            "name": "target", "domains": ["*"],
            "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "target", "timeout": "0s"}}],
        }]},
        "http_filters": [
            {"name": "envoy.filters.http.fault", "typed_config": {
                "@type": FAULT,
                "abort": {"http_status": 503, "percentage": ZERO_PERCENT},
                "delay": {"fixed_delay": "0.001s", "percentage": ZERO_PERCENT},
            }},
            {"name": "envoy.filters.http.router", "typed_config": {"@type": ROUTER}},
        ],
    }
    return {
        "admin": {"address": _address(bind_host, admin_port)},
        "layered_runtime": {"layers": [{"name": "rbl_admin", "admin_layer": {}}]},
        "static_resources": {
            "listeners": [{
                "name": "ingress",
                "address": _address(bind_host, listen_port),
                "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager",
                                                "typed_config": manager}]}],
            }],
            "clusters": [{
                "name": "target",
                "type": "STATIC",
                "connect_timeout": "1s",
                # Envoy's circuit breakers are concurrency limits; keep them out of the experiment
                "circuit_breakers": {"thresholds": [{"max_connections": UNLIMITED, "max_pending_requests": UNLIMITED,
                                                     "max_requests": UNLIMITED, "max_retries": UNLIMITED}]},
                "load_assignment": {"cluster_name": "target", "endpoints": [{"lb_endpoints": [
                    {"endpoint": {"address": _address(upstream_host, upstream_port)}}]}]},
            }],
        },
    }


def write_envoy_config(path: Path, **ports) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(envoy_bootstrap(**ports), indent=2) + "\n", encoding="utf-8")
    return path
