"""Pass: relations between a client's parameters (rbl/libraries/relations.py), in every configuration
its axes make, for the built-in libraries configured by their native parameters."""

from __future__ import annotations

from itertools import product
from math import prod

from ...lang.types import NUMERIC
from ...lang.units import taken_back
from ...libraries.catalogue import LibraryDef, PatternDef
from ...libraries.composition import SEPARATOR
from ...libraries.relations import RELATIONS, Relation
from ..space import ClientSpec, Param
from .context import CheckContext

# Beyond this many combinations of a relation's values, only each axis's ends are combined (the
# relations compare, so their ends decide; a divisibility over a long range is checked at its ends).
MAX_COMBINATIONS = 100_000


def check_relations(ctx: CheckContext) -> None:
    for client in ctx.clients:
        if not client.library.builtin or client.neutral is not None:
            continue
        parts = client.pattern.name.split(SEPARATOR)
        params = {p.name: p for p in client.params}
        for part in parts:
            qualified = f"{part}." if len(parts) > 1 else ""
            for relation in RELATIONS.get((client.library.name, part), ()):
                if not _holds(ctx, client, relation, {name: params.get(qualified + name) for name in relation.params},
                              qualified):
                    break             # one error per pattern: the next relations often break for the same cause


def _holds(ctx: CheckContext, client: ClientSpec, relation: Relation, params: dict[str, Param | None],
           qualified: str) -> bool:
    """Whether the relation holds in every configuration; reports the first one where it does not."""
    choices = [_values(param) for param in params.values()]
    if prod(len(values) for values in choices) > MAX_COMBINATIONS:
        choices = [values if len(values) <= 2 else [values[0], values[-1]] for values in choices]
    for combination in product(*choices):
        if relation.holds({name: None if value is None else value.v for name, value in zip(params, combination)}):
            continue
        where = next((p for p in params.values() if p is not None and p.explicit), None)
        shown = ", ".join(f"{qualified}{name} = {value}" for name, value in zip(params, combination)
                          if value is not None)
        ctx.diags.error("E0233", f"{relation.message} (client {client.label}: {shown})",
                        where.span if where is not None and where.span is not None else client.span,
                        "does not fit the other parameters", help=relation.help)
        return False
    return True


def _values(param: Param | None) -> list:
    """The values a parameter takes ([None] when it is not set); a long range by its ends."""
    if param is None:
        return [None]
    if len(param.values) > MAX_COMBINATIONS:
        return [param.values[0], param.values[len(param.values) - 1]]
    return list(param.values)


def native_problem(library: LibraryDef, pattern: PatternDef, native: dict) -> tuple[str, str] | None:
    """What is wrong with native parameters a neutral value was mapped to, as (code, message): a value
    beyond its parameter's bounds (E0203) or a broken relation (E0233); None when they fit."""
    values = {}
    for name, handed in native.items():
        param = pattern.params.get(name)
        if param is None:
            continue
        value = taken_back(handed, param.type.base, param.handoff)
        bound = next((b for b in param.type.bounds if not b.admits(value)), None) \
            if param.type.base in NUMERIC else None
        if bound is not None:
            return "E0203", f"`{name}` would be {value}, and it must be {bound}"
        values[name] = value.v
    for relation in RELATIONS.get((library.name, pattern.name), ()):
        if not relation.holds({name: values.get(name) for name in relation.params}):
            return "E0233", relation.message
    return None
