"""The spec's objective: what "better" means in the report's recommendation.

    objective = carriedThroughput          // the metric to optimise, in its own direction
    objective.successP99Ms = 500ms         // a bound: at most 500 ms (at least, for a metric better high)

The metric must be one the space's rounds measure (closed-loop virtual users, or load the generator
sends) and have a better end; a bound is written in its metric's unit. Without `objective`, the
kind of round has a documented default (rbl/metric_directions.py DEFAULT_OBJECTIVES)."""

from __future__ import annotations

from fractions import Fraction

from ...lang import ast
from ...lang.types import Bound, ParamType, coerce, suggest
from ...lang.units import DURATION_UNITS, Value
from ...metric_directions import DEFAULT_OBJECTIVES, direction, objectives_for
from ..space import Objective, ObjectiveBound
from .context import CheckContext

KEY = "objective"
BOUND_TYPES = {
    "ms": ParamType("duration", bounds=(Bound(">=", Value("duration", Fraction(0))),)),
    "share": ParamType("percent", bounds=(Bound(">=", Value("percent", Fraction(0))),
                                          Bound("<=", Value("percent", Fraction(100))))),
    "number": ParamType("float", bounds=(Bound(">=", Value("float", Fraction(0))),)),
}
UNIT_EXAMPLES = {"ms": "500ms", "share": "90%", "number": "100"}


def is_objective_key(key: str) -> bool:
    return key == KEY or key.startswith(KEY + ".")


def check_objective(ctx: CheckContext) -> None:
    if ctx.space is None:
        return
    items = [item for item in ctx.space.body if isinstance(item, (ast.Bind, ast.Axis))
             and is_objective_key(item.key.dotted)]
    open_loop = ctx.workload is not None
    kind = "open" if open_loop else "closed"
    metrics = objectives_for(open_loop)
    metric, bounds, seen = None, [], {}
    for item in items:
        key = item.key.dotted
        if key in seen:
            ctx.diags.error("E0208", f"`{key}` is set twice", item.span, "set again",
                            secondary=((seen[key].span, "first set here"),), help="keep one")
            continue
        seen[key] = item
        if isinstance(item, ast.Axis):
            ctx.diags.error("E0210", f"`{key}` cannot vary", item.span, "not an axis",
                            help="an objective is one question of the whole space: bind it with `=`")
            continue
        if key == KEY:
            metric = _objective_metric(ctx, item, metrics, kind)
        else:
            bound = _bound(ctx, item, key.split(".", 1)[1], metrics, kind)
            if bound is not None:
                bounds.append(bound)
    if metric is None and KEY in seen:
        return                        # reported; no default in its place
    if metric is None and not bounds:
        return                        # the kind's default, applied when the plan is written
    ctx.objective = Objective(metric or DEFAULT_OBJECTIVES[kind], direction(metric or DEFAULT_OBJECTIVES[kind]),
                              tuple(bounds), explicit=metric is not None)


def _metric_name(ctx: CheckContext, item: ast.Bind, name: str, node, metrics: dict, kind: str,
                 what: str) -> str | None:
    if name not in metrics:
        other = objectives_for(kind == "closed")
        guess = suggest(name, metrics)
        if name in other:
            why = (f"`{name}` is measured by {'open-loop rounds' if kind == 'closed' else 'closed-loop rounds'}, "
                   f"and this space's load is {'closed-loop (virtual users)' if kind == 'closed' else 'sent by the load generator'}")
        else:
            why = f"`{name}` is not a metric {what} can name"
        ctx.diags.error("E0232", why, node.span, "not a metric of this space's rounds",
                        help=(f"did you mean `{guess}`? " if guess else "") + "the metrics are "
                        + ", ".join(metrics))
        return None
    return name


def _objective_metric(ctx: CheckContext, item: ast.Bind, metrics: dict, kind: str) -> str | None:
    node = item.value
    if not isinstance(node, ast.NameRef):
        ctx.diags.error("E0232", "`objective` names a metric", node.span, "not a metric name",
                        help=f"write e.g. `objective = {DEFAULT_OBJECTIVES[kind]}` (no quotes)")
        return None
    if direction(node.name) == "none":
        ctx.diags.error("E0232", f"`{node.name}` has no better end: it is a fact about a mechanism, not a score",
                        node.span, "neither more nor less is better",
                        help=f"optimise what it affects instead, e.g. `objective = {DEFAULT_OBJECTIVES[kind]}`")
        return None
    return _metric_name(ctx, item, node.name, node, metrics, kind, "an objective")


def _bound(ctx: CheckContext, item: ast.Bind, name: str, metrics: dict, kind: str) -> ObjectiveBound | None:
    if _metric_name(ctx, item, name, item.key, metrics, kind, "a bound") is None:
        return None
    unit = metrics[name]
    value = coerce(item.value, BOUND_TYPES[unit], ctx.diags, f"the bound on `{name}` (written in {unit}, e.g. "
                                                              f"{UNIT_EXAMPLES[unit]})")
    if value is None:
        return None
    if unit == "ms":
        limit = float(value.v / DURATION_UNITS["ms"])
    elif unit == "share":
        limit = float(value.v / 100)
    else:
        limit = float(value.v)
    op = ">=" if direction(name) == "higher" else "<="
    return ObjectiveBound(name, op, limit, item.value.span)
