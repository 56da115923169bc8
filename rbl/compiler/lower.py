"""Lowering: Lark parse tree -> rbl AST, turning literal lexemes into typed values."""

from __future__ import annotations

import re

from lark import Token, Transformer, Tree, v_args

from . import ast
from .diagnostics import Diagnostics
from .source import SourceFile, Span
from .units import (DURATION_UNITS, MAX_DIGITS, UnitError, Value, out_of_range, parse_number, parse_percent,
                    parse_quantity)

# Characters a string may not hold raw: C0 controls (tab included), DEL, C1 controls and the
# Unicode line separators. They are never part of a path, platform or name, they break the YAML
# and JSON rbl writes, and they hide on a terminal. `\n` and `\t` escapes stay allowed.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def lower(tree: Tree, source: SourceFile, diagnostics: Diagnostics) -> ast.Program:
    return _Lower(source, diagnostics).transform(tree)


@v_args(meta=True)
class _Lower(Transformer):
    def __init__(self, source: SourceFile, diagnostics: Diagnostics):
        super().__init__(visit_tokens=False)
        self.source = source
        self.diagnostics = diagnostics

    # ---- helpers ----
    def _span(self, meta) -> Span:
        if getattr(meta, "empty", True):
            return Span.point(self.source, 1, 1)
        return Span(self.source, meta.line, meta.column, meta.end_line, meta.end_column)

    def _ident(self, token: Token | None) -> ast.Ident | None:
        if token is None:
            return None
        return ast.Ident(str(token), Span.of_token(self.source, token))

    # ---- program ----
    def start(self, meta, items):
        items = [i for i in items if i is not None]
        spaces = tuple(i for i in items if isinstance(i, ast.Space))
        libraries = tuple(i for i in items if isinstance(i, ast.LibraryDecl))
        return ast.Program(spaces, libraries, self._span(meta))

    def space(self, meta, children):
        name, *body = children
        return ast.Space(self._ident(name), tuple(b for b in body if b is not None), self._span(meta))

    def key(self, meta, tokens):
        return ast.Key(tuple(str(t) for t in tokens), self._span(meta))

    def bind(self, meta, children):
        key, value = children
        return ast.Bind(key, value, self._span(meta))

    def axis(self, meta, children):
        key, value = children
        return ast.Axis(key, value, self._span(meta))

    def client(self, meta, children):
        library, pattern, label, *body = children
        return ast.Client(self._ident(library), self._ident(pattern), self._ident(label),
                          tuple(b for b in body if b is not None), self._span(meta))

    # ---- neutral values ----
    def let(self, meta, children):
        name, call = children
        return ast.Let(self._ident(name), call, self._span(meta))

    def use(self, meta, children):
        (value,) = children
        if isinstance(value, Token):
            value = ast.NameRef(str(value), Span.of_token(self.source, value))
        return ast.Use(value, self._span(meta))

    def call(self, meta, children):
        name, *args = children
        return ast.Call(self._ident(name), tuple(a for a in args if a is not None), self._span(meta))

    def keyword_arg(self, meta, children):
        name, value = children
        return ast.CallArg(self._ident(name), value, False, self._span(meta))

    def axis_arg(self, meta, children):
        name, value = children
        return ast.CallArg(self._ident(name), value, True, self._span(meta))

    def positional_arg(self, meta, children):
        return ast.CallArg(None, children[0], False, self._span(meta))

    def assertion(self, meta, children):
        subject, op, expr = children
        return ast.Assertion(self._ident(subject), str(op), expr, self._span(meta))

    def add(self, meta, children):
        return ast.OpExpr("+", tuple(children), self._span(meta))

    def mul(self, meta, children):
        return ast.OpExpr("*", tuple(children), self._span(meta))

    def int_expr(self, meta, children):
        value = self._number(meta, children[0], lambda text: Value("int", int(text.replace("_", ""))))
        return ast.IntExpr(value.v if value is not None else 0, self._span(meta))

    def percent_expr(self, meta, children):
        value = self._number(meta, children[0], parse_percent)
        return ast.PercentExpr(float(value.v) if value is not None else 0.0, self._span(meta))

    # ---- values ----
    def list(self, meta, children):
        return ast.ListValue(tuple(c for c in children if c is not None), self._span(meta))

    def range(self, meta, children):
        start, end, step = children
        return ast.RangeValue(start, end, step, self._span(meta))

    def _literal(self, meta, token: Token, value: Value | None) -> ast.Literal:
        return ast.Literal(value, str(token), self._span(meta))

    def _number(self, meta, token: Token, parse) -> Value | None:
        """parse(token text), or None after reporting a number too long or too large."""
        text = str(token)
        digits = sum(ch.isdigit() for ch in text)
        if digits > MAX_DIGITS:
            self.diagnostics.error("E0223", f"the number has {digits} digits", self._span(meta),
                                   "too many digits", help=f"numbers have at most {MAX_DIGITS} digits")
            return None
        value = parse(text)
        problem = out_of_range(value)
        if problem is not None:
            self.diagnostics.error("E0223", f"`{text}` is out of range", self._span(meta), "too large",
                                   help=problem)
            return None
        return value

    def int(self, meta, children):
        token = children[0]
        return self._literal(meta, token, self._number(meta, token, lambda t: Value("int", int(t.replace("_", "")))))

    def decimal(self, meta, children):
        token = children[0]
        return self._literal(meta, token, self._number(meta, token, lambda t: Value("float", parse_number(t))))

    def percent(self, meta, children):
        token = children[0]
        return self._literal(meta, token, self._number(meta, token, parse_percent))

    def quantity(self, meta, children):
        token = children[0]
        try:
            value = self._number(meta, token, parse_quantity)
        except UnitError as error:
            known = ", ".join(u for u in DURATION_UNITS if u != "\u00b5s")
            self.diagnostics.error(
                "E0201", f"unknown unit `{error}`", self._span(meta), "not a unit rbl knows",
                help=f"durations take one of the units {known}; percentages are written `40%`")
            value = None
        return self._literal(meta, token, value)

    def negative(self, meta, children):
        inner: ast.Literal = children[0]
        value = inner.value
        if value is not None:
            value = Value(value.type, -value.v)
        return ast.Literal(value, "-" + inner.text, self._span(meta))

    def string(self, meta, children):
        token = children[0]
        control = _CONTROL.search(str(token))
        if control is not None:
            span = Span.point(self.source, token.line, token.column + control.start())
            self.diagnostics.error("E0224", f"a string holds the control character U+{ord(control.group()):04X}",
                                   span, "control character", help="remove it; write a tab or a new line as "
                                   "`\\t` or `\\n` where one is meant")
            return self._literal(meta, token, None)
        return self._literal(meta, token, Value("string", _unescape(str(token)[1:-1])))

    def true(self, meta, children):
        return ast.Literal(Value("bool", True), "true", self._span(meta))

    def false(self, meta, children):
        return ast.Literal(Value("bool", False), "false", self._span(meta))

    def name(self, meta, children):
        return ast.NameRef(str(children[0]), self._span(meta))

    # ---- library declarations ----
    def library(self, meta, children):
        name, *body = children
        settings = tuple(b for b in body if isinstance(b, (ast.Bind, ast.Axis)))
        patterns = tuple(b for b in body if isinstance(b, ast.PatternDecl))
        return ast.LibraryDecl(self._ident(name), settings, patterns, self._span(meta))

    def pattern_decl(self, meta, children):
        name, *params = children
        return ast.PatternDecl(self._ident(name), tuple(p for p in params if p is not None),
                               self._span(meta))

    def param_decl(self, meta, children):
        name, optional, type_expr, default, handoff, alias = children
        return ast.ParamDecl(self._ident(name), optional is not None, type_expr, default,
                             self._ident(handoff), self._ident(alias), self._span(meta))

    def type_expr(self, meta, children):
        head, *constraints = children
        name, members = head
        return ast.TypeExpr(name, members, tuple(constraints), self._span(meta))

    def type_name(self, meta, children):
        return (self._ident(children[0]), ())

    def enum_type(self, meta, children):
        return (None, tuple(self._ident(t) for t in children if t is not None))

    def constraint(self, meta, children):
        op, bound = children
        return ast.Constraint(str(op), bound, self._span(meta))


def _unescape(text: str) -> str:
    out, i = [], 0
    escapes = {"n": "\n", "t": "\t", "\\": "\\", '"': '"'}
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            out.append(escapes.get(text[i + 1], text[i + 1]))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)
