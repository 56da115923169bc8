"""Library-neutral values: `let` definitions, `use` in client blocks, and whether each library
can express the value exactly (rbl/neutral/). A call is flattened into dotted parameters
(`backoff.initial`), checked with the same typing as library parameters, axes included."""

from __future__ import annotations

from dataclasses import replace
from itertools import islice

from ...neutral.mapping import MAPPERS, neutral_patterns
from ...neutral.signatures import PATTERN_SIGNATURES, SIGNATURES, CallParam
from ...lang import ast
from ..axes import single
from ..expand import mapped_configurations
from .relations import native_problem
from ..space import ClientSpec, NeutralUse, Param
from ...lang.types import ParamDef, ParamType, suggest
from ...lang.units import Value
from .context import CheckContext
from .values import evaluate_axis, evaluate_single

APPROXIMATE_SETTING = "approximate"
APPROXIMATE_TYPE = ParamType("bool")
# Expressibility is checked on at most this many configurations of one client.
CHECKED_CONFIGURATIONS = 10_000


def check_lets(ctx: CheckContext) -> None:
    """Pass: collect `let` definitions (checked here, so an unused one is checked too)."""
    if ctx.space is None:
        return
    for item in ctx.space.body:
        if not isinstance(item, ast.Let):
            continue
        name = item.name.name
        if name in ctx.lets:
            ctx.diags.error("E0208", f"`{name}` is defined twice", item.name.span, "defined again here",
                            secondary=((ctx.lets[name][0].name.span, "first defined here"),),
                            help="give each neutral value its own name")
            continue
        ctx.lets[name] = (item, pattern_value(ctx, item.value))


def check_unused_lets(ctx: CheckContext) -> None:
    if ctx.diags.has_errors:
        return                  # a misspelt `use` would make its intended value look unused
    for name, (item, _) in ctx.lets.items():
        if name not in ctx.used_lets:
            ctx.diags.warning("W0502", f"`{name}` is defined but no client uses it", item.name.span,
                              "never used", help=f"configure a client with it: `use {name}`, or remove it")


def pattern_value(ctx: CheckContext, call: ast.Call) -> tuple[str, tuple[Param, ...]] | None:
    """(pattern, flattened parameters) of a neutral pattern value; None after an error."""
    name = call.name.name
    if name not in PATTERN_SIGNATURES:
        _unknown_call(ctx, call, PATTERN_SIGNATURES, "a pattern value")
        return None
    params: list[Param] = []
    return (name, tuple(params)) if _flatten(ctx, call, "", params) else None


def neutral_client(ctx: CheckContext, block: ast.Client, library, pattern) -> tuple[tuple[Param, ...], NeutralUse] | None:
    """The parameters and NeutralUse of a client configured with `use`; None after an error."""
    use, *extra = block.uses
    for again in extra:
        ctx.diags.error("E0503", "a client takes one `use`", again.span, "a second `use`",
                        secondary=((use.span, "first `use` here"),), help="compare two values with two clients")
    native = [item for item in block.settings if item.key.dotted not in ("share", APPROXIMATE_SETTING)]
    for item in native:
        ctx.diags.error("E0503", f"`{item.key.dotted}` is a native parameter, but this client is configured by `use`",
                        item.key.span, "native parameter beside `use`", secondary=((use.span, "configured here"),),
                        help="write the behaviour in the neutral value, or drop `use` and set every native parameter")
    if extra or native:
        return None
    if library.name not in MAPPERS:
        ctx.diags.error("E0503", f"rbl cannot map neutral values onto `{library.name}`", use.span,
                        "no mapping for this library",
                        help=f"neutral values map onto {', '.join(MAPPERS)}; set `{library.name}`'s native parameters")
        return None
    value, name = _resolve(ctx, use)
    if value is None:
        return None
    neutral_pattern, params = value
    if neutral_pattern not in neutral_patterns(library.name):
        taken = [name for name in neutral_patterns(library.name) if name in library.patterns]
        takers = [name for name, other in ctx.libraries.items()
                  if neutral_pattern in neutral_patterns(name) and neutral_pattern in other.patterns]
        ctx.diags.error("E0503", f"rbl cannot map a neutral {neutral_pattern} onto `{library.name}`", use.value.span,
                        f"a {neutral_pattern} value",
                        help=f"`{library.name}` takes neutral {', '.join(taken) or 'no'} values; "
                             f"a neutral {neutral_pattern} maps onto {', '.join(takers) or 'no library'}")
        return None
    if neutral_pattern != pattern.name:
        ctx.diags.error("E0503", f"`{library.name}.{pattern.name}` cannot be configured by a {neutral_pattern} value",
                        use.value.span, f"a {neutral_pattern} value",
                        help=f"use a `{pattern.name}(...)` value, or make the client `{library.name}.{neutral_pattern}`")
        return None
    approximate = _approximate(ctx, block)
    if approximate is None:
        return None
    call = use.value if name is None else ctx.lets[name][0].value
    neutral = NeutralUse(neutral_pattern, _call_text(call), approximate, (), name)
    probe = ClientSpec("", library, pattern, params, block.span, "user", neutral)
    configurations = list(islice(mapped_configurations(probe), CHECKED_CONFIGURATIONS))
    for mapped in configurations:
        if (problem := native_problem(library, pattern, mapped.native)) is not None:
            code, why = problem
            ctx.diags.error(code, f"`{library.name}.{pattern.name}` cannot take this {neutral_pattern}: {why}",
                            use.value.span, "maps beyond what the library takes",
                            help="change the neutral value, or configure the client by its native parameters")
            return None
    gaps = list(dict.fromkeys(f"{gap.what}; closest: {gap.closest}" for mapped in configurations
                              for gap in mapped.gaps))
    if gaps and not approximate:
        ctx.diags.error("E0504", f"`{library.name}` cannot express this {neutral_pattern} exactly", use.value.span,
                        "not exactly expressible", notes=tuple(gaps),
                        help="change the value, or add `approximate = true` to the client to run the closest "
                             "native setting (the plan records it)")
        return None
    if gaps:
        ctx.diags.warning("W0503", f"`{library.name}` runs an approximation of this {neutral_pattern}",
                          use.value.span, "approximated (approximate = true)", notes=tuple(gaps))
    return params, replace(neutral, approximations=tuple(gaps))


def _resolve(ctx: CheckContext, use: ast.Use):
    """The (pattern, params) a `use` refers to, and the `let` name when used by name."""
    if isinstance(use.value, ast.Call):
        return pattern_value(ctx, use.value), None
    name = use.value.name
    if name not in ctx.lets:
        guess = suggest(name, ctx.lets)
        ctx.diags.error("E0501", f"no neutral value named `{name}`", use.value.span, "not defined by `let`",
                        help=f"did you mean `{guess}`?" if guess else
                        f"define it in the space: `let {name} = {SIGNATURES['retry'].example}`")
        return None, None
    ctx.used_lets.add(name)
    return ctx.lets[name][1], name


def _approximate(ctx: CheckContext, block: ast.Client) -> bool | None:
    items = [item for item in block.settings if item.key.dotted == APPROXIMATE_SETTING]
    if not items:
        return False
    item = items[0]
    if isinstance(item, ast.Axis):
        ctx.diags.error("E0216", "`approximate` is a client setting and cannot be an axis", item.value.span, "an axis",
                        help="write `approximate = true`")
        return None
    value = evaluate_single(item, APPROXIMATE_TYPE, ctx.diags, "`approximate`")
    return None if value is None else value.v


def _flatten(ctx: CheckContext, call: ast.Call, prefix: str, out: list[Param]) -> bool:
    """Check one call against its signature and append its parameters as `prefix.name`."""
    signature = SIGNATURES[call.name.name]
    given: dict[str, ast.CallArg] = {}
    ok, position, keyword_seen = True, 0, False
    for arg in call.args:
        if arg.name is None:
            if keyword_seen or position >= len(signature.params):
                why = "after a named argument" if keyword_seen else f"beyond the {len(signature.params)} it takes"
                ctx.diags.error("E0502", f"a positional argument {why}", arg.span, "unexpected argument",
                                help=f"name it: {signature.example}")
                ok = False
                continue
            param = signature.params[position]
            position += 1
        else:
            keyword_seen = True
            param = signature.param(arg.name.name)
            if param is None:
                guess = suggest(arg.name.name, signature.names)
                ctx.diags.error("E0502", f"`{signature.name}(...)` has no argument `{arg.name.name}`", arg.name.span,
                                "unknown argument", help=(f"did you mean `{guess}`? " if guess else "")
                                + f"it takes {', '.join(signature.names) or 'no arguments'}")
                ok = False
                continue
        if param.name in given:
            ctx.diags.error("E0208", f"`{param.name}` is given twice", arg.span, "given again here",
                            secondary=((given[param.name].span, "first given here"),), help="keep one")
            ok = False
            continue
        given[param.name] = arg
        ok = _argument(ctx, signature.name, param, arg, prefix + param.name, out) and ok
    if not ok and any(arg.name is not None and arg.name.name not in signature.names for arg in call.args):
        return False            # a misspelt argument: do not also report it as missing
    for param in signature.params:
        if param.name not in given:
            ok = _default(ctx, call, signature.name, param, prefix + param.name, out) and ok
    return ok


def _argument(ctx: CheckContext, function: str, param, arg: ast.CallArg, path: str, out: list[Param]) -> bool:
    if isinstance(param, CallParam):
        nested = arg.value
        if arg.is_axis or not isinstance(nested, ast.Call):
            what = "an axis" if arg.is_axis else "a plain value"
            ctx.diags.error("E0502", f"`{param.name}` takes a call to one of {', '.join(param.choices)}, not {what}",
                            arg.span, f"expected e.g. {SIGNATURES[param.choices[-1]].example}",
                            help="to compare several, write one client per value" if arg.is_axis
                            else f"e.g. `{param.name}: {SIGNATURES[param.choices[-1]].example}`")
            return False
        if nested.name.name not in param.choices:
            _unknown_call(ctx, nested, param.choices, f"`{param.name}`")
            return False
        out.append(Param(ParamDef(path, ParamType("enum", param.choices)), single(Value("enum", nested.name.name)),
                         False, True, arg.span))
        return _flatten(ctx, nested, path + ".", out)
    if isinstance(arg.value, ast.Call):
        ctx.diags.error("E0502", f"`{param.name}` of `{function}(...)` takes {param.type}, not a call",
                        arg.value.span, "a call", help=f"e.g. {SIGNATURES[function].example}")
        return False
    definition = replace(param, name=path)
    key = ast.Key(tuple(path.split(".")), arg.name.span if arg.name else arg.span)
    what = f"`{path}`"
    if arg.is_axis:
        values = evaluate_axis(ast.Axis(key, arg.value, arg.span), param.type, ctx.diags, what)
    else:
        value = evaluate_single(ast.Bind(key, arg.value, arg.span), param.type, ctx.diags, what)
        values = single(value, arg.value.span) if value is not None else None
    if values is None:
        return False
    out.append(Param(definition, values, arg.is_axis, True, arg.span))
    return True


def _default(ctx: CheckContext, call: ast.Call, function: str, param, path: str, out: list[Param]) -> bool:
    if isinstance(param, CallParam) and param.default is not None:
        out.append(Param(ParamDef(path, ParamType("enum", param.choices)), single(Value("enum", param.default)),
                         False, False, None))
        return True
    if isinstance(param, ParamDef) and param.default is not None:
        out.append(Param(replace(param, name=path), single(param.default), False, False, None))
        return True
    if isinstance(param, ParamDef) and param.optional:
        return True
    kind = f"a call to one of {', '.join(param.choices)}" if isinstance(param, CallParam) else str(param.type)
    ctx.diags.error("E0207", f"`{function}(...)` needs `{param.name}`: {kind}", call.name.span,
                    "missing argument", help=f"e.g. {SIGNATURES[function].example}")
    return False


def _unknown_call(ctx: CheckContext, call: ast.Call, choices, where: str) -> None:
    name = call.name.name
    guess = suggest(name, choices)
    ctx.diags.error("E0501", f"`{name}(...)` is not {where}", call.name.span, "unknown here",
                    help=(f"did you mean `{guess}`? " if guess else "")
                    + "expected " + " or ".join(SIGNATURES[c].example for c in choices))


def _call_text(node) -> str:
    """The neutral value written back as text (for the plan and messages)."""
    if isinstance(node, ast.Call):
        args = []
        for arg in node.args:
            value = _call_text(arg.value)
            args.append(value if arg.name is None else f"{arg.name.name}{' in ' if arg.is_axis else ': '}{value}")
        return f"{node.name.name}({', '.join(args)})"
    if isinstance(node, ast.ListValue):
        return "[" + ", ".join(_call_text(item) for item in node.items) + "]"
    if isinstance(node, ast.RangeValue):
        step = f" step {_call_text(node.step)}" if node.step is not None else ""
        return f"{_call_text(node.start)}..{_call_text(node.end)}{step}"
    return node.text if isinstance(node, ast.Literal) else node.name
