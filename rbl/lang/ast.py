"""The rbl AST: frozen dataclasses, tuples for children, spans excluded from equality. The items
of a long list of plain values and the operands of a long flat sum or product may instead be a
fastparse.LazyNodes: the same nodes, made from the spec's text each time they are iterated."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from .source import Span
from .units import Value


def _span() -> Span:
    return field(compare=False, repr=False)  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class Ident:
    name: str
    span: Span = _span()


# ---- values ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Literal:
    """A scalar literal. `value` is None when the literal itself is invalid (e.g. unknown unit);
    lowering has already reported that."""

    value: Value | None
    text: str
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class NameRef:
    """A bare name in value position: an enum member (or a misspelt keyword)."""

    name: str
    span: Span = _span()


Scalar = Union[Literal, NameRef]


@dataclass(frozen=True, slots=True)
class ListValue:
    items: tuple[Scalar, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class RangeValue:
    start: Scalar
    end: Scalar
    step: Scalar | None
    span: Span = _span()


ValueNode = Union[Literal, NameRef, ListValue, RangeValue]


# ---- statements -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Key:
    parts: tuple[str, ...]
    span: Span = _span()

    @property
    def dotted(self) -> str:
        return ".".join(self.parts)


@dataclass(frozen=True, slots=True)
class Bind:
    """`key = value`: one value."""

    key: Key
    value: ValueNode
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Axis:
    """`key in values`: a dimension of the test space."""

    key: Key
    value: ValueNode
    span: Span = _span()


Setting = Union[Bind, Axis]


@dataclass(frozen=True, slots=True)
class CallArg:
    """One argument of a neutral call: `name: value`, `name in values` or a positional value."""

    name: Ident | None
    value: Union[ValueNode, "Call"]
    is_axis: bool
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Call:
    """A library-neutral value, e.g. `retry(attempts: 3, backoff: constant(50ms))`."""

    name: Ident
    args: tuple[CallArg, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Let:
    """`let name = call`: a named neutral value, used by clients with `use name`."""

    name: Ident
    value: Call
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Use:
    """`use call` or `use name` in a client block: configure the client from a neutral value."""

    value: Union[Call, NameRef]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Client:
    library: Ident
    pattern: Ident          # the pattern, or a composed one (`retry+circuit_breaker`) spanning its parts
    label: Ident | None
    body: tuple[Union[Bind, Axis, Use], ...]
    span: Span = _span()
    parts: tuple[Ident, ...] = ()     # a composed client's patterns, as written; () for one pattern

    @property
    def settings(self) -> tuple[Setting, ...]:
        return tuple(item for item in self.body if not isinstance(item, Use))

    @property
    def uses(self) -> tuple[Use, ...]:
        return tuple(item for item in self.body if isinstance(item, Use))


@dataclass(frozen=True, slots=True)
class IntExpr:
    value: int
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class OpExpr:
    """A sum or product of two or more operands, flat: `1 + 2 + 3` is one node."""

    op: str  # "+" or "*"
    operands: tuple["Expr", ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class PercentExpr:
    """A percentage in an assertion (`assert noise < 5%`); value in percent."""
    value: float
    span: Span = _span()


Expr = Union[IntExpr, OpExpr, PercentExpr]


@dataclass(frozen=True, slots=True)
class Assertion:
    subject: Ident
    op: str
    expr: Expr
    span: Span = _span()


# ---- a topology ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class CallBind:
    """`key = call` in a service: what one request costs, e.g. `work = factorial(300)`."""

    key: Key
    value: Call
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Calls:
    """`calls NAME [* times] [parallel | sequential]`: one step of a service's downstream calls."""

    service: Ident
    times: Literal | None           # None: once
    mode: Ident | None              # None: sequential
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Service:
    name: Ident
    body: tuple[Union[Bind, CallBind, Calls], ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Topology:
    """`topology { ... }`: the services a request passes through, and where it enters."""

    body: tuple[Union[Bind, Service], ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Space:
    name: Ident | None
    body: tuple[Union[Bind, Axis, Client, Assertion, Let, Topology], ...]
    span: Span = _span()


# ---- library declarations --------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Constraint:
    op: str
    bound: Scalar
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class TypeExpr:
    name: Ident | None            # int, float, duration, percent, bool, string; None for enums
    members: tuple[Ident, ...]    # enum members
    constraints: tuple[Constraint, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class ParamDecl:
    name: Ident
    optional: bool
    type: TypeExpr
    default: Scalar | None
    handoff: Ident | None
    alias: Ident | None
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class PatternDecl:
    name: Ident
    params: tuple[ParamDecl, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class LibraryDecl:
    name: Ident
    settings: tuple[Bind | Axis, ...]
    patterns: tuple[PatternDecl, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Program:
    spaces: tuple[Space, ...]
    libraries: tuple[LibraryDecl, ...]
    span: Span = _span()


def composed_client(library: Ident, parts: tuple[Ident, ...], label: Ident | None,
                    body: tuple, span: Span) -> Client:
    """A client of one pattern, or of several (`a + b`): then its pattern is named `a+b` and spans them."""
    if len(parts) == 1:
        return Client(library, parts[0], label, body, span)
    whole = Ident("+".join(p.name for p in parts), parts[0].span.to(parts[-1].span))
    return Client(library, whole, label, body, span, parts)
