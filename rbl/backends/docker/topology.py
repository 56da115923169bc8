"""A topology in containers (rbl/targets/compose/topology_services.py): each replica a container
running rbl-chain under Docker's CPU limit, and each replica of a service that calls others with a
sidecar Envoy container in its network namespace, as a mesh injects one into each pod. The runner
reaches a replica's /rbl/ control on its published CHAIN_PORT and its sidecar's admin API on the
SIDECAR_ADMIN_PORT the replica's container publishes (it owns the namespace); it switches a sidecar's
configuration by renaming files into the directory bind-mounted into it, as for a mesh client's.

Sidecars reach the replicas they call by container name on the run's network (STRICT_DNS clusters,
as the compose file's), so every configuration a sidecar takes is resolved the same way.
"""

from __future__ import annotations

from pathlib import Path

from ...mesh.sidecar import Sidecar
from ...mesh.sidecar_config import SidecarAddresses
from ...targets.compose.deployment import SIDECAR_ADMIN_PORT, SIDECAR_PORT
from ...targets.compose.topology_services import (CHAIN_PORT, FIRST_VERSION, ReplicaContainer, by_dns,
                                                  replica_containers, replica_name)
from ...topology import Topology
from ..net import HOST
from ..topology_control import Replica, TopologyControl


def runner_ports(replica: ReplicaContainer) -> list[int]:
    """The ports a replica's container publishes on loopback for the runner: rbl-chain's, and its
    sidecar's admin API when it has one (the sidecar lives in the replica's namespace)."""
    return [CHAIN_PORT, SIDECAR_ADMIN_PORT] if replica.calls else [CHAIN_PORT]


class ContainerTopology(TopologyControl):
    """The runner's hold on a topology's started containers: `host_ports` maps each replica
    container's name to {container port: published port}; the sidecars' files are under
    `deployment_dir` (RUN_DIR/deployment), where `rbl compile` wrote their first version."""

    def __init__(self, topology: Topology, token: str, deployment_dir: Path, host_ports: dict[str, dict[int, int]],
                 istio_release: str | None = None):
        super().__init__(topology, token, istio_release)
        for container in replica_containers(topology):
            ports = host_ports[container.name]
            self.replicas.setdefault(container.service, []).append(
                Replica(container.service, container.index, ports[CHAIN_PORT], container.cpus))
            if container.calls:
                sidecar = Sidecar(deployment_dir / container.sidecar_directory,
                                  SidecarAddresses(SIDECAR_PORT, ports[SIDECAR_ADMIN_PORT], "127.0.0.1", CHAIN_PORT,
                                                   HOST), istio_release)
                sidecar.version = int(FIRST_VERSION)     # the next configuration is a new version of the files
                self.sidecars.setdefault(container.service, []).append(sidecar)

    def endpoint(self, replica: Replica) -> tuple[str, int]:
        return replica_name(replica.service, replica.index), CHAIN_PORT      # its container's name on the network

    def sidecar_clusters(self, clusters: list[dict]) -> list[dict]:
        return by_dns(clusters)


def describe_topology(topology: Topology, containers: dict) -> str:
    """Each replica container and the CPU limit the engine holds it to (read back from the container)."""
    parts = []
    for replica in replica_containers(topology):
        container = containers[replica.name]
        container.reload()
        limit = container.attrs["HostConfig"].get("NanoCpus") or 0
        sidecar = ", with its sidecar" if replica.calls else ""
        parts.append(f"{replica.name}{sidecar}: " + (f"{limit / 1e9:g} CPU enforced by Docker (NanoCpus {limit})"
                                                     if limit else "no CPU limit"))
    return f"topology, entry {topology.entry}, one container per replica: " + "; ".join(parts)
