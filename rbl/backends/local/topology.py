"""A topology's services on this machine: every replica of every service an rbl-chain process on a
loopback port, under its own cgroup CPU budget where the spec gives one and the machine allows it,
and beside every service that calls others a sidecar Envoy through which it makes those calls
(docs/topologies.md). The fault proxy stays in front of the entry service: the load enters there, and
so do the faults, unless `fault.at` names the service that injects them itself (TopologyFaults).

What the runner asks of them once they run (configure, faults, counters) is every backend's:
rbl/backends/topology_control.py.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Callable

from ...mesh.sidecar import Sidecar
from ...mesh.sidecar_config import SidecarAddresses
from ...store.durable import new_file, own_directory
from ...topology import Topology, chain_config
from ..net import HOST, free_port
from ..topology_control import Replica, TopologyControl
from .cpu_budget import CpuBudget, budget_name, create_budget
from .processes import Service

READY_TIMEOUT = 30.0


class TopologyServices(TopologyControl):
    """The processes of one run's topology, started by `start` through the backend's own starter (so
    they stop with every other service), and what the runner asks of them."""

    def __init__(self, topology: Topology, directory: Path, token: str, chain: Path, envoy: Path,
                 start_service: Callable[..., Service], istio_release: str | None = None):
        super().__init__(topology, token, istio_release)
        self.directory = directory           # RUN/topology: the replicas' configurations, the sidecars' files
        self.chain = chain
        self.envoy = envoy
        self.start_service = start_service
        self.replicas = {s.name: [Replica(s.name, r, free_port(), s.replica_cpus(r)) for r in range(s.replicas)]
                         for s in topology.services}
        # one sidecar for all replicas of a service that calls others: its addresses, and the files it watches
        self.sidecars = {
            s.name: [Sidecar(directory / f"sidecar-{s.name}", SidecarAddresses(free_port(), free_port(), HOST, 0, HOST))]
            for s in topology.services if s.calls}
        self.budgets: list[CpuBudget] = []
        self.described: list[str] = []

    @property
    def entry_addresses(self) -> list[tuple[str, int]]:
        return [(HOST, replica.port) for replica in self.replicas[self.topology.entry]]

    # -- start -------------------------------------------------------------------------------
    def start_jobs(self) -> list[tuple[Callable, object]]:
        """(job, argument) for every sidecar and replica: the backend runs them side by side on its
        starter threads, which live as long as the services (the parent-death signal is per thread)."""
        own_directory(self.directory)            # never through a link planted in the run directory
        return [*((self._start_sidecar, name) for name in self.sidecars),
                *((self._start_replica, replica) for replicas in self.replicas.values() for replica in replicas)]

    def _start_sidecar(self, name: str) -> None:
        sidecar, = self.sidecars[name]
        bootstrap = sidecar.write_initial_resources(*self.caller_resources(name), faults=True)
        # one worker, as the clients' sidecars: a pool limit is then one pool's, not one per worker
        service = self.start_service(f"{name} sidecar (Envoy)",
                                     [str(self.envoy), "-c", str(bootstrap), "--use-dynamic-base-id",
                                      "--concurrency", "1", "--log-level", "warning"], f"sidecar-service-{name}.log")
        service.wait_http(f"http://{HOST}:{sidecar.addresses.admin_port}/ready", READY_TIMEOUT)

    def _start_replica(self, replica: Replica) -> None:
        service = self.topology.service(replica.service)
        outbound = f"{HOST}:{self.sidecars[service.name][0].addresses.listen_port}" if service.calls else None
        config = chain_config(service, replica.index, outbound)
        path = self.directory / f"{service.name}-{replica.index}.json"
        with os.fdopen(new_file(path), "w", encoding="utf-8") as out:
            out.write(json.dumps(config))
        argv = [str(self.chain), "--listen", f"{HOST}:{replica.port}", "--config", str(path), "--token", self.token]
        env = dict(os.environ)
        described = f"{service.name} {replica.index + 1}/{service.replicas}"
        if replica.cpus is not None:
            # Go sizes its scheduler by the machine's cores, not by a cgroup quota: by the budget instead
            env["GOMAXPROCS"] = str(max(1, math.ceil(replica.cpus)))
            budget, why = create_budget(budget_name(self.token, replica.index, service.name), replica.cpus)
            if budget is not None:
                self.budgets.append(budget)
                argv = budget.wrap(argv)
                described += f": {budget.describe()}"
            else:
                described += f": {replica.cpus:g} CPU NOT enforced: {why}"
        else:
            described += ": no CPU budget"
        started = self.start_service(f"{service.name} replica {replica.index + 1} (rbl-chain)", argv,
                                     f"service-{service.name}-{replica.index}.log", env=env)
        started.read_announcement("ready", READY_TIMEOUT)
        self.described.append(described)

    def description(self) -> str:
        return f"topology, entry {self.topology.entry}: " + "; ".join(sorted(self.described))

    def remove_budgets(self) -> None:
        for budget in self.budgets:
            budget.remove()
        self.budgets.clear()
