"""The human-readable summary `rbl plan` prints: Size(S) and its factor breakdown."""

from __future__ import annotations

from .compiler.axes import RangeAxis
from .compiler.space import TestSpace
from .compiler.units import Value, format_value

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


def plan_summary(space: TestSpace) -> str:
    fault = space.fault
    what = f"abort {fault.status}" if fault.kind == "abort" else f"delay {format_value(fault.duration)}"
    confs = sum(c.configurations for c in space.clients)
    width = max([len(c.label) for c in space.clients] + [10])
    lines = [
        f"space {space.name} ({space.source_name})",
        f"  target      {space.target}, {space.successes} successes per virtual user, "
        f"at most {space.max_requests} requests",
        f"  |F| = {len(fault.rates):<6} fault rates ({what}): {_values(fault.rates)}",
        f"  |U| = {len(space.users):<6} user counts: {_values(space.users)}",
        f"  sum |CONF_i| = {confs} over {len(space.clients)} client{'s' if len(space.clients) != 1 else ''}:",
    ]
    for client in space.clients:
        axes = "; ".join(f"{p.name} in [{_values(p.values)}]" for p in client.axes)
        lines.append(f"    {client.label:<{width}} {client.configurations:>6}  {axes}".rstrip())
    lines.append("")
    lines.append(f"Size(S) = {len(fault.rates)} x {len(space.users)} x {confs} = {space.size} "
                 f"scenario{'s' if space.size != 1 else ''}")
    lines.append(f"runs    = {space.size} x {space.rounds} round{'s' if space.rounds != 1 else ''} = {space.runs}")
    return "\n".join(lines)
