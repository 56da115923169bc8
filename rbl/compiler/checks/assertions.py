"""Pass 5: `assert size <op> expr`, checked at compile time against Equation 1."""

from __future__ import annotations

from ...lang import ast
from ...lang.fastparse import LazyNodes
from ..space import NoiseAssertion, SizeAssertion, space_size
from ..target_dimension import target_dimension
from ...lang.types import COMPARATORS
from ...lang.units import MAX_MAGNITUDE
from .context import CheckContext


class OutOfRange(Exception):
    """An assertion's expression exceeds MAX_MAGNITUDE (at the span given)."""

    def __init__(self, span):
        super().__init__(span)
        self.span = span


class NotACount(Exception):
    """A percentage where the size (a count) is compared."""

    def __init__(self, span):
        super().__init__(span)
        self.span = span


def evaluate(expr: ast.Expr) -> int:
    """The value of an expression; raises OutOfRange as soon as it passes MAX_MAGNITUDE, before
    a product of 10^5 large factors grows a megabyte integer. (The recursion is as deep as the
    brackets, which the parser caps.)"""
    if isinstance(expr, ast.IntExpr):
        return expr.value
    if isinstance(expr, ast.PercentExpr):
        raise NotACount(expr.span)
    total = 0 if expr.op == "+" else 1
    operands = expr.operands
    # a long flat chain of integers (fastparse.LazyNodes): their values, without a node each
    values = operands.ints() if isinstance(operands, LazyNodes) else (evaluate(operand) for operand in operands)
    for value in values:
        total = total + value if expr.op == "+" else total * value
        if total > MAX_MAGNITUDE:
            raise OutOfRange(expr.span)
    return total


def size_and_breakdown(ctx: CheckContext) -> tuple[int, str] | None:
    rates, users = ctx.settings.get("fault.rate"), ctx.settings.get("users")
    if rates is None or users is None or not ctx.clients:
        return None
    loads = ctx.workload.size if ctx.workload is not None else None
    targets = None
    if ctx.topology is None and "target" in ctx.settings:
        dimension = target_dimension(ctx.settings["target"], ctx.settings.get("target.cpus"))
        targets = dimension.size if dimension is not None else None
    return space_size(len(rates), len(users), loads, [(c.label, c.configurations) for c in ctx.clients], targets)


def check_assertions(ctx: CheckContext) -> None:
    if ctx.space is None:
        return
    assertions = [item for item in ctx.space.body if isinstance(item, ast.Assertion)]
    for item in assertions:
        if item.subject.name == "noise":
            check_noise_assertion(ctx, item)
            continue
        if item.subject.name != "size":
            ctx.diags.error("E0307", f"cannot assert on `{item.subject.name}`", item.subject.span,
                            "unknown quantity", help="assertions are about the size (`assert size == 90`) "
                                                     "or the run's noise floor (`assert noise < 5%`)")
            continue
        try:
            expected = evaluate(item.expr)
        except OutOfRange as error:
            ctx.diags.error("E0223", "the expression is out of range", error.span, "too large",
                            help=f"an assertion's value is at most {MAX_MAGNITUDE} (2^63-1)")
            continue
        except NotACount as error:
            ctx.diags.error("E0312", "the size is a count, not a percentage", error.span, "a percentage",
                            help="compare the size with a whole number: `assert size == 90`")
            continue
        ctx.assertions.append(SizeAssertion(item.op, expected, item.span))
    if ctx.diags.has_errors:
        return  # the size is not known reliably when settings or clients are wrong
    known = size_and_breakdown(ctx)
    if known is None:
        return
    size, breakdown = known
    for assertion, item in zip(ctx.assertions, [a for a in assertions if a.subject.name == "size"]):
        if not COMPARATORS[assertion.op](size, assertion.expected) and ctx.size_overridden:
            # the user asked for another size on the command line: say so, do not fail the spec
            ctx.diags.warning("W0303", f"with the command-line overrides the size is {size}, "
                              f"not {assertion.op} {assertion.expected}", item.span,
                              "the spec's assertion, for the spec as written", notes=(f"size = {breakdown}",),
                              help=f"the plan has the {size} scenarios the overrides give; `rbl check SPEC` "
                                   "without overrides checks the assertion")
        elif not COMPARATORS[assertion.op](size, assertion.expected):
            ctx.diags.error("E0304", f"size assertion failed: the size is {size}, "
                            f"not {assertion.op} {assertion.expected}", item.span,
                            f"size is {size}", notes=(f"size = {breakdown}",),
                            help="check the axes above, or update the assertion")


def check_noise_assertion(ctx: CheckContext, item: ast.Assertion) -> None:
    """`assert noise < 5%`: an upper bound on the run's noise floor, one percentage, once."""
    if item.op not in ("<", "<="):
        ctx.diags.error("E0312", f"`noise {item.op}` cannot be asked for", item.span, "an upper bound is expected",
                        help="the noise floor is bounded from above: `assert noise < 5%`")
    elif not isinstance(item.expr, ast.PercentExpr):
        ctx.diags.error("E0312", "the noise floor is a percentage", item.expr.span, "expected a percentage",
                        help="write the bound with `%`: `assert noise < 5%`")
    elif not 0 < item.expr.value <= 1000:
        ctx.diags.error("E0312", f"a noise floor below {item.expr.value:g}% cannot be met", item.expr.span,
                        "expected more than 0%", help="e.g. `assert noise < 5%`")
    elif ctx.noise is not None:
        ctx.diags.error("E0312", "the noise floor is asserted twice", item.span, "second assertion",
                        help="keep one `assert noise < N%`")
    else:
        ctx.noise = NoiseAssertion(item.op, item.expr.value, item.span)
