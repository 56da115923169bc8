"""Parameter types and constraints, and checking a literal against them."""

from __future__ import annotations

import difflib
import operator
from dataclasses import dataclass, field

from . import ast
from .diagnostics import Diagnostics
from .source import Span
from .units import Value, format_value

COMPARATORS = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}
NUMERIC = ("int", "float", "duration", "percent")


@dataclass(frozen=True, slots=True)
class Bound:
    op: str
    value: Value
    span: Span | None = field(default=None, compare=False)

    def admits(self, value: Value) -> bool:
        return COMPARATORS[self.op](value.v, self.value.v)

    def __str__(self) -> str:
        return f"{self.op} {format_value(self.value)}"


@dataclass(frozen=True, slots=True)
class ParamType:
    base: str                       # int, float, duration, percent, bool, string, enum
    members: tuple[str, ...] = ()   # enum members
    bounds: tuple[Bound, ...] = ()

    def __str__(self) -> str:
        head = f"enum({', '.join(self.members)})" if self.base == "enum" else self.base
        return " & ".join([head, *(str(b) for b in self.bounds)])


@dataclass(frozen=True, slots=True)
class ParamDef:
    name: str
    type: ParamType
    default: Value | None = None
    optional: bool = False
    handoff: str | None = None
    alias: str | None = None
    span: Span | None = field(default=None, compare=False)
    doc: str = ""

    @property
    def required(self) -> bool:
        return self.default is None and not self.optional


_EXAMPLES = {"int": "10", "float": "1.5", "duration": "20ms", "percent": "40%",
             "bool": "true", "string": '"text"', "service": "frontend"}


def describe_type(base: str) -> str:
    return {"int": "an integer", "float": "a number", "duration": "a duration",
            "percent": "a percentage", "bool": "`true` or `false`", "string": "a string",
            "enum": "one of the names", "service": "a service of the topology"}.get(base, base)


def suggest(name: str, candidates) -> str | None:
    match = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return match[0] if match else None


def coerce(node: ast.Scalar, ptype: ParamType, diags: Diagnostics, what: str,
           check_bounds: bool = True) -> Value | None:
    """The typed value of a literal for a parameter of type ptype, or None after reporting why."""
    value = _coerce_type(node, ptype, diags, what)
    if value is not None and check_bounds and not check_value_bounds(value, ptype, node.span, diags, what):
        return None
    return value


def check_value_bounds(value: Value, ptype: ParamType, span: Span, diags: Diagnostics, what: str,
                       label: str = "") -> bool:
    for bound in ptype.bounds:
        if not bound.admits(value):
            diags.error(
                "E0203", f"{what} must be {bound}, found {format_value(value)}", span,
                label or f"must be {bound}",
                secondary=((bound.span, "bound declared here"),) if bound.span else (),
                help=f"the allowed values are {ptype}")
            return False
    return True


def _coerce_type(node: ast.Scalar, ptype: ParamType, diags: Diagnostics, what: str) -> Value | None:
    base = ptype.base
    if isinstance(node, ast.NameRef):
        if base == "service":             # which names are services, the topology's check says
            return Value("enum", node.name)
        if base == "enum":
            if node.name in ptype.members:
                return Value("enum", node.name)
            if diags.capped("E0211"):
                return None
            guess = suggest(node.name, ptype.members)
            diags.error("E0211", f"`{node.name}` is not a value of {what}", node.span,
                        "unknown name",
                        help=(f"did you mean `{guess}`? " if guess else "")
                        + f"the values are {', '.join(ptype.members)}")
            return None
        hint = f"write {describe_type(base)}, e.g. `{_EXAMPLES.get(base, '...')}`"
        if base == "string":
            hint = f'strings are quoted: "{node.name}"'
        elif base == "bool" and node.name.lower() in ("true", "false", "yes", "no", "on", "off"):
            hint = "booleans are written `true` or `false`"
        diags.error("E0202", f"{what} expects {describe_type(base)}, found the name `{node.name}`",
                    node.span, f"expected {describe_type(base)}", help=hint)
        return None
    value = node.value
    if value is None:
        return None  # an invalid literal, reported while lowering
    if value.type == base:
        return value
    if base == "float" and value.type == "int":
        return Value("float", value.v)
    if base == "enum":
        diags.error("E0202", f"{what} expects one of {', '.join(ptype.members)}, found {node.text}",
                    node.span, "expected a name", help=f"the values are {', '.join(ptype.members)}")
        return None
    diags.error("E0202", f"{what} expects {describe_type(base)}, found {describe_type(value.type)} `{node.text}`",
                node.span, f"expected {describe_type(base)}", help=_conversion_hint(node, value, base))
    return None


def _conversion_hint(node: ast.Literal, value: Value, base: str) -> str:
    if value.type in ("int", "float") and base == "duration":
        return f"durations need a unit: `{node.text}ms` or `{node.text}s`"
    if value.type in ("int", "float") and base == "percent":
        return f"percentages are written with `%`: `{node.text}%`"
    if value.type == "float" and base == "int":
        return "use a whole number"
    if value.type == "percent" and base in ("float", "int"):
        return f"this parameter is a plain number: `{node.text.rstrip('%')}`"
    return f"write {describe_type(base)}, e.g. `{_EXAMPLES.get(base, '...')}`"
