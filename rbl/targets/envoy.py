"""The Envoy bootstrap of the fault proxy role (the admin API of rbl/dataplane/fault_proxy.py), rendered from templates/envoy.yaml.j2.

Used by `rbl compile` (the target container's config) and by `rbl run --proxy envoy` (loopback).
The template says what the runner relies on; tests/test_envoy_config.py validates the output
against Envoy's API definitions (tools/artifact-check).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from ..templating import render

DEFAULT_ABORT_STATUS = 503
DEFAULT_DELAY_MS = 1        # Envoy requires a fixed delay > 0 even at 0%; the runner sets the real one


@dataclass(frozen=True)
class EnvoyAddresses:
    listen_port: int
    admin_port: int
    upstream_host: str
    upstream_port: int
    bind_host: str = "127.0.0.1"
    more_upstream_ports: tuple[int, ...] = ()    # further target replicas on the same host (round robin)
    more_upstreams: tuple[tuple[str, int], ...] = ()    # further replicas elsewhere: (host or name, port)

    def endpoints(self) -> list[tuple[str, int]]:
        """Every replica's (host, port), in round-robin order."""
        return [(self.upstream_host, self.upstream_port), *((self.upstream_host, port) for port in
                                                            self.more_upstream_ports), *self.more_upstreams]


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def render_envoy_config(addresses: EnvoyAddresses, node_id: str = "rbl", fault: dict | None = None) -> str:
    """The bootstrap as YAML text; `fault` (the plan's) only sets the configured status and delay
    the 0% blocks carry."""
    fault = fault or {}
    return render("envoy.yaml.j2", node_id=node_id, bind_host=addresses.bind_host,
                  listen_port=addresses.listen_port, admin_port=addresses.admin_port,
                  endpoints=addresses.endpoints(),
                  # a STATIC cluster takes only addresses; replicas named by a compose network are
                  # resolved by Envoy (STRICT_DNS: every name's address is an endpoint)
                  resolve=not all(_is_address(host) for host, _ in addresses.endpoints()),
                  abort_status=fault.get("status", DEFAULT_ABORT_STATUS),
                  delay_ms=fault.get("duration_ms") or DEFAULT_DELAY_MS)


def write_envoy_config(path: Path, addresses: EnvoyAddresses, **kwargs) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_envoy_config(addresses, **kwargs), encoding="utf-8")
    return path
