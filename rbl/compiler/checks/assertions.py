"""Pass 5: `assert size <op> expr`, checked at compile time against Equation 1."""

from __future__ import annotations

from math import prod

from .. import ast
from ..space import SizeAssertion
from ..types import COMPARATORS
from .context import CheckContext


def evaluate(expr: ast.Expr) -> int:
    if isinstance(expr, ast.IntExpr):
        return expr.value
    left, right = evaluate(expr.left), evaluate(expr.right)
    return left + right if expr.op == "+" else left * right


def size_and_breakdown(ctx: CheckContext) -> tuple[int, str] | None:
    rates, users = ctx.settings.get("fault.rate"), ctx.settings.get("users")
    if rates is None or users is None or not ctx.clients:
        return None
    configurations = [c.configurations for c in ctx.clients]
    size = len(rates) * len(users) * sum(configurations)
    terms = " + ".join(f"{c.label} {n}" for c, n in zip(ctx.clients, configurations))
    return size, f"|F| {len(rates)} x |U| {len(users)} x ({terms}) = {size}"


def check_assertions(ctx: CheckContext) -> None:
    if ctx.space is None:
        return
    assertions = [item for item in ctx.space.body if isinstance(item, ast.Assertion)]
    for item in assertions:
        if item.subject.name != "size":
            ctx.diags.error("E0307", f"cannot assert on `{item.subject.name}`", item.subject.span,
                            "unknown quantity", help="assertions are about the size: `assert size == 90`")
            continue
        ctx.assertions.append(SizeAssertion(item.op, evaluate(item.expr), item.span))
    if ctx.diags.has_errors:
        return  # the size is not known reliably when settings or clients are wrong
    known = size_and_breakdown(ctx)
    if known is None:
        return
    size, breakdown = known
    for assertion, item in zip(ctx.assertions, [a for a in assertions if a.subject.name == "size"]):
        if not COMPARATORS[assertion.op](size, assertion.expected):
            ctx.diags.error("E0304", f"size assertion failed: the size is {size}, "
                            f"not {assertion.op} {assertion.expected}", item.span,
                            f"size is {size}", notes=(f"size = {breakdown}",),
                            help="check the axes above, or update the assertion")
