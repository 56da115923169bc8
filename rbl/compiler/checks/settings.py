"""Pass 3: the space's own settings (rounds, users, successes, max_requests, target, fault.*)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ...lang import ast
from ..axes import single
from ...lang.types import Bound, ParamType, suggest
from ...lang.units import Value, format_value
from ...libraries.istio import OLDEST_RELEASE, RELEASE_FORMAT, parse_release
from ..urlpath import target_problem
from ..workload import LOAD_KINDS, LOAD_SETTINGS
from .context import CheckContext
from .load import check_load
from .objective import is_objective_key
from .values import evaluate_axis, evaluate_single, report_set_twice


@dataclass(frozen=True)
class SettingDef:
    type: ParamType
    default: Value | None
    axis: bool
    doc: str


def _int(low: int, high: int | None = None) -> ParamType:
    bounds = [Bound(">=", Value("int", low))]
    if high is not None:
        bounds.append(Bound("<", Value("int", high)))
    return ParamType("int", bounds=tuple(bounds))


MAX_DELAY_MS = 2**31 - 1
ORDERS = ("sequential", "randomized", "blocked")

SPACE_SETTINGS: dict[str, SettingDef] = {
    "rounds": SettingDef(_int(1), Value("int", 1), False, "times each scenario is run"),
    "users": SettingDef(_int(1), None, True, "virtual users per scenario (U)"),
    "successes": SettingDef(_int(1), Value("int", 10), False, "successful calls each virtual user needs (n)"),
    "max_requests": SettingDef(_int(1), Value("int", 500), False, "most requests a virtual user may send"),
    # the target may vary under open-loop load or a population (target_dimension.py)
    "target": SettingDef(ParamType("string"), Value("string", "/bytes/1000"), True, "httpbin path called (T)"),
    "fault.kind": SettingDef(ParamType("enum", ("abort", "delay")), Value("enum", "abort"), False,
                             "abort (reply with fault.status) or delay (wait fault.duration)"),
    "fault.status": SettingDef(_int(200, 600), Value("int", 503), False, "HTTP status of injected aborts"),
    # at most 2^31-1 ms: Envoy's fixed_duration_ms (and rbl's proxy) take a signed 32-bit integer
    "fault.duration": SettingDef(
        ParamType("duration", bounds=(Bound(">", Value("duration", Fraction(0))),
                                      Bound("<=", Value("duration", Fraction(MAX_DELAY_MS * 1_000_000))))),
        None, False, "length of injected delays"),
    "fault.at": SettingDef(ParamType("service"), None, False,
                           "the service of the topology that injects the faults [default: the proxy in front of "
                           "the entry service]"),
    "fault.by": SettingDef(ParamType("enum", ("service", "sidecar")), None, False,
                           "who injects a fault at a service: the service itself, or its callers' sidecars in "
                           "their calls of it (Istio's VirtualService fault) [default: service]"),
    "fault.from": SettingDef(ParamType("service"), None, False,
                             "with `fault.by = sidecar`: the one caller whose sidecar injects it (one edge) "
                             "[default: every caller]"),
    "fault.rate": SettingDef(
        ParamType("percent", bounds=(Bound(">=", Value("percent", Fraction(0))),
                                     Bound("<=", Value("percent", Fraction(100))))),
        Value("percent", Fraction(0)), True, "share of requests faulted (F)"),
    # experiment design (rbl/store/run_order.py): the order rounds run in, and rounds run first
    # per scenario, stored but left out of the report's statistics
    "order": SettingDef(ParamType("enum", ORDERS), Value("enum", "sequential"), False,
                        "sequential (Algorithm 1), randomized (all rounds shuffled) or blocked "
                        "(round 1 of every scenario, then round 2, ...)"),
    "order.seed": SettingDef(_int(0, 2**63), None, False, "seed of the randomized order [default: chosen "
                                                          "at run start and recorded]"),
    "warmup": SettingDef(_int(0, 2**31), Value("int", 0), False,
                         "rounds per scenario run before `rounds`, flagged and left out of the report"),
    # the workload (rbl/compiler/workload.py): closed-loop virtual users, or open-loop arrivals
    "load": SettingDef(ParamType("enum", LOAD_KINDS), Value("enum", "closed"), False,
                       "closed (virtual users, each until `successes`), open (requests at a rate for a "
                       "duration, whatever the answers) or users (a population, each user thinking an exponential "
                       "time between its answer and its next request, for a duration)"),
    # the target's resources (local backend: a cgroup CPU quota per replica where the machine allows it)
    "target.cpus": SettingDef(ParamType("float", bounds=(Bound(">", Value("float", Fraction(0))),
                                                         Bound("<=", Value("float", Fraction(256))))),
                              None, True, "CPU budget of each target replica, in cores (T) [default: unlimited]"),
    "target.replicas": SettingDef(_int(1, 65), Value("int", 1), False,
                                  "target replicas, balanced round robin by the fault proxy"),
    "target.noisy_cpus": SettingDef(ParamType("float", bounds=(Bound(">", Value("float", Fraction(0))),
                                                               Bound("<=", Value("float", Fraction(256))))),
                                    None, False, "CPU budget of the last replica instead of target.cpus "
                                                 "(a noisy neighbour's share)"),
    # what the target does with a request whose caller left (a per-try timeout, a reset): a plain
    # WSGI server works off everything it accepted; a server that honours cancellation does not
    "target.drop_abandoned": SettingDef(ParamType("bool"), Value("bool", False), False,
                                        "whether /factorial/N stops its work once its caller has gone, as a "
                                        "server that honours cancellation does [default: false: it finishes it, "
                                        "as a plain WSGI server does]"),
    # the Istio release whose defaults the mesh policies follow (rbl/libraries/istio.py)
    "istio.version": SettingDef(ParamType("string"), None, False,
                                "the Istio release whose defaults the istio clients' policies follow, e.g. "
                                "\"1.14\" (1.8 and later) [default: today's, as Istio 1.24 and later]"),
    # defaults apply to open-loop spaces only (checks/load.py)
    **{key: SettingDef(setting.type, None, True, setting.doc) for key, setting in LOAD_SETTINGS.items()},
}


def check_settings(ctx: CheckContext) -> None:
    if ctx.space is None:
        return
    seen: dict[str, ast.Bind | ast.Axis] = {}
    for item in ctx.space.body:
        if not isinstance(item, (ast.Bind, ast.Axis)):
            continue
        key = item.key.dotted
        if is_objective_key(key):
            continue                      # the objective's own pass (checks/objective.py)
        definition = SPACE_SETTINGS.get(key)
        if definition is None:
            _unknown(ctx, item)
            continue
        if key in seen:
            report_set_twice(ctx.diags, item, seen[key])
            continue
        seen[key] = item
        ctx.setting_spans[key] = item.span
        what = f"`{key}`"
        if isinstance(item, ast.Axis):
            if not definition.axis:
                ctx.diags.error("E0210", f"`{key}` cannot vary", item.span, "not an axis",
                                help=f"bind one value with `{key} = ...`; the axes of a space are `users`, `fault.rate`, "
                                     "`target`, `target.cpus`, the `load.*` settings and client parameters")
                continue
            value = evaluate_axis(item, definition.type, ctx.diags, what)
        else:
            value = evaluate_single(item, definition.type, ctx.diags, what)
            if value is not None and definition.axis:
                value = single(value, item.value.span)
        if value is not None:
            ctx.settings[key] = value
    _defaults_and_cross_checks(ctx, seen)


def _unknown(ctx: CheckContext, item) -> None:
    if ctx.diags.capped("E0209"):
        return
    key = item.key.dotted
    guess = suggest(key, SPACE_SETTINGS)
    known = ", ".join(k for k in SPACE_SETTINGS if not k.startswith("load.")) + (
        ", and for open-loop load " + ", ".join(k for k in SPACE_SETTINGS if k.startswith("load.")))
    ctx.diags.error("E0209", f"unknown setting `{key}`", item.key.span, "not a space setting",
                    help=(f"did you mean `{guess}`? " if guess else "") + f"the settings are {known}; "
                    "client parameters go inside `client <library>.<pattern> { ... }`")


def _defaults_and_cross_checks(ctx: CheckContext, seen: dict) -> None:
    space_head = ctx.space.name.span if ctx.space.name else ctx.space.span
    for key, definition in SPACE_SETTINGS.items():
        if key in seen:
            continue
        if definition.default is not None:
            ctx.settings[key] = single(definition.default) if definition.axis else definition.default
    open_loop = check_load(ctx, seen, space_head)
    if "users" not in seen and not open_loop:
        ctx.diags.error("E0213", "the space does not say how many virtual users to run", space_head,
                        "no `users`", help="add `users in [50, 100]` (or `users = 10`)")
    kind = ctx.settings.get("fault.kind")
    if kind is not None and kind.v == "delay" and "fault.duration" not in seen:
        ctx.diags.error("E0213", "a delay fault needs a duration", seen["fault.kind"].span,
                        "no `fault.duration`", help="add e.g. `fault.duration = 1000ms`")
    duration = ctx.settings.get("fault.duration")
    if duration is not None and duration.v % 1_000_000 != 0:
        ctx.diags.error("E0212", "`fault.duration` must be a whole number of milliseconds",
                        seen["fault.duration"].value.span, "the proxy takes integer ms",
                        help="Envoy's fault.http.delay.fixed_duration_ms is an integer")
    if kind is not None and kind.v == "abort" and "fault.duration" in seen:
        ctx.diags.error("E0219", "`fault.duration` only applies to delay faults", seen["fault.duration"].span,
                        "abort faults reply at once", help="remove it, or set `fault.kind = delay`")
    if kind is not None and kind.v == "delay" and "fault.status" in seen:
        ctx.diags.error("E0219", "`fault.status` only applies to abort faults", seen["fault.status"].span,
                        "delay faults keep the real status", help="remove it, or set `fault.kind = abort`")
    by = ctx.settings.get("fault.by")
    if "fault.from" in seen and (by is None or by.v != "sidecar"):
        ctx.diags.error("E0219", "`fault.from` only applies to a fault the callers' sidecars inject",
                        seen["fault.from"].span, "no `fault.by = sidecar`",
                        help="add `fault.by = sidecar` (Envoy's fault filter in that caller's sidecar), or remove it")
    if "fault.by" in seen and "fault.at" not in seen:
        ctx.diags.error("E0219", "`fault.by` only applies to a fault placed with `fault.at`", seen["fault.by"].span,
                        "no `fault.at`", help="add `fault.at = SERVICE` (a service of the topology), or remove it")
    _check_istio_release(ctx, seen)
    order = ctx.settings.get("order")
    if "order.seed" in seen and order is not None and order.v != "randomized":
        ctx.diags.error("E0219", "`order.seed` only applies to a randomized order", seen["order.seed"].span,
                        f"the order is {order.v}", help="remove it, or set `order = randomized`")
    successes, max_requests = ctx.settings.get("successes"), ctx.settings.get("max_requests")
    if successes is not None and max_requests is not None and successes.v > max_requests.v:
        culprit = seen.get("max_requests") or seen.get("successes")
        span = culprit.span if culprit else space_head
        ctx.diags.error("E0218", f"`max_requests` ({max_requests.v}) is below `successes` ({successes.v})",
                        span, "no virtual user could finish",
                        help="a virtual user stops after max_requests requests; make it at least successes")
    _check_target(ctx, seen, open_loop)


def _check_target(ctx: CheckContext, seen: dict, open_loop: bool) -> None:
    """Each path a URL path; a target that varies (|T| > 1) only where each scenario's load can
    meet its own target: open-loop load or a population, at rates that need no calibration."""
    if "target" in seen and "target" in ctx.settings:
        node = seen["target"].value
        for index, value in enumerate(ctx.settings["target"]):
            problem = target_problem(str(value.v))
            if problem is not None:
                items = getattr(node, "items", ())
                span = items[index].span if index < len(items) else node.span
                ctx.diags.error("E0218", f"`target` must be a URL path on the target service, found "
                                         f"{format_value(value)}", span,
                                f"not a URL path: {problem}",
                                help='write the httpbin path, e.g. `target = "/bytes/1000"`; escape other '
                                     'characters as %XX (a space is %20)')
                break
    varying = [key for key in ("target", "target.cpus") if key in seen and len(ctx.settings.get(key, ())) > 1]
    shares = [key for key in ("load.rate", "load.peak") if key in seen and key in ctx.settings]
    for key in varying:
        if not open_loop:
            ctx.diags.error("E0210", f"`{key}` can vary only under open-loop load or a population of users",
                            seen[key].span, "the load is closed-loop (virtual users)",
                            help=f"add `load = open` (or `load = users`), or bind one value with `{key} = ...` "
                                 "and run one spec per target")
        elif shares and "load.capacity" not in ctx.settings:
            ctx.diags.error("E0231", f"`{key}` varies, and the load's rate is a share of one calibrated capacity",
                            seen[key].span, "each target point has a capacity of its own",
                            secondary=tuple((seen[share].span, "a share of capacity") for share in shares),
                            help="give the rate in requests per second (`load.rps`), fix the capacity with "
                                 "`load.capacity = 50`, or use a population (`load = users`)")


def _check_istio_release(ctx: CheckContext, seen: dict) -> None:
    release = ctx.settings.get("istio.version")
    if release is None:
        return
    parsed = parse_release(str(release.v))
    if parsed is None or parsed < OLDEST_RELEASE:
        del ctx.settings["istio.version"]
        oldest = ".".join(map(str, OLDEST_RELEASE))
        ctx.diags.error("E0229", f"`istio.version` must be an Istio release, {oldest} or later, found "
                                 f"{format_value(release)}", seen["istio.version"].value.span,
                        "not a release rbl knows" if parsed is not None else "not a release number",
                        help=f"write {RELEASE_FORMAT}; rbl knows Istio's defaults from {oldest} on")
