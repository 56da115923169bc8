"""A mesh client's sidecar container: the files `rbl compile` writes for it (Envoy's bootstrap and
a first route and cluster) and the Sidecar the docker backend drives it through from the host.

The files live in envoy/sidecar-LIBRARY/ (RUN_DIR/deployment/ for a run), bind-mounted at
/etc/rbl/sidecar; the bootstrap names the container's paths. The runner switches configurations
as on the local backend (rbl/mesh/sidecar.py): it renames new rds.json, cds.json and ecds-*.json
into that directory on the host, and Envoy's file watch inside the container sees the rename
through the bind mount (a watch on the directory, which a bind mount shares; measured:
bench/sidecar_bind_mount.py).
"""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

from .deployment import SIDECAR_DIR_IN_CONTAINER, Deployment, Service, sidecar_directory
from ...mesh.sidecar_filters import FILTERS, filter_resource
from ...mesh.sidecar import Sidecar
from ...mesh.sidecar_config import SidecarAddresses, cluster, discovery_response, route_configuration, sidecar_bootstrap

FIRST_VERSION = 1


def upstream_of(deployment: Deployment) -> tuple[str, int]:
    """The fault proxy's data address as the client's network namespace reaches it."""
    layout = deployment.layout
    return ("127.0.0.1" if layout.host_network else deployment.proxy_name), layout.proxy_port


def container_addresses(deployment: Deployment, library: str) -> SidecarAddresses:
    """The sidecar's addresses inside its container: what its bootstrap says."""
    layout = deployment.layout
    listen, admin = layout.sidecar_port(deployment.client_index(library))
    host, port = upstream_of(deployment)
    return SidecarAddresses(listen, admin, host, port, layout.bind_host)


def _upstream_cluster(pattern: str, config: dict, addresses: SidecarAddresses) -> dict:
    """The configuration's cluster. Envoy's STATIC cluster takes only an IP address; on a compose
    network the fault proxy has a name (`target`), which the sidecar then resolves itself, as
    Istio's sidecar does for a DNS ServiceEntry (STRICT_DNS). The runner writes the target's
    address instead, as istiod sends endpoints' addresses (DockerServices.start_sidecar)."""
    resource = cluster(pattern, config, addresses)
    try:
        ipaddress.ip_address(addresses.upstream_host)
    except ValueError:
        resource["type"] = "STRICT_DNS"
        resource["dns_lookup_family"] = "V4_ONLY"
    return resource


def _json(document: dict) -> str:
    return json.dumps(document, indent=1)


def sidecar_files(deployment: Deployment) -> dict[str, str]:
    """Each sidecar's bootstrap and first (baseline) route, cluster and filter, by path in the compiled directory."""
    files = {}
    for service in deployment.services:
        if service.role != "sidecar":
            continue
        addresses = container_addresses(deployment, service.library)
        directory = sidecar_directory(service.library)
        version = str(FIRST_VERSION)
        files[f"{directory}/envoy.json"] = _json(sidecar_bootstrap(
            addresses, f"{SIDECAR_DIR_IN_CONTAINER}/rds.json", f"{SIDECAR_DIR_IN_CONTAINER}/cds.json",
            node_id=f"{deployment.project}.{service.name}", filters_dir=SIDECAR_DIR_IN_CONTAINER))
        files[f"{directory}/rds.json"] = _json(discovery_response(route_configuration("baseline", {}), version))
        files[f"{directory}/cds.json"] = _json(discovery_response(_upstream_cluster("baseline", {}, addresses),
                                                                  version))
        for sidecar_filter in FILTERS:
            files[f"{directory}/{sidecar_filter.file}"] = _json(discovery_response(
                filter_resource(sidecar_filter, None, FIRST_VERSION), version))
    return files


def host_sidecar(deployment_dir: Path, deployment: Deployment, service: Service, admin_port: int,
                 upstream_host: str, istio_release: str | None = None) -> Sidecar:
    """The Sidecar the runner drives: the files under `deployment_dir` (what the container has
    mounted), the admin API on the host's `admin_port`, the fault proxy at `upstream_host` (an
    address, so its cluster is the local backend's STATIC one); Istio `istio_release`'s defaults."""
    inside = container_addresses(deployment, service.library)
    sidecar = Sidecar(deployment_dir / sidecar_directory(service.library),
                      SidecarAddresses(inside.listen_port, admin_port, upstream_host, inside.upstream_port,
                                       "127.0.0.1"), istio_release)
    sidecar.version = FIRST_VERSION            # the next configuration is a new version of the files
    return sidecar
