"""A topology whose replicas run in pods of their own (rbl/targets/kubernetes/topology_pods.py), as a
shard's runner holds it: `rbl run --topology-pods FILE` in the shard's pod, FILE written by the
kubernetes backend once the pods were ready. The runner reaches each replica's /rbl/ control and each
sidecar's admin API at its pod's address, and switches a sidecar's configuration through its
replica's rbl-chain, which writes the files into the volume the sidecar watches (RelayedSidecar).
"""

from __future__ import annotations

import http.client
import json
from pathlib import Path

from ..errors import UsageError
from ..mesh.sidecar import Sidecar, SidecarError
from ..mesh.sidecar_config import SidecarAddresses
from ..targets.kubernetes.topology_pods import SEED_VERSION, SIDECAR_DIR
from ..topology import Topology
from .topology_control import Replica, TopologyControl, ask_replica

RELAY_TIMEOUT_S = 10.0
REPLICA_KEYS = ("service", "index", "cpus", "calls", "pod", "address", "port", "admin_port")


class RelayedSidecar(Sidecar):
    """A sidecar in a replica's pod: its files go through the replica's PUT /rbl/sidecar/NAME."""

    def __init__(self, replica: Replica, admin_port: int, pod: str, token: str, release: str | None = None):
        # the runner uses the admin API's address only; the rest is the pod's own business
        super().__init__(Path(f"{pod}:{SIDECAR_DIR}"), SidecarAddresses(0, admin_port, "", 0, replica.host), release)
        self.replica = replica
        self.token = token
        self.version = SEED_VERSION            # the next configuration is a new version of the seeded files

    def _write(self, path: Path, document: dict) -> None:
        try:
            status, answer = ask_replica(self.replica, self.token, "PUT", f"/rbl/sidecar/{path.name}",
                                         json.dumps(document).encode(), timeout=RELAY_TIMEOUT_S)
        except (OSError, http.client.HTTPException) as error:
            raise SidecarError(f"{self.replica.service} replica {self.replica.index + 1} did not take its "
                               f"sidecar's {path.name}: {error}") from error
        if status != 200:
            raise SidecarError(f"{self.replica.service} replica {self.replica.index + 1} refused its sidecar's "
                               f"{path.name}: HTTP {status} {answer[:200].decode(errors='replace').strip()}")


class PodTopology(TopologyControl):
    """The replicas and sidecars `document` (topology_pods.pods_document) places in pods."""

    def __init__(self, topology: Topology, document: dict, istio_release: str | None = None):
        super().__init__(topology, document["token"], istio_release)
        self.pods: list[str] = []
        for entry in document["replicas"]:
            replica = Replica(entry["service"], entry["index"], entry["port"], entry["cpus"], host=entry["address"])
            self.replicas.setdefault(replica.service, []).append(replica)
            if entry["calls"]:
                self.sidecars.setdefault(replica.service, []).append(
                    RelayedSidecar(replica, entry["admin_port"], entry["pod"], self.token, istio_release))
            limit = entry.get("cpu_limit")       # as the API server holds it for the running pod
            cpu = f"CPU limit {limit} ({entry['cpus']:g} CPU), enforced by the kubelet" if limit else "no CPU limit"
            self.pods.append(f"{entry['pod']} ({entry['address']}{', with its sidecar' if entry['calls'] else ''}): "
                             f"{cpu}")
        missing = [name for name in topology.names if name not in self.replicas]
        unknown = [name for name in self.replicas if name not in topology.names]
        if missing or unknown:
            raise UsageError(f"the topology's pods hold no replica of {', '.join(missing)}" if missing else
                             f"the topology's pods hold replicas of {', '.join(unknown)}, which the plan's topology "
                             f"does not have",
                             hint="--topology-pods takes the file the kubernetes backend wrote for this plan")

    @property
    def entry_addresses(self) -> list[tuple[str, int]]:
        return [(replica.host, replica.port) for replica in self.replicas[self.topology.entry]]

    def start_jobs(self) -> list:
        """The pods run already (the kubernetes backend started them); their sidecars were seeded with
        no endpoints: give them the callees' pod addresses under Istio's defaults, as a local
        topology's sidecars start."""
        return [(self._first_configuration, None)]

    def _first_configuration(self, _) -> None:
        self.configure(None, {})

    def remove_budgets(self) -> None:
        """Nothing to remove: the kubelet holds the pods' CPU limits."""

    def description(self) -> str:
        return f"topology, entry {self.topology.entry}, one pod per replica: " + "; ".join(self.pods)


def read_pods_document(path: Path) -> dict:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(document.get("token"), str) or not isinstance(document.get("replicas"), list):
            raise ValueError("no token or replicas")
        for entry in document["replicas"]:
            missing = [key for key in REPLICA_KEYS if key not in entry]
            if missing:
                raise ValueError(f"a replica without {', '.join(missing)}")
        return document
    except (OSError, ValueError, AttributeError, TypeError) as error:
        raise UsageError(f"--topology-pods {path}: not the topology's pods ({error})",
                         hint="the kubernetes backend writes it into each shard's pod") from None
