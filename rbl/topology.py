"""A topology: the services one entry request passes through (`topology { ... }` in a spec), as the
checker builds it (checks/topology.py) and a plan records it. Each service costs some work per request,
then calls others, step by step (a step: one service, some times, in sequence or in parallel).

What the runner and the reports need from the graph is computed here, once: the tiers (a service's
depth from the entry), the edges (who calls whom, the external client included), the requests each
service receives per entry request when nothing fails, and their worst case under retries.
"""

from __future__ import annotations

from dataclasses import dataclass

CLIENT = "client"          # the caller of the entry service: the load, through its client or sidecar
ALL_SERVICES = "all"       # a placement on every service (a policy every caller's sidecar enforces)
WORK_KINDS = ("factorial", "sleep", "none")


@dataclass(frozen=True)
class Work:
    """What one request costs a service before its calls: factorial(n) computed (CPU), a sleep, or nothing."""

    kind: str                # one of WORK_KINDS
    amount: int = 0          # factorial: n; sleep: microseconds

    def describe(self) -> str:
        if self.kind == "factorial":
            return f"factorial({self.amount})"
        if self.kind == "sleep":
            return f"sleep({self.amount / 1000:g}ms)"
        return "none()"


@dataclass(frozen=True)
class CallStep:
    service: str
    times: int = 1
    parallel: bool = False


@dataclass(frozen=True)
class ServiceDef:
    name: str
    work: Work = Work("none")
    calls: tuple[CallStep, ...] = ()
    replicas: int = 1
    cpus: float | None = None           # each replica's CPU budget; None: unlimited
    noisy_cpus: float | None = None     # the last replica's budget instead (a noisy neighbour's share)

    def replica_cpus(self, replica: int) -> float | None:
        if self.noisy_cpus is not None and self.replicas > 1 and replica == self.replicas - 1:
            return self.noisy_cpus
        return self.cpus


@dataclass(frozen=True)
class Edge:
    caller: str              # a service, or CLIENT
    callee: str
    times: int               # calls per request of the caller (all its steps to this callee)


@dataclass(frozen=True)
class Topology:
    entry: str
    services: tuple[ServiceDef, ...]      # in the spec's order

    def service(self, name: str) -> ServiceDef:
        for service in self.services:
            if service.name == name:
                return service
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.services)

    def edges(self) -> tuple[Edge, ...]:
        """Every caller -> callee pair, the client's call of the entry first."""
        edges = [Edge(CLIENT, self.entry, 1)]
        for service in self.services:
            totals: dict[str, int] = {}
            for step in service.calls:
                totals[step.service] = totals.get(step.service, 0) + step.times
            edges.extend(Edge(service.name, callee, times) for callee, times in totals.items())
        return tuple(edges)

    def callers(self, name: str) -> tuple[str, ...]:
        return tuple(edge.caller for edge in self.edges() if edge.callee == name)

    def order(self) -> tuple[str, ...]:
        """The services the entry reaches, each after all its callers (the graph has no cycle)."""
        seen: set[str] = set()
        finished: list[str] = []

        def visit(name: str) -> None:          # depth first; a checked topology is at most MAX_SERVICES deep
            seen.add(name)
            for step in self.service(name).calls:
                if step.service not in seen:
                    visit(step.service)
            finished.append(name)
        visit(self.entry)
        return tuple(reversed(finished))

    def tiers(self) -> dict[str, int]:
        """Each reached service's tier: 1 for the entry, else 1 + its deepest caller's (the papers' numbering)."""
        tiers = {self.entry: 1}
        for name in self.order():
            for step in self.service(name).calls:
                tiers[step.service] = max(tiers.get(step.service, 0), tiers[name] + 1)
        return tiers

    def requests_per_entry(self) -> dict[str, int]:
        """The requests each service receives per entry request when every call succeeds at once."""
        return self.worst_case_per_entry({})

    def worst_case_per_entry(self, attempts: dict[str, int]) -> dict[str, int]:
        """The most requests each service can receive per entry request when every call to a service S
        is tried 1 + attempts[S] times (retries placed on S): the product of (1 + attempts) and the calls
        along each path, summed over the paths (the bound on retry amplification)."""
        counts = {name: 0 for name in self.names}
        counts[self.entry] = 1 + attempts.get(self.entry, 0)
        for name in self.order():
            for step in self.service(name).calls:
                counts[step.service] += counts[name] * step.times * (1 + attempts.get(step.service, 0))
        return counts

    def record(self) -> dict:
        """The plan's record of the topology (plan-v1 schema, `topology`)."""
        return {"entry": self.entry, "services": [_service_record(s) for s in self.services]}


def _service_record(service: ServiceDef) -> dict:
    record: dict = {"name": service.name, "work": {"kind": service.work.kind},
                    "calls": [{"service": c.service, "times": c.times, "parallel": c.parallel} for c in service.calls],
                    "replicas": service.replicas}
    if service.work.kind == "factorial":
        record["work"]["n"] = service.work.amount
    elif service.work.kind == "sleep":
        record["work"]["us"] = service.work.amount
    if service.cpus is not None:
        record["cpus"] = service.cpus
    if service.noisy_cpus is not None:
        record["noisy_cpus"] = service.noisy_cpus
    return record


def kubernetes_service(service: str) -> str:
    """A service's Kubernetes Service name (and its containers' names): lower case, `_` as `-` (a DNS
    label, which the compile targets check)."""
    return service.lower().replace("_", "-")


def chain_config(service: ServiceDef, replica: int, outbound: str | None) -> dict:
    """What one replica's rbl-chain reads (services/chain, --config): its work and calls, and the
    address of its sidecar's outbound listener (`outbound`, HOST:PORT), which a service that calls
    others needs."""
    work = service.work
    if work.kind == "factorial":
        what = {"kind": "factorial", "n": work.amount}
    elif work.kind == "sleep":
        what = {"kind": "sleep", "ms": work.amount / 1000}
    else:
        what = {"kind": "none"}
    config = {"service": service.name, "replica": replica, "work": what,
              "calls": [{"service": c.service, "times": c.times, "parallel": c.parallel} for c in service.calls]}
    if service.calls:
        config["outbound"] = outbound
    return config


def topology_from_record(record: dict) -> Topology:
    """A plan's topology record back as a Topology (the runner's and the reports' view)."""
    services = []
    for entry in record["services"]:
        work = entry["work"]
        amount = work.get("n", 0) if work["kind"] == "factorial" else work.get("us", 0)
        services.append(ServiceDef(
            entry["name"], Work(work["kind"], int(amount)),
            tuple(CallStep(c["service"], int(c["times"]), bool(c["parallel"])) for c in entry["calls"]),
            int(entry.get("replicas", 1)), entry.get("cpus"), entry.get("noisy_cpus")))
    return Topology(record["entry"], tuple(services))


def topology_problem(record: dict) -> str | None:
    """What makes a (schema-valid) topology record unrunnable -- a call or the entry naming no service,
    a name used twice, a cycle -- or None: a plan's record is checked before a run trusts it."""
    names = [service["name"] for service in record["services"]]
    if len(set(names)) != len(names):
        return "a service is declared twice"
    if record["entry"] not in names:
        return f"the entry {record['entry']!r} is not a service"
    graph = {service["name"]: [call["service"] for call in service["calls"]] for service in record["services"]}
    for name, callees in graph.items():
        unknown = [callee for callee in callees if callee not in graph]
        if unknown:
            return f"{name} calls {unknown[0]!r}, which is not a service"
    cycle = find_cycle(graph)
    return f"the calls go round in a cycle: {' -> '.join(cycle)}" if cycle else None


def find_cycle(calls: dict[str, list[str]]) -> list[str] | None:
    """A cycle in the call graph as the services along it (first repeated at the end), or None."""
    state: dict[str, int] = {}          # 1: on the current path, 2: done
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for callee in calls.get(name, ()):
            if state.get(callee) == 1:
                return path[path.index(callee):] + [callee]
            if callee in calls and state.get(callee) is None:
                found = visit(callee)
                if found:
                    return found
        path.pop()
        state[name] = 2
        return None

    for name in calls:
        if state.get(name) is None:
            found = visit(name)
            if found:
                return found
    return None
