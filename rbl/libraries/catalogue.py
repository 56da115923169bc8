"""The catalogue model and how it is built from `library` declarations (the prelude's and a spec's)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import lru_cache
from importlib import resources

from ..lang import ast
from .composition import SEPARATOR
from ..lang.diagnostics import Diagnostics
from ..lang.source import SourceFile, Span
from ..lang.types import Bound, ParamDef, ParamType, coerce, describe_type
from ..lang.units import (DURATION_UNITS, HANDOFF_DURATION_UNITS, HANDOFF_PERCENT_UNITS, TYPE_NAMES, UnitError,
                          Value, handoff)

LIBRARY_SETTINGS = ("platform", "client", "requires", "version", "composition")
# A client may combine several of the library's patterns (`client lib.retry + timeout {...}`):
# `composition = "policies"`: each an independent policy the library applies in its own fixed order
# (a mesh's VirtualService and DestinationRule); `composition = "nested"`: each pattern wraps the ones
# written after it, in the written order (retry + timeout: a timeout on every attempt), as a library's
# decorators or policy lists nest them.
COMPOSITIONS = ("policies", "nested")
NESTED = "nested"
PRELUDE_NAME = "<prelude>"

# Every numeric parameter of a library has an upper bound: one that declares none gets its type's
# ceiling, far beyond any useful value and within what every client service holds (a Java int, a
# duration of 10^6 s in ms, a factor of 10^9). rbl's client services refuse a value beyond the same
# bound (tests/test_parameter_bounds.py checks every parameter on each of them).
CEILINGS = {
    "int": Value("int", 2**31 - 1),
    "float": Value("float", Fraction(10**9)),
    "duration": Value("duration", Fraction(10**6 * DURATION_UNITS["s"])),
}


COMPOSED_SEPARATOR = SEPARATOR


@dataclass(frozen=True, slots=True)
class PatternDef:
    name: str
    params: dict[str, ParamDef]
    span: Span | None = field(default=None, compare=False)

    def by_alias(self) -> dict[str, str]:
        return {p.alias: p.name for p in self.params.values() if p.alias}


@dataclass(frozen=True, slots=True)
class LibraryDef:
    name: str
    platform: str
    client: str          # which client service implements it (clients/<client> or the Python one)
    requires: str        # the runtime the client needs on the machine
    version: str
    patterns: dict[str, PatternDef]
    span: Span | None = field(default=None, compare=False)
    builtin: bool = True
    composition: str | None = None     # None: one pattern per client

    def composed(self, names: tuple[str, ...]) -> PatternDef:
        """The pattern of a client combining several of this library's: every part's parameters,
        qualified by their pattern (`retry.attempts`), the parts named in the written order."""
        params: dict[str, ParamDef] = {}
        for name in names:
            for param in self.patterns[name].params.values():
                qualified = f"{name}.{param.name}"
                params[qualified] = replace(param, name=qualified, alias=None)
        return PatternDef(COMPOSED_SEPARATOR.join(names), params, self.patterns[names[0]].span)


@dataclass
class Catalogue:
    libraries: dict[str, LibraryDef]

    def get(self, name: str) -> LibraryDef | None:
        return self.libraries.get(name)


def build_libraries(decls, diags: Diagnostics, builtin: bool, known: dict[str, LibraryDef]) -> dict[str, LibraryDef]:
    """Turn library declarations into LibraryDefs, reporting malformed ones."""
    result: dict[str, LibraryDef] = {}
    for decl in decls:
        name = decl.name.name
        previous = result.get(name) or known.get(name)
        if previous is not None:
            diags.error("E0222", f"library `{name}` is declared twice", decl.name.span, "declared again here",
                        secondary=((previous.span, "first declared here"),) if previous.span else (),
                        help="rename one of them; a built-in library cannot be redeclared")
            continue
        settings = _library_settings(decl, diags)
        patterns: dict[str, PatternDef] = {}
        for pattern in decl.patterns:
            if pattern.name.name in patterns:
                diags.error("E0208", f"pattern `{pattern.name.name}` is declared twice in `{name}`",
                            pattern.name.span, "declared again here",
                            secondary=((patterns[pattern.name.name].span, "first declared here"),))
                continue
            patterns[pattern.name.name] = PatternDef(pattern.name.name, _params(pattern, diags), pattern.span)
        result[name] = LibraryDef(name, settings.get("platform", "unknown"), settings.get("client", name),
                                  settings.get("requires", settings.get("platform", "unknown")),
                                  settings.get("version", ""), patterns, decl.name.span, builtin,
                                  settings.get("composition"))
    return result


def _library_settings(decl: ast.LibraryDecl, diags: Diagnostics) -> dict[str, str]:
    settings: dict[str, str] = {}
    for item in decl.settings:
        key = item.key.dotted
        if key not in LIBRARY_SETTINGS:
            diags.error("E0209", f"unknown library setting `{key}`", item.key.span, "not a library setting",
                        help=f"a library declares {', '.join(LIBRARY_SETTINGS)} and `pattern` blocks")
            continue
        if isinstance(item, ast.Axis) or not (isinstance(item.value, ast.Literal)
                                              and item.value.value is not None
                                              and item.value.value.type == "string"):
            diags.error("E0202", f"library setting `{key}` expects a string", item.value.span,
                        "expected a string", help=f'e.g. `{key} = "java"`')
            continue
        if key == "composition" and item.value.value.v not in COMPOSITIONS:
            diags.error("E0202", f"unknown composition {item.value.value.v!r}", item.value.span,
                        "not a composition", help=f'e.g. `composition = "{COMPOSITIONS[0]}"`')
            continue
        settings[key] = item.value.value.v
    return settings


def _params(pattern: ast.PatternDecl, diags: Diagnostics) -> dict[str, ParamDef]:
    params: dict[str, ParamDef] = {}
    for decl in pattern.params:
        name = decl.name.name
        if name in params:
            diags.error("E0208", f"parameter `{name}` is declared twice", decl.name.span,
                        "declared again here", secondary=((params[name].span, "first declared here"),))
            continue
        ptype = _param_type(decl.type, diags)
        if ptype is None:
            continue
        unit = decl.handoff.name if decl.handoff else None
        if not _valid_handoff(ptype, decl, diags):
            continue
        default = None
        if decl.default is not None:
            default = coerce(decl.default, ptype, diags, f"the default of `{name}`")
            if default is None:
                continue
            try:
                handoff(default, unit)
            except UnitError as error:
                diags.error("E0212", f"the default of `{name}` cannot be handed over {unit}",
                            decl.default.span, str(error))
                continue
        params[name] = ParamDef(name, ptype, default, decl.optional, unit,
                                decl.alias.name if decl.alias else None, decl.name.span)
    return params


def _valid_handoff(ptype: ParamType, decl: ast.ParamDecl, diags: Diagnostics) -> bool:
    unit = decl.handoff.name if decl.handoff else None
    allowed = {"duration": HANDOFF_DURATION_UNITS, "percent": HANDOFF_PERCENT_UNITS}.get(ptype.base, ())
    if ptype.base == "duration" and unit is None:
        diags.error("E0221", f"duration parameter `{decl.name.name}` must say how it is handed over",
                    decl.type.span, "no `as` unit", help="add `as ms` or `as s`")
        return False
    if unit is not None and unit not in allowed:
        diags.error("E0221", f"`as {unit}` does not apply to {describe_type(ptype.base)}",
                    decl.handoff.span, "unknown handoff unit",
                    help=f"use one of: {', '.join(allowed)}" if allowed else "remove the `as` clause")
        return False
    return True


def _param_type(node: ast.TypeExpr, diags: Diagnostics) -> ParamType | None:
    if node.name is None:
        members = tuple(m.name for m in node.members)
        base = "enum"
    else:
        base, members = node.name.name, ()
        if base not in TYPE_NAMES:
            diags.error("E0220", f"unknown type `{base}`", node.name.span, "not a type",
                        help=f"types are {', '.join(TYPE_NAMES)} and enum(A, B, ...)")
            return None
    bounds = []
    for constraint in node.constraints:
        value = coerce(constraint.bound, ParamType(base, members), diags, "a bound", check_bounds=False)
        if value is None:
            return None
        bounds.append(Bound(constraint.op, value, constraint.span))
    if base in CEILINGS and not any(bound.op in ("<", "<=", "==") for bound in bounds):
        bounds.append(Bound("<=", CEILINGS[base]))
    return ParamType(base, members, tuple(bounds))


@lru_cache(maxsize=1)
def prelude_source() -> SourceFile:
    text = resources.files("rbl.libraries").joinpath("prelude.rbl").read_text(encoding="utf-8")
    return SourceFile(PRELUDE_NAME, text)


@lru_cache(maxsize=1)
def builtin_libraries() -> dict[str, LibraryDef]:
    """The prelude's libraries. The prelude is part of rbl: an error in it is an internal error."""
    from ..lang.frontend import parse_program

    diags = Diagnostics()
    program = parse_program(prelude_source(), diags)
    libraries = build_libraries(program.libraries if program else (), diags, True, {})
    if diags.has_errors:
        from ..lang.render import render_all
        raise RuntimeError("the built-in library prelude is invalid:\n" + render_all(diags.items))
    return libraries
