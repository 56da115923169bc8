"""A topology in the compose deployment: every replica of every service a container running rbl-chain
(services/chain) under Docker's CPU limit, and beside every replica of a service that calls others a
sidecar Envoy container in that replica's network namespace, as a mesh injects one into each pod. The
fault proxy runs alone in `proxy`, in front of the entry service's replicas, where the load and the
clients reach the topology (docs/topologies.md).

A replica container is named after its service as Kubernetes names the Service (`svc-` + the name,
lower case, `_` as `-`; `-2`, `-3`, ... for the other replicas), and owns its network namespace: the
callers' sidecars reach it by that name on CHAIN_PORT. Its sidecar container joins the namespace, so
the replica calls through it on the loopback (SIDECAR_PORT), routed by Host to a cluster of the
callee's replicas (STRICT_DNS: the sidecar resolves the names, as for Istio's DNS endpoints; least
request, Istio's default). The sidecar starts with Istio's defaults everywhere (rds.json, cds.json in
envoy/sidecar-svc-NAME[-N]/); a configuration's placed policies are new files renamed into place,
as `rbl run` does on the local backend.

The sidecars run Envoy from the target image, which holds it (`--image envoy=none` leaves it out:
then the topology cannot be deployed and the compose file says so).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace

from ...errors import UsageError
from ...libraries.istio import release_of
from ...mesh.sidecar_config import SidecarAddresses, discovery_response, sidecar_bootstrap
from ...mesh.topology_sidecars import caller_resources
from ...topology import Topology, chain_config, kubernetes_service, topology_from_record

CHAIN_IMAGE = "chain"
CHAIN_DOCKERFILE = "chain.Dockerfile"
CHAIN_PORT = 8080
CHAIN_CONFIG_IN_CONTAINER = "/etc/rbl/chain/config.json"
# rbl-chain answers with a token the runner checks; the compose file's own, until a run gives its own
COMPOSE_TOKEN = "rbl-compose"
FIRST_VERSION = "1"
REPLICA_ROLE = "service"                  # a replica's role in the deployment
SERVICE_SIDECAR_ROLE = "service-sidecar"  # its sidecar's (a mesh client's is `sidecar`)


@dataclass(frozen=True)
class ReplicaContainer:
    service: str          # the topology's name for the service
    index: int
    name: str             # the container's (compose service's) name
    cpus: float | None
    calls: bool           # whether it calls others (then it has a sidecar)

    @property
    def sidecar(self) -> str:
        return f"sidecar-{self.name}"

    @property
    def config_file(self) -> str:
        """Its rbl-chain configuration, relative to the compiled directory."""
        return f"topology/{self.name}.json"

    @property
    def sidecar_directory(self) -> str:
        return f"envoy/{self.sidecar}"


def replica_name(service: str, index: int) -> str:
    base = f"svc-{kubernetes_service(service)}"
    return base if index == 0 else f"{base}-{index + 1}"


def replica_containers(topology: Topology) -> list[ReplicaContainer]:
    """Every replica of every service, in the topology's order (callers before the services they call)."""
    return [ReplicaContainer(name, index, replica_name(name, index), service.replica_cpus(index), bool(service.calls))
            for name in topology.order() for service in [topology.service(name)] for index in range(service.replicas)]


def check_container_names(topology: Topology) -> None:
    """Refuse a topology two of whose replicas would get one container name (service `a` with three
    replicas and a service `a_2` both make `svc-a-2`)."""
    seen: dict[str, str] = {}
    for replica in replica_containers(topology):
        other = seen.setdefault(replica.name, replica.service)
        if other != replica.service:
            raise UsageError(f"services {other!r} and {replica.service!r} would both have a container named "
                             f"{replica.name!r}", hint="rename one of them (a replica of a service S is svc-S-N)")


def entry_upstreams(topology: Topology) -> list[tuple[str, int]]:
    """The entry service's replicas, as the fault proxy reaches them."""
    return [(replica.name, CHAIN_PORT) for replica in replica_containers(topology) if replica.service == topology.entry]


def _endpoints(topology: Topology, caller: str) -> dict[str, list[tuple[str, int]]]:
    """The services `caller` calls, each with its replicas' addresses (one cluster each)."""
    replicas = replica_containers(topology)
    callees = dict.fromkeys(step.service for step in topology.service(caller).calls)
    return {callee: [(r.name, CHAIN_PORT) for r in replicas if r.service == callee] for callee in callees}


def by_dns(clusters: list[dict]) -> list[dict]:
    """Envoy's STATIC cluster takes addresses only; the replicas have names on the compose network."""
    return [{**resource, "type": "STRICT_DNS", "dns_lookup_family": "V4_ONLY"} for resource in clusters]


def topology_files(header: dict, sidecar_dir_in_container: str, sidecar_port: int, sidecar_admin_port: int,
                   project: str) -> dict[str, str]:
    """Each replica's rbl-chain configuration and each sidecar's bootstrap, route and clusters (Istio's
    defaults on every call), by path in the compiled directory."""
    topology = topology_from_record(header["topology"])
    outbound = f"127.0.0.1:{sidecar_port}"
    files = {}
    for replica in replica_containers(topology):
        service = topology.service(replica.service)
        files[replica.config_file] = _json(chain_config(service, replica.index, outbound if replica.calls else None))
        if not replica.calls:
            continue
        route, clusters = caller_resources({}, _endpoints(topology, replica.service), release=release_of(header))
        # the replica's port is taken in the shared namespace: the sidecar's upstream is its callees.
        # Bound on every address of the namespace, as a mesh client's sidecar: the runner reaches the
        # admin API through the port the replica's container publishes, which arrives on its network address
        addresses = SidecarAddresses(sidecar_port, sidecar_admin_port, "127.0.0.1", CHAIN_PORT, "0.0.0.0")
        directory = replica.sidecar_directory
        files[f"{directory}/envoy.json"] = _json(sidecar_bootstrap(
            addresses, f"{sidecar_dir_in_container}/rds.json", f"{sidecar_dir_in_container}/cds.json",
            node_id=f"{project}.{replica.sidecar}", faults=True))
        files[f"{directory}/rds.json"] = _json(discovery_response(route, FIRST_VERSION))
        files[f"{directory}/cds.json"] = _json({"version_info": FIRST_VERSION, "resources": by_dns(clusters)})
    return files


def _json(document: dict) -> str:
    return json.dumps(document, indent=1)


# -- the deployment's services (records of deployment.Service, made from the target's by replace, as
# target_replicas.py does, so this module does not import the one that imports it) --------------
def topology_deployment(target, header: dict, images, sidecar_port: int, sidecar_admin_port: int,
                        sidecar_dir_in_container: str, proxy_name: str, proxy_role: str) -> list:
    """The replicas (each followed by its sidecar) and the fault proxy in front of the entry (last)."""
    topology = topology_from_record(header["topology"])
    built = not images.is_prebuilt(CHAIN_IMAGE)
    chain_build = type(target.build)(CHAIN_DOCKERFILE, {"GOLANG_IMAGE": images.bases["golang"],
                                                        "DEBIAN_IMAGE": images.bases["debian"]}) if built else None
    envoy_note = None if images.with_envoy else (
        "the topology's sidecars run Envoy from the target image, which --image envoy=none leaves out: give "
        "it with --image envoy=wheel (the default) or envoy=REF")
    services = []
    for position, replica in enumerate(replica_containers(topology)):
        check = ("CMD", "/opt/rbl/rbl-chain", "--health", f"http://127.0.0.1:{CHAIN_PORT}/rbl/stats",
                 "--token", COMPOSE_TOKEN)
        services.append(replace(
            target, name=replica.name, role=REPLICA_ROLE, image=images.image_for(CHAIN_IMAGE),
            build=chain_build if position == 0 else None,
            pull_policy="never" if built and position > 0 else None,
            # --cgroup-cpu: the container's CPU time as the engine accounts it (its cgroup)
            command=("--listen", f"0.0.0.0:{CHAIN_PORT}", "--any-address", "--config", CHAIN_CONFIG_IN_CONTAINER,
                     "--token", COMPOSE_TOKEN, "--cgroup-cpu"),
            ports=(), healthcheck=check, environment=_go_threads(replica.cpus), cpus=replica.cpus,
            volumes=((replica.config_file, CHAIN_CONFIG_IN_CONTAINER),), library=None, depends_on=(), note=None,
            entrypoint=(), network_of=None))
        if replica.calls:
            ready = f"import urllib.request as u; u.urlopen('http://127.0.0.1:{sidecar_admin_port}/ready', timeout=2)"
            services.append(replace(
                target, name=replica.sidecar, role=SERVICE_SIDECAR_ROLE, build=None,
                pull_policy="never" if target.build else None, entrypoint=("envoy",),
                command=("-c", f"{sidecar_dir_in_container}/envoy.json", "--concurrency", "1",
                         "--use-dynamic-base-id", "--log-level", "warning"),
                ports=(), healthcheck=("CMD", "python", "-c", ready), environment={},
                volumes=((replica.sidecar_directory, sidecar_dir_in_container),), library=None,
                depends_on=(replica.name,), network_of=replica.name, cpus=None, note=envoy_note))
    upstreams = ",".join(f"{host}:{port}" for host, port in entry_upstreams(topology))
    proxy = replace(target, name=proxy_name, role=proxy_role,
                    environment={**target.environment, "RBL_TARGET_ROLE": "proxy", "UPSTREAMS": upstreams},
                    depends_on=tuple(s.name for s in services))      # the whole topology up first
    return [*services, proxy]


def _go_threads(cpus: float | None) -> dict[str, str]:
    """Go sizes its scheduler by the machine's cores, not by the container's limit: by the limit instead."""
    return {} if cpus is None else {"GOMAXPROCS": str(max(1, math.ceil(cpus)))}
