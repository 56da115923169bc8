"""Pass 4: client blocks: library, pattern, parameters, their types, bounds and axes."""

from __future__ import annotations

from ...lang import ast
from ..axes import single
from ..space import ClientSpec, Param
from ...lang.types import ParamType, suggest
from ...lang.units import UnitError, handoff
from .context import CheckContext
from .neutral import APPROXIMATE_SETTING, neutral_client
from .values import evaluate_axis, evaluate_single, report_set_twice


# A client-level setting, not a library parameter: who shares one pattern instance (clients/protocol.py).
SHARE_SETTING = "share"
SHARE_TYPE = ParamType("enum", ("user", "client"))


def check_clients(ctx: CheckContext) -> None:
    if ctx.space is None:
        return
    clients = [item for item in ctx.space.body if isinstance(item, ast.Client)]
    if not clients:
        head = ctx.space.name.span if ctx.space.name else ctx.space.span
        ctx.diags.error("E0305", "the space has no clients", head, "no `client` block",
                        help="add e.g. `client tenacity.retry { stop_after_attempt = 3 }`")
    labels: dict[str, ast.Client] = {}
    numbers: dict[str, int] = {}          # label -> the next #number to try (10^4 repeats stay linear)
    for block in clients:
        spec = _client(ctx, block)
        if spec is None:
            continue
        label = spec.label
        if label in labels:
            if block.label is not None:
                ctx.diags.error("E0208", f"client label `{label}` is used twice", block.label.span,
                                "used again here", secondary=((labels[label].span, "first used here"),),
                                help="give each client its own label")
                continue
            number = numbers.get(label, 2)
            while f"{label}#{number}" in labels:
                number += 1
            numbers[label] = number + 1
            label = f"{label}#{number}"
            spec = ClientSpec(label, spec.library, spec.pattern, spec.params, spec.span, spec.share, spec.neutral)
        labels[label] = block
        ctx.clients.append(spec)


def _client(ctx: CheckContext, block: ast.Client) -> ClientSpec | None:
    library = ctx.libraries.get(block.library.name)
    if library is None:
        guess = suggest(block.library.name, ctx.libraries)
        ctx.diags.error("E0204", f"unknown library `{block.library.name}`", block.library.span,
                        "not in the catalogue",
                        help=(f"did you mean `{guess}`? " if guess else "")
                        + f"known libraries: {', '.join(sorted(ctx.libraries))}; "
                        "or declare it with `library NAME { ... }`")
        return None
    pattern = _pattern(ctx, block, library)
    if pattern is None:
        return None
    share = _share(ctx, block, pattern)
    neutral = None
    if block.uses:
        configured = neutral_client(ctx, block, library, pattern)
        params, neutral = configured if configured is not None else (None, None)
    else:
        params = _params(ctx, block, library, pattern)
    if params is None or share is None:
        return None
    label = block.label.name if block.label else f"{library.name}.{pattern.name}"
    return ClientSpec(label, library, pattern, params, block.span, share, neutral)


def _pattern(ctx: CheckContext, block: ast.Client, library):
    """The client's pattern: one of the library's, or several composed (`a + b`); None after an error."""
    parts = block.parts or (block.pattern,)
    for part in parts:
        if part.name not in library.patterns:
            guess = suggest(part.name, library.patterns)
            others = sorted(name for name, lib in ctx.libraries.items() if part.name in lib.patterns)
            ctx.diags.error("E0205", f"library `{library.name}` has no pattern `{part.name}`",
                            part.span, "unknown pattern",
                            help=(f"did you mean `{guess}`? " if guess else "")
                            + f"`{library.name}` implements {', '.join(library.patterns)}"
                            + (f"; `{part.name}` is in {', '.join(others)}" if others else ""))
            return None
    if not block.parts:
        return library.patterns[block.pattern.name]
    if library.composition is None:
        composable = sorted(name for name, lib in ctx.libraries.items() if lib.composition)
        ctx.diags.error("E0226", f"`{library.name}` runs one pattern per client", block.pattern.span,
                        "several patterns", help="write one client per pattern"
                        + (f"; {', '.join(composable)} can compose" if composable else ""))
        return None
    seen: dict[str, ast.Ident] = {}
    for part in block.parts:
        if part.name == "baseline":
            ctx.diags.error("E0226", "`baseline` cannot be composed", part.span, "means no policy",
                            help=f"write `client {library.name}.baseline {{}}` on its own")
            return None
        if part.name in seen:
            ctx.diags.error("E0226", f"pattern `{part.name}` appears twice", part.span, "again here",
                            secondary=((seen[part.name].span, "first here"),), help="name each pattern once")
            return None
        seen[part.name] = part
    if block.uses:
        ctx.diags.error("E0226", "a composed client cannot `use` a neutral value", block.uses[0].span,
                        "not for a composed client", help="set each pattern's parameters: `retry.attempts = 2`")
        return None
    return library.composed(tuple(part.name for part in block.parts))


def _share(ctx: CheckContext, block: ast.Client, pattern) -> str | None:
    """`share = user|client` (default user, as in the paper); None after an error."""
    items = [item for item in block.settings if item.key.dotted == SHARE_SETTING and SHARE_SETTING not in pattern.params]
    if not items:
        return "user"
    for extra in items[1:]:
        report_set_twice(ctx.diags, extra, items[0])
    item = items[0]
    if isinstance(item, ast.Axis):
        ctx.diags.error("E0216", "`share` is a client setting and cannot be an axis", item.value.span,
                        "an axis", help="write `share = user` or `share = client`; use two client blocks to compare")
        return None
    value = evaluate_single(item, SHARE_TYPE, ctx.diags, "`share`")
    return None if value is None or len(items) > 1 else value.v


def _params(ctx: CheckContext, block: ast.Client, library, pattern) -> tuple[Param, ...] | None:
    ok = True
    seen: dict[str, ast.Bind | ast.Axis] = {}
    params: list[Param] = []
    aliases = pattern.by_alias()
    for item in block.settings:
        name = item.key.dotted
        if name == SHARE_SETTING and name not in pattern.params:
            continue                             # checked by _share
        if name == APPROXIMATE_SETTING and name not in pattern.params:
            ok = False
            ctx.diags.error("E0219", "`approximate` applies only to a client configured with `use`", item.key.span,
                            "no neutral value here", help="native parameters are run as written; remove it")
            continue
        definition = pattern.params.get(name)
        if definition is None:
            ok = False
            _unknown_param(ctx, item, library, pattern, aliases)
            continue
        if name in seen:
            ok = False
            report_set_twice(ctx.diags, item, seen[name])
            continue
        seen[name] = item
        what = f"`{name}`"
        if isinstance(item, ast.Axis):
            values = evaluate_axis(item, definition.type, ctx.diags, what)
        else:
            value = evaluate_single(item, definition.type, ctx.diags, what)
            values = single(value, item.value.span) if value is not None else None
        if values is None or not _handoff_ok(ctx, item, definition, values):
            ok = False
            continue
        params.append(Param(definition, values, isinstance(item, ast.Axis), True, item.span))
    missing = [p for p in pattern.params.values() if p.required and p.name not in seen]
    if missing:
        ok = False
        listed = ", ".join(f"`{p.name}: {p.type}`" for p in missing)
        ctx.diags.error("E0207", f"`{library.name}.{pattern.name}` needs {listed}", block.pattern.span,
                        "missing required parameter" + ("s" if len(missing) > 1 else ""),
                        secondary=tuple((p.span, "declared here") for p in missing if p.span),
                        help=f"add `{missing[0].name} = ...` to the block")
    if not ok:
        return None
    for definition in pattern.params.values():
        if definition.name not in seen and definition.default is not None:
            params.append(_default(ctx, definition))
    return tuple(params)


def _default(ctx: CheckContext, definition) -> Param:
    """The parameter at its default: one (immutable) Param per definition, shared by every client
    that leaves it unset (10^5 clients would otherwise hold 10^6 equal ones)."""
    param = ctx.defaults.get(id(definition))
    if param is None:
        param = ctx.defaults[id(definition)] = Param(definition, single(definition.default), False, False, None)
    return param


def _handoff_ok(ctx: CheckContext, item, definition, values) -> bool:
    """Every value must reach the client exactly (e.g. 1.5ms cannot be handed `as ms`)."""
    checked = values if len(values) <= 10_000 else [values[0], values[len(values) - 1]]
    for value in checked:
        try:
            handoff(value, definition.handoff)
        except UnitError as error:
            ctx.diags.error("E0212", f"`{definition.name}` reaches the client in {definition.handoff}, "
                            "which cannot carry this value", item.value.span, str(error),
                            help=f"use a whole number of {definition.handoff}")
            return False
    return True


def _unknown_param(ctx: CheckContext, item, library, pattern, aliases: dict[str, str]) -> None:
    if ctx.diags.capped("E0206"):
        return
    name = item.key.dotted
    if name in aliases:
        hint = f"`{name}` is the old name of `{aliases[name]}`: write `{aliases[name]}`"
    else:
        guess = suggest(name, pattern.params)
        hint = (f"did you mean `{guess}`? " if guess else "") + \
            f"`{library.name}.{pattern.name}` takes {', '.join(pattern.params) or 'no parameters'}"
    ctx.diags.error("E0206", f"`{library.name}.{pattern.name}` has no parameter `{name}`",
                    item.key.span, "unknown parameter", help=hint)
