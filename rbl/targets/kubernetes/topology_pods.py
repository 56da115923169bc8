"""A topology on a cluster (docs/topologies.md, On Kubernetes): for every shard of the run, every replica
of every service a Deployment of one pod running rbl-chain under a CPU limit the kubelet enforces, and
beside it, when the service calls others, a sidecar Envoy container in the same pod (its network
namespace, as a mesh injects one). The shard's own pod is the load generator's: its fault proxy sends
the load to the entry replicas' pod addresses, and its runner reaches every replica's /rbl/ control and
every sidecar's admin API there (pods_document says where).

A sidecar watches the files of its pod's shared volume (SIDECAR_DIR), seeded from the replica's
ConfigMap with Istio's defaults and no endpoints; the runner puts every configuration in place through
the replica's rbl-chain (PUT /rbl/sidecar/NAME), which renames each file into the volume as the runner
does on its own machine. So a switch is the same file watch everywhere, with no control plane.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from ...libraries.istio import release_of
from ...mesh.sidecar import Sidecar
from ...mesh.sidecar_config import SidecarAddresses
from ...mesh.topology_sidecars import caller_resources
from ...topology import Topology, chain_config, kubernetes_service, topology_from_record
from .image import CHAIN_IN_IMAGE
from .manifests import MANAGED_BY

# in every replica's pod: rbl-chain's port, and its sidecar's listener and admin API (Istio's ports)
CHAIN_PORT = 8080
SIDECAR_PORT = 15001
SIDECAR_ADMIN_PORT = 15000
SEED_VERSION = 1                                   # the version of the sidecar's seeded files
SIDECAR_DIR = "/sidecar"                           # the pod's shared volume: the files its sidecar watches
SEED_DIR = "/etc/rbl-seed"                         # the replica's ConfigMap: rbl-chain's config, the first files
CHAIN_CONFIG = "config.json"
# not rbl.dev/run: the shards' pods keep off nodes with pods of that label (anti-affinity), and they must
# be able to share a node with the services they load
TOPOLOGY_LABEL = "rbl.dev/topology-of"
SHARD_LABEL = "rbl.dev/shard"
REPLICA_LABEL = "rbl.dev/replica"


@dataclass(frozen=True)
class PodReplica:
    service: str
    index: int
    cpus: float | None
    calls: bool

    @property
    def label(self) -> str:
        return f"{kubernetes_service(self.service)}-{self.index}"

    def deployment(self, run: str, shard: int) -> str:
        return f"{run}-{shard}-{self.label}"


def pod_replicas(topology: Topology) -> list[PodReplica]:
    """Every replica of every service, callers before the services they call."""
    return [PodReplica(name, index, service.replica_cpus(index), bool(service.calls))
            for name in topology.order() for service in [topology.service(name)] for index in range(service.replicas)]


class _SeedFiles(Sidecar):
    """A sidecar's first files as documents, by name, instead of written here."""

    def __init__(self, release: str | None):
        # bound on every address of the pod: the runner reads the admin API from the shard's pod
        super().__init__(Path(SIDECAR_DIR), SidecarAddresses(SIDECAR_PORT, SIDECAR_ADMIN_PORT, "127.0.0.1", CHAIN_PORT,
                                                             "0.0.0.0"), release)
        self.files: dict[str, dict] = {}

    def _write(self, path: Path, document: dict) -> None:
        self.files[path.name] = document


def seed_files(topology: Topology, replica: PodReplica, release: str | None) -> dict[str, str]:
    """The replica's ConfigMap data: rbl-chain's configuration and, for a caller, its sidecar's
    bootstrap and first route, clusters and filters (Istio's defaults, no endpoints yet: the runner's
    first configuration gives them the callees' pod addresses)."""
    service = topology.service(replica.service)
    outbound = f"127.0.0.1:{SIDECAR_PORT}" if replica.calls else None
    data = {CHAIN_CONFIG: json.dumps(chain_config(service, replica.index, outbound))}
    if replica.calls:
        seed = _SeedFiles(release)
        callees = dict.fromkeys(step.service for step in service.calls)
        route, clusters = caller_resources({}, {callee: [] for callee in callees}, release=release)
        seed.write_initial_resources(route, clusters, faults=True)
        data.update({name: json.dumps(document) for name, document in seed.files.items()})
    return data


def topology_objects(header: dict, run: str, namespace: str, shard: int, token: str, image: str,
                     pull_policy: str) -> list[dict]:
    """A shard's ConfigMaps and Deployments, one of each per replica, as the API takes them."""
    topology = topology_from_record(header["topology"])
    release = release_of(header)
    objects = []
    for replica in pod_replicas(topology):
        name = replica.deployment(run, shard)
        labels = {MANAGED_BY: "rbl", TOPOLOGY_LABEL: run, SHARD_LABEL: str(shard), REPLICA_LABEL: replica.label}
        meta = {"name": name, "namespace": namespace, "labels": labels}
        objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                        "data": seed_files(topology, replica, release)})
        objects.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
                        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                                 "template": {"metadata": {"labels": labels},
                                              "spec": _pod_spec(replica, name, token, image, pull_policy)}}})
    return objects


def _pod_spec(replica: PodReplica, configmap: str, token: str, image: str, pull_policy: str) -> dict:
    seed = {"name": "seed", "mountPath": SEED_DIR, "readOnly": True}
    shared = {"name": "sidecar", "mountPath": SIDECAR_DIR}
    # --cgroup-cpu: the container's CPU time as the kubelet accounts it (its cgroup)
    command = [CHAIN_IN_IMAGE, "--listen", f"0.0.0.0:{CHAIN_PORT}", "--any-address", "--config",
               f"{SEED_DIR}/{CHAIN_CONFIG}", "--token", token, "--cgroup-cpu"]
    service = {"name": "service", "image": image, "imagePullPolicy": pull_policy,
               "command": command + (["--sidecar-dir", SIDECAR_DIR] if replica.calls else []),
               "ports": [{"containerPort": CHAIN_PORT}],
               "readinessProbe": {"tcpSocket": {"port": CHAIN_PORT}, "periodSeconds": 1},
               "volumeMounts": [seed, shared] if replica.calls else [seed]}
    if replica.cpus is not None:
        # the kubelet enforces the limit (a CFS quota); Go sizes its scheduler by the machine's cores
        cpu = f"{round(replica.cpus * 1000)}m"
        service["resources"] = {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}
        service["env"] = [{"name": "GOMAXPROCS", "value": str(max(1, math.ceil(replica.cpus)))}]
    spec = {"enableServiceLinks": False, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 5,
            "containers": [service], "volumes": [{"name": "seed", "configMap": {"name": configmap}}]}
    if replica.calls:
        spec["volumes"].append({"name": "sidecar", "emptyDir": {}})
        spec["initContainers"] = [{"name": "seed", "image": image, "imagePullPolicy": pull_policy,
                                   "command": ["/bin/sh", "-c", f"cp {SEED_DIR}/*.json {SIDECAR_DIR}/ && "
                                                                f"rm {SIDECAR_DIR}/{CHAIN_CONFIG}"],
                                   "volumeMounts": [seed, shared]}]
        # one worker, as every sidecar rbl runs: a pool limit is then one pool's, not one per worker
        spec["containers"].append({"name": "sidecar", "image": image, "imagePullPolicy": pull_policy,
                                   "command": ["envoy", "-c", f"{SIDECAR_DIR}/envoy.json", "--concurrency", "1",
                                               "--use-dynamic-base-id", "--log-level", "warning"],
                                   "readinessProbe": {"httpGet": {"path": "/ready", "port": SIDECAR_ADMIN_PORT},
                                                      "periodSeconds": 1},
                                   "volumeMounts": [shared]})
    return spec


def pods_document(token: str, placed: list[tuple[PodReplica, str, str, str | None]]) -> str:
    """What a shard's runner reads (--topology-pods): the run's token and, per replica, its pod, the
    pod's address, the CPU limit its rbl-chain container has in the API server (read back from the
    running pod), and where rbl-chain and the sidecar's admin API listen there."""
    return json.dumps({"token": token, "replicas": [
        {"service": r.service, "index": r.index, "cpus": r.cpus, "calls": r.calls, "pod": pod, "address": address,
         "cpu_limit": limit, "port": CHAIN_PORT, "admin_port": SIDECAR_ADMIN_PORT if r.calls else None}
        for r, pod, address, limit in placed]}, indent=1)
