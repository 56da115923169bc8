"""Pass: what Istio's own validation refuses in a client of the built-in `istio` library, which the
catalogue's types cannot say (docs/library-semantics.md, section istio): retryOn's tokens, retries
switched off while other retry fields are set, and a connection pool with no setting; and where a
controller (adaptive_breaker, aimd_retry) and Envoy's adaptive filters can run."""

from __future__ import annotations

from http import HTTPStatus

from ...libraries.istio import (ADAPTIVE_BREAKER, AIMD_RETRY, BUILT_IN_CONTROLLERS, CONTROLLED, CONTROLLER_GROUP,
                                ENVOY_FILTERS, RETRY_CONDITIONS)
from ..axes import RangeAxis
from ..space import ClientSpec, Param
from .context import CheckContext

ISTIO = "istio"
KNOWN_STATUSES = {status.value for status in HTTPStatus}
RETRY_FIELDS = ("perTryTimeout", "retryOn", "backoff")   # Istio refuses these with attempts 0
POOL = "circuit_breaker"


def check_mesh_policies(ctx: CheckContext) -> None:
    for client in ctx.clients:
        library = ctx.libraries.get(ISTIO)
        if client.library is not library or not library.builtin:
            continue
        params = {p.name: p for p in client.params}
        policies = _policies(client)
        for policy in policies:
            qualified = "" if len(policies) == 1 else f"{policy}."     # a composed client's names
            if policy in ("retry", AIMD_RETRY):
                _check_retry_on(ctx, params, qualified)
            if policy == "retry":
                _check_retry(ctx, params, qualified)
            if policy == POOL:
                _check_pool(ctx, client, params, qualified)
        controllers = [policy for policy in policies if policy in CONTROLLED]
        for controller in controllers:
            _check_controller(ctx, client, controller, policies)
        if len(controllers) > 1:
            _check_one_interval(ctx, client, controllers)
        for sidecar_filter in (policy for policy in policies if policy in ENVOY_FILTERS):
            _check_sidecar_filter(ctx, client, sidecar_filter, controllers)


# Envoy's filters sit on the client sidecar's listener: they act on every call the sidecar makes, so
# they cannot be placed on one service of a chain; and a controller's retune would restart them


def _check_sidecar_filter(ctx: CheckContext, client: ClientSpec, policy: str, controllers: list[str]) -> None:
    if ctx.topology is not None:
        ctx.diags.error("E0228", f"`{policy}` runs on one hop for now, not on a topology", client.span,
                        "Envoy's filter on a topology",
                        help="remove the topology, or limit the calls of a service with `circuit_breaker` "
                             "(`host = SERVICE`)")
    elif controllers:
        ctx.diags.error("E0228", f"`{policy}` cannot be composed with the controller `{controllers[0]}`",
                        client.span, "two adaptive policies in one sidecar",
                        help="each retune of the controller would restart Envoy's filter: compare them as two "
                             "clients")


# the static policy each controller sets in force: a client cannot have both
CONTROLS = {ADAPTIVE_BREAKER: POOL, AIMD_RETRY: "retry"}


def _check_controller(ctx: CheckContext, client: ClientSpec, controller: str, policies: list[str]) -> None:
    where = client.span
    if ctx.workload is None:
        ctx.diags.error("E0228", f"`{controller}` needs open-loop load", where, "a controller under virtual users",
                        help="it retunes its policy from the requests answered in the last window: add "
                             "`load = open` and a rate (`load.rate = 120%`)")
    elif ctx.topology is not None:
        ctx.diags.error("E0228", f"`{controller}` runs on one hop for now, not on a topology", where,
                        "a controller on a topology", help="remove the topology, or use a static policy")
    elif (unknown := _unknown_algorithm(client, controller, policies)) is not None:
        value, installed = unknown
        ctx.diags.error("E0228", f"no controller named {value!r} is installed", _value_span(client, controller, policies),
                        "not built in, not an entry point", help=f"`{controller}` runs "
                        f"`{BUILT_IN_CONTROLLERS[controller]}`, or a controller of your own installed under the "
                        f"entry-point group {CONTROLLER_GROUP} (docs/controllers.md); installed here: "
                        f"{', '.join(installed[:8]) or 'none'}")
    elif CONTROLS[controller] in policies:
        ctx.diags.error("E0228", f"`{controller}` sets the {CONTROLS[controller]} it controls; it cannot be "
                                 f"composed with `{CONTROLS[controller]}`", where, "both set the same field",
                        help=f"keep one of them; `{controller}` starts from its own "
                             f"{CONTROLLED[controller]}")


def _check_one_interval(ctx: CheckContext, client: ClientSpec, controllers: list[str]) -> None:
    """Composed controllers decide together, on one window: their `interval`s must be one value."""
    params = {p.name: p for p in client.params}
    intervals = [params[f"{controller}.interval"] for controller in controllers]
    values = {value.v for param in intervals for value in param.values}
    if len(values) > 1 or any(len(param.values) > 1 for param in intervals):
        where = next((p.span for p in intervals if p.explicit and p.span is not None), client.span)
        ctx.diags.error("E0228", f"the controllers {' and '.join(f'`{c}`' for c in controllers)} of one client "
                                 "need one `interval`", where, "they decide together, on the same window",
                        help="give each the same single value, e.g. " +
                             " and ".join(f"`{c}.interval = 5s`" for c in controllers))


def _policies(client: ClientSpec) -> list[str]:
    name = client.pattern.name
    return [] if name == "baseline" else name.split("+")


def _check_retry_on(ctx: CheckContext, params: dict[str, Param], qualified: str) -> None:
    retry_on = params.get(f"{qualified}retryOn")
    if retry_on is not None:
        for value in retry_on.values:
            bad = [token for token in str(value.v).split(",") if not _known_condition(token)]
            if bad:
                ctx.diags.error("E0227", f"Istio refuses retryOn {str(value.v)!r}: `{bad[0][:40]}` is not a retry "
                                         "condition", retry_on.span, "not accepted by Istio",
                                help="Envoy conditions (5xx, reset, connect-failure, gateway-error, ...) or HTTP "
                                     "statuses, comma-separated without spaces; `rbl explain E0227` lists them")
                break


def _check_retry(ctx: CheckContext, params: dict[str, Param], qualified: str) -> None:
    attempts = params.get(f"{qualified}attempts")
    if attempts is None or not _has_zero(attempts):
        return
    given = [name for name in RETRY_FIELDS if (p := params.get(f"{qualified}{name}")) is not None and p.explicit]
    if given:
        ctx.diags.error("E0227", f"Istio refuses attempts 0 together with {given[0]}", attempts.span,
                        "0 switches retries off", help=f"leave out {qualified}{given[0]}, or attempts 0 (the "
                                                       "`istio.baseline` client has no retries)")


def _check_pool(ctx: CheckContext, client: ClientSpec, params: dict[str, Param], qualified: str) -> None:
    own = [p for name, p in params.items() if name.startswith(qualified) and p.definition.type.base != "service"]
    if not any(p.explicit for p in own):
        ctx.diags.error("E0227", "Istio refuses a connection pool with no setting", client.span,
                        "no circuit_breaker parameter set",
                        help=f"set e.g. `{qualified}http2MaxRequests = 20` or `{qualified}http1MaxPendingRequests = 10`")


def _known_condition(token: str) -> bool:
    if token in RETRY_CONDITIONS:
        return True
    return token.isascii() and token.isdigit() and len(token) <= 3 and int(token) in KNOWN_STATUSES


def _has_zero(param: Param) -> bool:
    if isinstance(param.values, RangeAxis):       # ascending, never enumerated: 0 can only be first
        return param.values.count > 0 and param.values[0].v == 0
    return any(value.v == 0 for value in param.values)


def _controller_param(client: ClientSpec, controller: str, policies: list[str]) -> Param | None:
    qualified = "" if len(policies) == 1 else f"{controller}."
    return next((p for p in client.params if p.name == f"{qualified}controller"), None)


def _unknown_algorithm(client: ClientSpec, controller: str, policies: list[str]) -> tuple[str, list[str]] | None:
    """The first `controller` value that is neither built in nor installed, with what is installed."""
    param = _controller_param(client, controller, policies)
    if param is None:
        return None
    from importlib.metadata import entry_points
    installed = sorted(point.name for point in entry_points(group=CONTROLLER_GROUP))
    for value in param.values:
        if value.v != BUILT_IN_CONTROLLERS[controller] and value.v not in installed:
            return str(value.v), installed
    return None


def _value_span(client: ClientSpec, controller: str, policies: list[str]):
    param = _controller_param(client, controller, policies)
    return param.span if param is not None and param.span is not None else client.span
