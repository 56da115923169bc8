"""The human-readable summary `rbl plan` prints: Size(S) and its factor breakdown."""

from __future__ import annotations

from .compiler.axes import RangeAxis
from .compiler.space import TestSpace
from .lang.units import Value, format_value
from .metric_directions import objective_text
from .libraries.catalogue import NESTED
from .libraries.composition import SEPARATOR, nesting

MAX_LISTED = 8


def _values(axis) -> str:
    if isinstance(axis, RangeAxis) and len(axis) > MAX_LISTED:
        return f"{format_value(axis[0])}..{format_value(axis.last)} step {_step(axis)} ({len(axis)} values)"
    values = [format_value(v) for v in (axis if len(axis) <= MAX_LISTED else [axis[i] for i in range(MAX_LISTED)])]
    more = f", ... ({len(axis)} values)" if len(axis) > MAX_LISTED else ""
    return ", ".join(values) + more


def _step(axis: RangeAxis) -> str:
    step = int(axis.step) if axis.type == "int" else axis.step
    return format_value(Value(axis.type, step))


_SHOWN = ("load.rate", "load.rps", "load.arrivals", "load.duration", "load.warmup", "load.profile", "load.peak",
          "load.peak_rps", "load.period", "load.length", "load.trace", "load.capacity", "load.users", "load.think")


def _resources(resources: dict | None) -> str:
    if not resources:
        return ""
    replicas = resources.get("replicas", 1)
    parts = [f"{replicas} replica{'s' if replicas != 1 else ''}"]
    if "cpus" in resources:
        parts.append(f"{resources['cpus']:g} CPU each")
    if "noisy_cpus" in resources:
        parts.append(f"the last {resources['noisy_cpus']:g} CPU")
    if resources.get("drop_abandoned"):
        parts.append("dropping abandoned work")
    return f" ({', '.join(parts)})"


def _topology_lines(space: TestSpace) -> list[str]:
    """The topology as a figure would draw it: each service's work, budget and calls, tier by tier."""
    topology = space.topology
    tiers = topology.tiers()
    per_entry = topology.requests_per_entry()
    load = "open-loop load" if space.workload is not None else f"{space.successes} successes per virtual user"
    lines = [f"  topology    entry {topology.entry}, {sum(per_entry.values())} requests per entry request; {load}"]
    for service in sorted(topology.services, key=lambda s: (tiers.get(s.name, 99), s.name)):
        budget = "" if service.cpus is None else f", {service.cpus:g} CPU"
        if service.noisy_cpus is not None:
            budget += f" (last replica {service.noisy_cpus:g})"
        replicas = f" x{service.replicas}" if service.replicas > 1 else ""
        calls = ", ".join(f"{c.service}{f' x{c.times}' if c.times > 1 else ''}{' parallel' if c.parallel else ''}"
                          for c in service.calls)
        tier = f"tier {tiers[service.name]}" if service.name in tiers else "never called"
        lines.append(f"    {tier:<12} {service.name}{replicas}: {service.work.describe()}{budget}"
                     + (f" -> {calls}" if calls else ""))
    return lines


def _target_lines(space: TestSpace, what: str) -> list[str]:
    """A varying target: its dimension |T| and each axis, the budget varying slowest."""
    dimension = space.targets
    resources = {key: value for key, value in (space.target_resources or {}).items() if key != "cpus"}
    axes = [f"target in [{_values(dimension.paths)}]" if len(dimension.paths) > 1 else f"target = {space.target}"]
    if dimension.cpus is not None:
        axes.insert(0, f"target.cpus in [{_values(dimension.cpus)}]" if len(dimension.cpus) > 1
                    else f"target.cpus = {_values(dimension.cpus)}")
    restarts = ", each new CPU budget a restart" if dimension.cpus is not None and len(dimension.cpus) > 1 else ""
    return [f"  |T| = {dimension.size:<6} targets{_resources(resources)}{restarts}, {what}:",
            f"  {'':<13}" + "; ".join(axes)]


def plan_summary(space: TestSpace) -> str:
    fault = space.fault
    what = f"abort {fault.status}" if fault.kind == "abort" else f"delay {format_value(fault.duration)}"
    confs = sum(c.configurations for c in space.clients)
    width = max([len(c.label) for c in space.clients] + [10])
    lines = [f"space {space.name} ({space.source_name})"]
    if space.topology is not None:
        lines += _topology_lines(space)
    elif space.workload is None:
        lines.append(f"  target      {space.target}{_resources(space.target_resources)}, {space.successes} "
                     f"successes per virtual user, "
                     f"at most {space.max_requests} requests")
    else:
        what = "a population of users" if space.workload.kind == "users" else "open-loop load"
        if space.targets is None:
            lines.append(f"  target      {space.target}{_resources(space.target_resources)}, {what}")
        else:
            lines += _target_lines(space, what)
    faulty = any(rate.v for rate in fault.rates)
    lines.append(f"  |F| = {len(fault.rates):<6} fault rates ({what}): {_values(fault.rates)}" if faulty
                 else f"  |F| = {len(fault.rates):<6} no fault injected (fault.rate = 0%)")
    if space.workload is None:
        lines.append(f"  |U| = {len(space.users):<6} user counts: {_values(space.users)}")
    elif space.workload.kind == "users":
        lines.append(f"  |U| = {len(space.users):<6} no virtual users of the seed paper's kind: the load's users "
                     "(load.users) think and send")
    else:
        lines.append(f"  |U| = {len(space.users):<6} no virtual users: requests go out at the load's rate")
    if space.workload is not None:
        lines.append(f"  |L| = {space.loads:<6} loads: " + "; ".join(
            f"{key} {'in [' + _values(values) + ']' if len(values) > 1 else '= ' + _values(values)}"
            for key, values in space.workload.settings if len(values) > 1 or key in _SHOWN))
    if space.istio_version is not None:
        lines.append(f"  istio       the istio clients follow Istio {space.istio_version}'s defaults")
    if space.objective is not None:
        lines.append(f"  objective   {objective_text(space.objective.record())}")
    lines.append(f"  sum |CONF_i| = {confs} over {len(space.clients)} client{'s' if len(space.clients) != 1 else ''}:")
    for client in space.clients:
        axes = "; ".join(f"{p.name} in [{_values(p.values)}]" for p in client.axes)
        lines.append(f"    {client.label:<{width}} {client.configurations:>6}  {axes}".rstrip())
        if client.library.composition == NESTED and SEPARATOR in client.pattern.name:
            lines.append(f"    {'':<{width}} {'':>6}  nests {nesting(client.pattern.name)}, as written")
    lines.append("")
    loads = f"{space.loads} x " if space.workload is not None else ""
    targets = f"{space.targets.size} x " if space.targets is not None else ""
    lines.append(f"Size(S) = {targets}{len(fault.rates)} x {len(space.users)} x {loads}{confs} = {space.size} "
                 f"scenario{'s' if space.size != 1 else ''}")
    lines.append(f"runs    = {space.size} x {space.rounds} round{'s' if space.rounds != 1 else ''} = {space.runs}")
    return "\n".join(lines)
