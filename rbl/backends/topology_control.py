"""What the runner asks of a topology's running services, on any backend that runs one: its
caller sidecars put under a configuration's placed policies (configure), a fault at a service or on
its callers' sidecars (TopologyFaults), and every edge's and every service's cumulative counters
(counters), read from each replica's /rbl/stats and each sidecar's admin API (docs/topologies.md).

A backend starts the services its own way (processes with cgroup budgets on this machine, containers
under the engine's CPU limit) and gives this class where it reaches them: each replica's control
port, and each calling service's sidecars (one for all its replicas here, one per replica in
containers, as a mesh injects one into each pod). What a sidecar holds is the same everywhere:
mesh/topology_sidecars.py caller_resources.
"""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass

from ..dataplane.target_token import TOKEN_HEADER
from ..libraries.composition import BASELINE, policies_of
from ..libraries.istio import placed_policies
from ..mesh.sidecar import Sidecar, SidecarError
from ..mesh.topology_sidecars import caller_resources
from ..runner.fault_control import FAULT_POINT_INJECTED, FAULT_POINT_REQUESTS, FaultControl
from ..runner.liveness import ServicesLost
from ..topology import Topology
from .net import HOST

# a replica under a small CPU budget answers its counters only once the requests queued before them
# have had their share of its quota: give it time, rather than call a busy service lost
STATS_TIMEOUT = 60.0


@dataclass(frozen=True)
class Replica:
    service: str
    index: int
    port: int             # where the runner reaches it (its requests and /rbl/ control) ...
    cpus: float | None
    host: str = HOST      # ... on this machine, or at its pod's address


class TopologyControl:
    """A started topology's replicas and caller sidecars, as the runner reaches them. A backend fills
    `replicas` and `sidecars`, and says how a sidecar reaches a replica (endpoint) when that is not
    the runner's own address."""

    def __init__(self, topology: Topology, token: str, istio_release: str | None = None):
        self.topology = topology
        self.token = token
        self.istio_release = istio_release   # whose defaults the sidecars follow (None: today's)
        self.replicas: dict[str, list[Replica]] = {}
        self.sidecars: dict[str, list[Sidecar]] = {}     # a calling service -> its sidecars
        # what the callers' sidecars hold now: the placed policies, and a fault on the calls of a service
        self.placed: dict[str, dict] = {name: {} for name in topology.names}
        self.baseline = False
        self.sidecar_faults: dict[str, dict[str, dict]] = {}     # caller -> {callee: its fault}

    def endpoint(self, replica: Replica) -> tuple[str, int]:
        """Where a caller's sidecar reaches the replica."""
        return replica.host, replica.port

    def sidecar_clusters(self, clusters: list[dict]) -> list[dict]:
        """The clusters as a sidecar takes them (a backend whose endpoints are names resolves them)."""
        return clusters

    def endpoints(self, caller: str) -> dict[str, list[tuple[str, int]]]:
        """The services `caller` calls, each with its replicas' addresses (its sidecar's clusters)."""
        callees = dict.fromkeys(step.service for step in self.topology.service(caller).calls)
        return {callee: [self.endpoint(replica) for replica in self.replicas[callee]] for callee in callees}

    def caller_resources(self, caller: str) -> tuple[dict, list[dict]]:
        """(route, clusters) of `caller`'s sidecars now."""
        route, clusters = caller_resources(self.placed, self.endpoints(caller), self.baseline,
                                           self.sidecar_faults.get(caller), self.istio_release)
        return route, self.sidecar_clusters(clusters)

    # -- per scenario ------------------------------------------------------------------------
    def configure(self, pattern: str | None, config: dict) -> dict[str, dict]:
        """Every caller sidecar under one configuration's placed policies (pattern None: a library
        client's scenario, where no mesh policy is placed and Istio's defaults govern every call);
        returns the policies placed on each service. A sidecar that does not take them loses the run."""
        self.placed = placed_policies(policies_of(pattern, config), self.topology.entry, self.topology.names) \
            if pattern is not None else {name: {} for name in self.topology.names}
        self.baseline = pattern == BASELINE
        try:
            self._apply_sidecars()
        except SidecarError as error:
            raise ServicesLost(f"a topology sidecar did not take the configuration: {error}") from error
        return self.placed

    def entry_resources(self, sidecar: Sidecar, pattern: str) -> tuple[dict, list[dict]]:
        """(route, clusters) of a mesh client's sidecar, which calls the entry (through the fault
        proxy): the policies configure placed on the entry service."""
        return sidecar.resources_of(self.placed[self.topology.entry], pattern == BASELINE)

    def set_sidecar_fault(self, service: str | None, fault: dict | None, caller: str | None = None) -> None:
        """A fault injected into the calls of `service` by its callers' sidecars, or by `caller`'s alone
        (one edge); None: none."""
        wanted = {} if service is None else {name: {service: fault} for name in self.callers_of(service, caller)}
        if wanted != self.sidecar_faults:
            self.sidecar_faults = wanted
            self._apply_sidecars()

    def _apply_sidecars(self) -> None:
        for name, sidecars in self.sidecars.items():
            for sidecar in sidecars:
                sidecar.apply_resources(*self.caller_resources(name))

    def callers_of(self, service: str, only: str | None = None) -> list[str]:
        return [name for name in self.sidecars if service in self.endpoints(name) and only in (None, name)]

    def sidecar_fault_counts(self, service: str, caller: str | None = None) -> tuple[int, int, int]:
        """(calls of `service` its callers (or `caller` alone) made, aborts and delays their sidecars
        injected) since they started."""
        calls = 0
        for name in self.callers_of(service, caller):
            for replica in self.replicas[name]:
                calls += self._stats(replica).get("calls", {}).get(service, {}).get("sent", 0)
        aborts = delays = 0
        for name in self.callers_of(service, caller):
            for sidecar in self.sidecars[name]:
                try:
                    injected = sidecar.faults_injected()
                except SidecarError as error:
                    raise ServicesLost(f"a {name} sidecar's admin API did not answer: {error}") from error
                aborts, delays = aborts + injected[0], delays + injected[1]
        return calls, aborts, delays

    # -- per round ---------------------------------------------------------------------------
    def counters(self) -> dict:
        """Cumulative counters: {"edges": {"caller>callee": {...}}, "services": {name: {...}}}, and
        "histogram": (base ms, growth) of the edges' success buckets (bucket k ends at base x growth^k)."""
        services: dict[str, dict] = {}
        calls: dict[tuple[str, str], dict] = {}
        histogram = None
        peaks: dict[str, int] = {}
        for name, replicas in self.replicas.items():
            total = {"requests": 0, "answeredOk": 0, "answeredFailed": 0, "workSeconds": 0.0,
                     "failedWorkSeconds": 0.0, "cpuSeconds": 0.0}
            accounted = []
            for replica in replicas:
                stats = self._stats(replica)
                answered = stats.get("answered", {})
                ok = sum(n for status, n in answered.items() if status.startswith("2"))
                total["requests"] += stats.get("requests", 0)
                total["answeredOk"] += ok
                total["answeredFailed"] += sum(answered.values()) - ok
                work = stats.get("work_seconds", {})
                total["workSeconds"] += work.get("ok", 0.0) + work.get("failed", 0.0)
                total["failedWorkSeconds"] += work.get("failed", 0.0)     # on requests it answered failed
                cpu = stats.get("cpu_seconds", {})
                # its container's cgroup, as the engine accounts it, where the replica has one of its own
                # and reads it (rbl-chain --cgroup-cpu); else the process's own CPU time
                accounted.append(cpu.get("cgroup") is not None)
                total["cpuSeconds"] += cpu["cgroup"] if accounted[-1] else cpu.get("user", 0.0) + cpu.get("system", 0.0)
                for callee, call in stats.get("calls", {}).items():
                    edge = calls.setdefault((name, callee), {"calls": 0, "callsFailed": 0, "successBuckets": {}})
                    statuses = call.get("statuses", {})
                    edge["calls"] += call.get("sent", 0)
                    edge["callsFailed"] += sum(n for status, n in statuses.items() if not status.startswith("2"))
                    # the sum of the replicas' peaks: at least the peak of the service's calls of the callee,
                    # which bounds from above what its sidecar had in flight to it
                    key = f"{name}>{callee}"
                    peaks[key] = peaks.get(key, 0) + call.get("peak_in_flight", 0)
                    success = call.get("success_ms", {})
                    histogram = (success.get("base_ms"), success.get("growth"))
                    for bucket, count in success.get("counts", {}).items():
                        edge["successBuckets"][bucket] = edge["successBuckets"].get(bucket, 0) + count
            total["cpuAccounting"] = "cgroup" if all(accounted) else "process" if not any(accounted) else "mixed"
            services[name] = total
        edges = {}
        for caller, sidecars in self.sidecars.items():
            callees = list(self.endpoints(caller))
            by_cluster = {callee: {} for callee in callees}
            for sidecar in sidecars:             # a service's sidecars together, as its replicas' stats
                try:
                    counted = sidecar.cluster_counters(callees)
                except SidecarError as error:
                    raise ServicesLost(f"a {caller} sidecar's admin API did not answer: {error}") from error
                for callee in callees:
                    for column, value in counted[callee].items():
                        by_cluster[callee][column] = by_cluster[callee].get(column, 0) + value
            for callee in callees:
                no_calls = {"calls": 0, "callsFailed": 0, "successBuckets": {}}
                edges[f"{caller}>{callee}"] = {**calls.get((caller, callee), no_calls), **by_cluster[callee]}
        return {"edges": edges, "services": services, "histogram": histogram, "peaks": Peaks(peaks)}

    def _stats(self, replica: Replica) -> dict:
        return json.loads(self._ask(replica, "GET", "/rbl/stats"))

    def _ask(self, replica: Replica, method: str, path: str, body: bytes | None = None) -> bytes:
        try:
            status, answer = ask_replica(replica, self.token, method, path, body)
        except (OSError, http.client.HTTPException) as error:
            raise ServicesLost(f"{replica.service} replica {replica.index + 1} did not answer {method} {path}: "
                               f"{error}") from error
        if status != 200:
            raise ServicesLost(f"{replica.service} replica {replica.index + 1} answered {method} {path} with "
                               f"HTTP {status} ({answer[:200].decode(errors='replace').strip()})")
        return answer

    # -- a service's own faults (fault.at) ---------------------------------------------------
    def set_faults(self, service: str, fault: dict | None) -> None:
        """The service's own fault on every replica (None: none), read back before it counts as set."""
        body = {} if fault is None else _fault_body(fault)
        for replica in self.replicas[service]:
            self._ask(replica, "PUT", "/rbl/fault", json.dumps(body).encode())
            if json.loads(self._ask(replica, "GET", "/rbl/fault")) != body:
                raise ServicesLost(f"{service} replica {replica.index + 1} did not take the fault {body}")

    def fault_counts(self, service: str) -> tuple[int, int, int]:
        """(requests, aborts injected, delays injected) of the service's replicas since they started."""
        requests = aborts = delays = 0
        for replica in self.replicas[service]:
            stats = self._stats(replica)
            requests += stats.get("requests", 0)
            aborts += stats.get("faults", {}).get("aborts", 0)
            delays += stats.get("faults", {}).get("delays", 0)
        return requests, aborts, delays


def ask_replica(replica: Replica, token: str, method: str, path: str, body: bytes | None = None,
                timeout: float = STATS_TIMEOUT) -> tuple[int, bytes]:
    """One request to a replica's /rbl/ control, with the run's token: (status, body). A transport
    failure raises OSError or HTTPException, which each caller words its own way."""
    connection = http.client.HTTPConnection(replica.host, replica.port, timeout=timeout)
    try:
        connection.request(method, path, body=body, headers={TOKEN_HEADER: token})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


class Peaks(dict):
    """Each edge's most calls in flight at once since the previous read: not a counter, so a round's
    peak is the highest of its reads (hops.py), never a difference."""


def _fault_body(fault: dict) -> dict:
    """A plan's fault record as rbl-chain's PUT /rbl/fault takes it (rates as shares, not percent)."""
    if fault["kind"] == "abort":
        return {"abort": {"rate": fault["rate"] / 100, "status": fault["status"]}}
    return {"delay": {"rate": fault["rate"] / 100, "ms": fault["duration_ms"]}}


class TopologyFaults:
    """The runner's fault control on a topology: a scenario's fault is injected by the fault proxy in
    front of the entry; with `at`, by that service itself, or (`by: sidecar`) by its callers' sidecars
    in their calls of it, as Istio's VirtualService fault is. Its counters are the proxy's, with the
    calls that met the fault and the faults injected there when that is not the proxy (fault_control.py)."""

    def __init__(self, proxy: FaultControl, services: TopologyControl):
        self.proxy = proxy
        self.services = services
        self.at: str | None = None          # the service whose calls meet the fault, if not the proxy's
        self.by = "service"                 # ... injected by the service, or by its callers' sidecars
        self.caller: str | None = None      # ... or by this caller's sidecar alone (one edge)
        self.kind = "abort"
        self.baseline = (0, 0, 0)

    def apply(self, fault: dict) -> None:
        at = fault.get("at")
        if at is not None and at not in self.services.replicas:
            raise ServicesLost(f"the plan's fault is at {at!r}, which is not a service of the running topology")
        if at == self.services.topology.entry or at is None or fault["rate"] == 0:
            self.proxy.apply(fault)
            self._move(None, "service", None)
            return
        self.proxy.clear()
        self._move(at, fault.get("by", "service"), fault)

    def _move(self, at: str | None, by: str, fault: dict | None) -> None:
        if self.at is not None and self.by == "service" and (self.at, self.by) != (at, by):
            self.services.set_faults(self.at, None)
        if at is not None and by == "service":
            self.services.set_faults(at, fault)
        caller = fault.get("from") if fault else None
        self.services.set_sidecar_fault(at if by == "sidecar" else None, fault, caller)
        self.at, self.by, self.caller = at, by, caller
        self.kind = fault["kind"] if fault else self.kind

    def clear(self) -> None:
        self.proxy.clear()
        self._move(None, "service", None)

    def _counts(self) -> tuple[int, int, int]:
        return self.services.fault_counts(self.at) if self.by == "service" else \
            self.services.sidecar_fault_counts(self.at, self.caller)

    def reset_counters(self) -> None:
        self.proxy.reset_counters()
        if self.at is not None:
            self.baseline = self._counts()

    def counters(self) -> dict[str, int]:
        counters = self.proxy.counters()
        if self.at is not None:
            requests, aborts, delays = (now - then for now, then in zip(self._counts(), self.baseline))
            counters[FAULT_POINT_REQUESTS] = requests
            counters[FAULT_POINT_INJECTED] = aborts if self.kind == "abort" else delays
        return counters
