"""Evaluating `= value` and `in values` against a declared type: one value, or an axis."""

from __future__ import annotations

from fractions import Fraction

from ...lang import ast
from ..axes import Axis, ListAxis, RangeAxis, range_count
from ...lang.diagnostics import Diagnostics
from ...lang.fastparse import LazyNodes
from ...lang.types import NUMERIC, ParamType, check_value_bounds, coerce, describe_type
from ...lang.units import MAX_MAGNITUDE, Value, format_value

# len() of an axis must be a machine-size integer.
MAX_AXIS_VALUES = MAX_MAGNITUDE
_MEMO_LIMIT = 4096             # distinct list values whose coercion is remembered


def report_set_twice(diags: Diagnostics, item: ast.Bind | ast.Axis, first: ast.Bind | ast.Axis) -> None:
    name = item.key.dotted
    diags.error("E0208", f"`{name}` is set twice", item.key.span, "set again here",
                secondary=((first.key.span, "first set here"),),
                help="keep one; to try several values use one axis: `in [a, b]`")


def evaluate_single(node: ast.Bind, ptype: ParamType, diags: Diagnostics, what: str) -> Value | None:
    value = node.value
    if isinstance(value, (ast.ListValue, ast.RangeValue)):
        diags.error("E0215", f"`=` binds one value, but {what} is given several", value.span,
                    "several values", help=f"to vary it, declare an axis: `{node.key.dotted} in ...`")
        return None
    return coerce(value, ptype, diags, what)


def evaluate_axis(node: ast.Axis, ptype: ParamType, diags: Diagnostics, what: str) -> Axis | None:
    value = node.value
    if isinstance(value, ast.ListValue):
        return _list_axis(value, ptype, diags, what)
    if isinstance(value, ast.RangeValue):
        return _range_axis(value, ptype, diags, what)
    diags.error("E0216", f"an axis needs a list or a range, but {what} is given one value", value.span,
                "one value", help=f"write `{node.key.dotted} in [{_text(value)}]`, or bind it with `=`")
    return None


def _text(node) -> str:
    return node.text if isinstance(node, ast.Literal) else getattr(node, "name", "...")


def _list_axis(node: ast.ListValue, ptype: ParamType, diags: Diagnostics, what: str) -> Axis | None:
    if not node.items:
        diags.error("E0301", f"the axis of {what} is empty", node.span, "no values",
                    help="an empty axis makes the whole space empty; give at least one value")
        return None
    values, ok, seen, known = [], True, {}, {}
    items = node.items
    # A literal's value is its text's: a text coerced once without a word is coerced alike
    # again, and is a duplicate. So a list of 10^6 equal values is checked once, and the nodes
    # of a long list (LazyNodes) are made only where a message needs one; a failing text is
    # checked, and reported, each time.
    entries = items.entries() if isinstance(items, LazyNodes) else \
        (((item.text if isinstance(item, ast.Literal) else item.name), item) for item in items)
    make = items.node if isinstance(items, LazyNodes) else None
    for text, entry in entries:
        value = known.get(text)
        if value is None:
            item = make(entry) if make else entry
            value = coerce(item, ptype, diags, what)
            if value is None:
                ok = False
                continue
            if len(known) < _MEMO_LIMIT:
                known[text] = value
            if value not in seen:
                seen[value] = item.span
                values.append(value)
                continue
        if diags.capped("W0302", "warning"):
            values.append(value)
            continue
        item = make(entry) if make else entry
        diags.warning("W0302", f"{format_value(value)} appears twice in the axis of {what}", item.span,
                      "duplicate value", secondary=((seen[value], "first here"),),
                      help="each duplicate adds identical scenarios; remove it")
        values.append(value)
    return ListAxis(tuple(values), node.span) if ok else None


def _range_axis(node: ast.RangeValue, ptype: ParamType, diags: Diagnostics, what: str) -> Axis | None:
    if ptype.base not in NUMERIC:
        diags.error("E0217", f"{what} is {describe_type(ptype.base)}; ranges need numbers", node.span,
                    "not a numeric parameter", help="list the values instead: `in [a, b, c]`")
        return None
    start = coerce(node.start, ptype, diags, what, check_bounds=False)
    end = coerce(node.end, ptype, diags, what, check_bounds=False)
    step_type = ParamType(ptype.base)
    step = coerce(node.step, step_type, diags, f"the step of {what}", check_bounds=False) if node.step else None
    if start is None or end is None or (node.step is not None and step is None):
        return None
    if step is None:
        if ptype.base != "int":
            diags.error("E0303", f"a range of {ptype.base}s needs a step", node.span,
                        "no step", help=f"add one, e.g. `{node.start.text if isinstance(node.start, ast.Literal) else 'a'}"
                        f"..{node.end.text if isinstance(node.end, ast.Literal) else 'b'} step ...`")
            return None
        step = Value("int", 1)
    if Fraction(step.v) <= 0:
        diags.error("E0302", f"the step of a range must be positive, found {format_value(step)}",
                    node.step.span if node.step else node.span, "not positive",
                    help="ranges go upwards: write the smaller bound first and a positive step")
        return None
    a, b, s = Fraction(start.v), Fraction(end.v), Fraction(step.v)
    if b < a:
        diags.error("E0306", f"the range {format_value(start)}..{format_value(end)} is empty", node.span,
                    "end is below start", help="write the smaller bound first")
        return None
    count = range_count(a, b, s)
    if count > MAX_AXIS_VALUES:
        diags.error("E0308", f"the range {format_value(start)}..{format_value(end)} has {count} values",
                    node.span, "too many values", help=f"an axis has at most {MAX_AXIS_VALUES} (2^63-1) values; "
                    "use a larger step")
        return None
    axis = RangeAxis(ptype.base, a, s, count, node.span)
    last = axis.last
    if last.v != b:
        diags.warning("W0301", f"the step {format_value(step)} does not land on {format_value(end)}",
                      node.step.span if node.step else node.span,
                      f"the last value is {format_value(last)}",
                      help=f"use an end of {format_value(last)}, or a step that divides the range")
    if not check_value_bounds(start, ptype, node.start.span, diags, what):
        return None
    if not check_value_bounds(last, ptype, node.end.span, diags, what,
                              label=f"the range reaches {format_value(last)}"):
        return None
    return axis
