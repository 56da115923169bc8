"""Pass: a space's `topology { ... }` block, as a Topology (rbl/compiler/topology.py): its services'
settings, their calls (to services that exist, never in a cycle), the entry; and, once the clients
are checked, every placement (a mesh policy's `host`, `fault.at`) on a service it declares."""

from __future__ import annotations

import os
from fractions import Fraction

from ...lang import ast
from ...lang.source import Span
from ...lang.types import Bound, ParamType, suggest
from ...lang.units import Value
from ...topology import ALL_SERVICES, CallStep, ServiceDef, Topology, Work, find_cycle
from .context import CheckContext
from .values import evaluate_single, report_set_twice

MAX_SERVICES = 32
MAX_REPLICAS = 64
MAX_TIMES = 100                      # calls of one step
MAX_REQUESTS_PER_ENTRY = 10_000      # internal requests one entry request may become (without retries)
MAX_FACTORIAL = 100_000              # the chain service's bound too (about a second and a half of CPU)
MAX_SLEEP_US = 60_000_000
# the settings a topology makes meaningless: the entry service is the target
TARGET_SETTINGS = ("target", "target.cpus", "target.replicas", "target.noisy_cpus", "target.drop_abandoned")
MODES = ("sequential", "parallel")


def _budget() -> ParamType:
    return ParamType("float", bounds=(Bound(">", Value("float", Fraction(0))), Bound("<=", Value("float", Fraction(256)))))


SERVICE_SETTINGS = {
    "cpus": (_budget(), "the CPU budget of each replica, in cores [default: unlimited]"),
    "replicas": (ParamType("int", bounds=(Bound(">=", Value("int", 1)), Bound("<=", Value("int", MAX_REPLICAS)))),
                 "instances of the service, balanced by its callers' sidecars [default: 1]"),
    "noisy_cpus": (_budget(), "the CPU budget of the last replica instead of `cpus` (a noisy neighbour)"),
}
WORK_HELP = "write `work = factorial(300)` (CPU work), `work = sleep(5ms)` or `work = none()`"


def check_topology(ctx: CheckContext) -> None:
    if ctx.space is None:
        return
    blocks = [item for item in ctx.space.body if isinstance(item, ast.Topology)]
    if not blocks:
        return
    for extra in blocks[1:]:
        ctx.diags.error("E0604", "a space holds one topology", extra.span, "second topology",
                        secondary=((blocks[0].span, "the first one"),),
                        help="put the services of both in one `topology { ... }` block")
    _refuse_target_settings(ctx, blocks[0])
    ctx.topology = _topology(ctx, blocks[0])


def _refuse_target_settings(ctx: CheckContext, block: ast.Topology) -> None:
    for item in ctx.space.body:
        if isinstance(item, (ast.Bind, ast.Axis)) and item.key.dotted in TARGET_SETTINGS:
            ctx.diags.error("E0604", f"`{item.key.dotted}` does not apply to a space with a topology", item.key.span,
                            "the topology's entry service is the target",
                            secondary=((block.span, "the topology"),),
                            help="set a service's budget and replicas in its block: `service NAME { cpus = 0.5 "
                                 "replicas = 2 }`; the load calls the entry service")


def _topology(ctx: CheckContext, block: ast.Topology) -> Topology | None:
    services: dict[str, tuple[ast.Service, ServiceDef | None]] = {}
    entry: ast.Bind | None = None
    for item in block.body:
        if isinstance(item, ast.Service):
            name = item.name.name
            if name in services:
                ctx.diags.error("E0604", f"service `{name}` is declared twice", item.name.span, "declared again",
                                secondary=((services[name][0].name.span, "first declared here"),),
                                help="give each service one block")
                continue
            services[name] = (item, _service(ctx, item))
        elif isinstance(item, ast.Bind) and item.key.dotted == "entry":
            if entry is not None:
                report_set_twice(ctx.diags, item, entry)
            entry = entry or item
        else:
            ctx.diags.error("E0209", f"unknown topology setting `{item.key.dotted}`", item.key.span,
                            "not a topology setting",
                            help="a topology holds `entry = SERVICE` and `service NAME { ... }` blocks")
    if not services:
        ctx.diags.error("E0604", "the topology declares no service", block.span, "no `service` block",
                        help="declare at least one: `service frontend { work = factorial(300) }`")
        return None
    if len(services) > MAX_SERVICES:
        ctx.diags.error("E0604", f"the topology declares {len(services)} services, more than {MAX_SERVICES}",
                        block.span, "too many services", help="each service runs as its own processes beside a "
                                                              "sidecar Envoy; keep a topology small")
        return None
    ok = _check_calls(ctx, services)
    if not ok and entry is None:           # with a broken call graph, which service is called by none says nothing
        return None
    entry_name = _entry(ctx, block, services, entry)
    if not ok or entry_name is None or any(definition is None for _, definition in services.values()):
        return None
    topology = Topology(entry_name, tuple(definition for _, definition in services.values()))
    return topology if _check_reach(ctx, topology, services, block) else None


def _service(ctx: CheckContext, node: ast.Service) -> ServiceDef | None:
    values: dict = {}
    seen: dict = {}
    work = Work("none")
    calls: list[CallStep] = []
    ok = True
    for item in node.body:
        if isinstance(item, ast.Calls):
            step = _call_step(ctx, item)
            ok = ok and step is not None
            if step is not None:
                calls.append(step)
            continue
        key = item.key.dotted
        if key in seen:
            report_set_twice(ctx.diags, item, seen[key])
            ok = False
            continue
        seen[key] = item
        if key == "work":
            work = _work(ctx, item)
            ok = ok and work is not None
            continue
        if isinstance(item, ast.CallBind) or key not in SERVICE_SETTINGS:
            guess = suggest(key, [*SERVICE_SETTINGS, "work"])
            ctx.diags.error("E0209", f"unknown service setting `{key}`", item.key.span, "not a service setting",
                            help=(f"did you mean `{guess}`? " if guess else "") + "a service takes `work = ...`, "
                            f"{', '.join(f'`{k}`' for k in SERVICE_SETTINGS)} and `calls SERVICE [* times] [parallel]`")
            ok = False
            continue
        value = evaluate_single(item, SERVICE_SETTINGS[key][0], ctx.diags, f"`{key}` of service `{node.name.name}`")
        if value is None:
            ok = False
            continue
        values[key] = value.v
    if not ok:
        return None
    replicas = int(values.get("replicas", 1))
    cpus = _cores(ctx, seen, values, "cpus")
    noisy = _cores(ctx, seen, values, "noisy_cpus")
    if noisy is not None and replicas < 2:
        ctx.diags.error("E0219", "`noisy_cpus` needs two replicas or more", seen["noisy_cpus"].span,
                        "the last replica is the noisy one", help="add `replicas = 3`, or remove `noisy_cpus`")
        return None
    return ServiceDef(node.name.name, work, tuple(calls), replicas, cpus, noisy)


def _cores(ctx: CheckContext, seen: dict, values: dict, key: str) -> float | None:
    if key not in values:
        return None
    cores = os.cpu_count() or 1
    if values[key] > cores:
        ctx.diags.error("E0603", f"`{key}` {float(values[key]):g} is more than this machine's {cores} cores",
                        seen[key].value.span, "a budget the machine cannot give",
                        help="a budget is a share of this machine's cores; at most one replica's worth of all "
                             f"of them (`{key} = {cores}`)")
        return None
    return float(values[key])


def _work(ctx: CheckContext, item) -> Work | None:
    if not isinstance(item, ast.CallBind):
        ctx.diags.error("E0202", "`work` expects factorial(N), sleep(DURATION) or none()", item.value.span,
                        "not a kind of work", help=WORK_HELP)
        return None
    call = item.value
    kind = call.name.name
    if kind not in ("factorial", "sleep", "none"):
        guess = suggest(kind, ("factorial", "sleep", "none"))
        ctx.diags.error("E0211", f"`{kind}` is not a kind of work", call.name.span, "unknown work",
                        help=(f"did you mean `{guess}`? " if guess else "") + WORK_HELP)
        return None
    wanted = 0 if kind == "none" else 1
    if len(call.args) != wanted or any(arg.name is not None or arg.is_axis for arg in call.args):
        ctx.diags.error("E0222", f"`{kind}` takes {'no argument' if wanted == 0 else 'one value'}", call.span,
                        "wrong arguments", help=WORK_HELP)
        return None
    if kind == "none":
        return Work("none")
    node = call.args[0].value
    if kind == "factorial":
        ptype = ParamType("int", bounds=(Bound(">=", Value("int", 0)), Bound("<=", Value("int", MAX_FACTORIAL))))
    else:
        ptype = ParamType("duration", bounds=(Bound(">=", Value("duration", Fraction(0))),
                                              Bound("<=", Value("duration", Fraction(MAX_SLEEP_US * 1000)))))
    if not isinstance(node, (ast.Literal, ast.NameRef)):
        ctx.diags.error("E0202", f"`{kind}` takes one value", node.span, "not one value", help=WORK_HELP)
        return None
    value = evaluate_single(ast.Bind(item.key, node, node.span), ptype, ctx.diags, f"`{kind}`'s argument")
    if value is None:
        return None
    return Work(kind, int(value.v) if kind == "factorial" else int(Fraction(value.v) / 1000))


def _call_step(ctx: CheckContext, item: ast.Calls) -> CallStep | None:
    times = 1
    if item.times is not None:
        if item.times.value is None:
            return None
        times = item.times.value.v
        if not 1 <= times <= MAX_TIMES:
            ctx.diags.error("E0203", f"a service calls another 1 to {MAX_TIMES} times in a step, found {times}",
                            item.times.span, f"must be 1 to {MAX_TIMES}",
                            help="write `calls SERVICE * 4`; leave out `* N` for one call")
            return None
    parallel = False
    if item.mode is not None:
        if item.mode.name not in MODES:
            guess = suggest(item.mode.name, MODES)
            ctx.diags.error("E0211", f"`{item.mode.name}` is not how calls are made", item.mode.span,
                            "unknown mode", help=(f"did you mean `{guess}`? " if guess else "")
                            + "a step's calls are `sequential` (the default: one after another, stopping at a "
                              "failure) or `parallel` (all at once)")
            return None
        parallel = item.mode.name == "parallel"
    return CallStep(item.service.name, times, parallel)


def _check_calls(ctx: CheckContext, services: dict) -> bool:
    ok = True
    graph: dict[str, list[str]] = {}
    for name, (node, _definition) in services.items():
        graph[name] = []
        for item in node.body:
            if not isinstance(item, ast.Calls):
                continue
            callee = item.service.name
            if callee == name:
                ctx.diags.error("E0602", f"service `{name}` calls itself", item.service.span, "a call to itself",
                                help="a request would never end; call another service")
                ok = False
            elif callee not in services:
                _unknown_service(ctx, callee, item.service.span, services)
                ok = False
            else:
                graph[name].append(callee)
    if not ok:
        return False
    cycle = find_cycle(graph)
    if cycle is not None:
        first = services[cycle[0]][0]
        span = next(i.service.span for i in first.body if isinstance(i, ast.Calls) and i.service.name == cycle[1])
        ctx.diags.error("E0602", f"the calls go round in a cycle: {' -> '.join(cycle)}", span, "closes a cycle",
                        help="a request would never end; a topology's calls must go one way (a service may be "
                             "called by several others, but never by one it calls)")
        return False
    return True


def _entry(ctx: CheckContext, block: ast.Topology, services: dict, entry: ast.Bind | None) -> str | None:
    if entry is not None:
        value = evaluate_single(entry, ParamType("service"), ctx.diags, "`entry`")
        if value is None:
            return None
        if value.v not in services:
            _unknown_service(ctx, value.v, entry.value.span, services)
            return None
        return value.v
    called = {i.service.name for node, _ in services.values() for i in node.body if isinstance(i, ast.Calls)}
    roots = [name for name in services if name not in called]
    if len(roots) == 1:
        return roots[0]
    ctx.diags.error("E0604", "the topology does not say which service the load calls", block.span, "no `entry`",
                    help=f"add `entry = {roots[0] if roots else next(iter(services))}`"
                         + (f"; {len(roots)} services are called by none" if len(roots) > 1 else ""))
    return None


def _check_reach(ctx: CheckContext, topology: Topology, services: dict, block: ast.Topology) -> bool:
    reached = set(topology.order())
    for name, (node, _) in services.items():
        if name not in reached:
            ctx.diags.warning("W0601", f"service `{name}` is never called", node.name.span,
                              f"`{topology.entry}` never reaches it",
                              help="it runs but no request gets there; call it from a service, or remove it")
    counts = topology.requests_per_entry()
    total = sum(counts.values())
    if total > MAX_REQUESTS_PER_ENTRY:
        ctx.diags.error("E0604", f"one entry request becomes {total} requests, more than {MAX_REQUESTS_PER_ENTRY}",
                        block.span, "too much fan-out", help="fewer calls per step (`* N`) or fewer tiers")
        return False
    return True


def _unknown_service(ctx: CheckContext, name: str, span: Span, services) -> None:
    guess = suggest(name, list(services))
    ctx.diags.error("E0601", f"no service `{name}` in the topology", span, "unknown service",
                    help=(f"did you mean `{guess}`? " if guess else "")
                    + f"the services are {', '.join(f'`{s}`' for s in services)}")


# ---- placements: after the clients are checked ---------------------------------------------------

def check_placements(ctx: CheckContext) -> None:
    """Every `service`-typed value (a mesh policy's `host`, `fault.at`) names a service of the topology
    (or `all`, for a policy); without a topology, none is given."""
    if ctx.space is None:
        return
    topology = ctx.topology
    if topology is None and any(isinstance(item, ast.Topology) for item in ctx.space.body):
        return                             # a topology the checks refused: reported there
    for client in ctx.clients:
        for param in client.params:
            if param.definition.type.base != "service" or not param.explicit:
                continue
            for value in param.values:
                if topology is None:
                    _no_topology(ctx, f"`{param.name}` of client `{client.label}`", param.span)
                    break
                if value.v != ALL_SERVICES and value.v not in topology.names:
                    _unknown_service(ctx, value.v, param.span, [*topology.names, ALL_SERVICES])
                    break
    at = ctx.settings.get("fault.at")
    if at is not None:
        span = next(item.value.span for item in ctx.space.body
                    if isinstance(item, (ast.Bind, ast.Axis)) and item.key.dotted == "fault.at")
        if topology is None:
            _no_topology(ctx, "`fault.at`", span)
        elif at.v not in topology.names:
            _unknown_service(ctx, at.v, span, topology.names)
        else:
            _check_fault_caller(ctx, topology, at.v)


def _check_fault_caller(ctx: CheckContext, topology, at: str) -> None:
    caller = ctx.settings.get("fault.from")
    if caller is None:
        return
    span = next(item.value.span for item in ctx.space.body
                if isinstance(item, (ast.Bind, ast.Axis)) and item.key.dotted == "fault.from")
    if caller.v not in topology.names:
        _unknown_service(ctx, caller.v, span, topology.names)
    elif at not in [step.service for step in topology.service(caller.v).calls]:
        callers = [s.name for s in topology.services if at in [step.service for step in s.calls]]
        ctx.diags.error("E0604", f"`{caller.v}` does not call `{at}`: no edge to inject the fault on", span,
                        "not a caller of fault.at",
                        help=f"the services that call `{at}` are {', '.join(f'`{c}`' for c in callers)}"
                             if callers else f"no service calls `{at}`: it is the entry, where the proxy injects")


def _no_topology(ctx: CheckContext, what: str, span: Span | None) -> None:
    ctx.diags.error("E0604", f"{what} places it on a service, but the space has no topology", span,
                    "no service to place it on",
                    help="declare the services in `topology { service NAME { ... } }`, or remove the placement: "
                         "without a topology a policy governs the client's calls of the target")
