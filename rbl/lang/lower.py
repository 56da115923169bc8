"""Lowering: Lark parse tree -> rbl AST, turning literal lexemes into typed values. The literal
functions (number_value, literal_value, string_value, ...) are shared with the hand-written
reader (fastparse.py), so both report a bad literal alike."""

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
# The escapes a string may hold. Any other backslash is an error (E0225), not a character that
# silently loses its backslash (`"\u0000"` would otherwise read as `u0000`).
ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"'}
_ESCAPE = re.compile(r"\\(.)", re.S)
_KNOWN_ESCAPES = "`\\n` (new line), `\\t` (tab), `\\\\` (backslash) and `\\\"` (double quote)"


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
        library, parts, label, *body = children
        return ast.composed_client(self._ident(library), parts, self._ident(label),
                               tuple(b for b in body if b is not None), self._span(meta))

    def patterns(self, meta, tokens):
        return tuple(self._ident(t) for t in tokens)

    # ---- a topology ----
    def topology(self, meta, children):
        return ast.Topology(tuple(c for c in children if c is not None), self._span(meta))

    def service(self, meta, children):
        name, *body = children
        return ast.Service(self._ident(name), tuple(b for b in body if b is not None), self._span(meta))

    def call_bind(self, meta, children):
        key, call = children
        return ast.CallBind(key, call, self._span(meta))

    def calls(self, meta, children):
        service, times, mode = children
        times_literal = None
        if times is not None:
            span = Span.of_token(self.source, times)
            times_literal = ast.Literal(int_value(str(times), span, self.diagnostics), str(times), span)
        return ast.Calls(self._ident(service), times_literal, self._ident(mode), self._span(meta))

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
        value = int_value(str(children[0]), self._span(meta), self.diagnostics)
        return ast.IntExpr(value.v if value is not None else 0, self._span(meta))

    def percent_expr(self, meta, children):
        value = number_value(str(children[0]), self._span(meta), parse_percent, self.diagnostics)
        return ast.PercentExpr(float(value.v) if value is not None else 0.0, self._span(meta))

    # ---- values ----
    def list(self, meta, children):
        return ast.ListValue(tuple(c for c in children if c is not None), self._span(meta))

    def range(self, meta, children):
        start, end, step = children
        return ast.RangeValue(start, end, step, self._span(meta))

    def _literal(self, meta, token: Token, value: Value | None) -> ast.Literal:
        return ast.Literal(value, str(token), self._span(meta))

    def int(self, meta, children):
        return self._literal(meta, children[0], int_value(str(children[0]), self._span(meta), self.diagnostics))

    def decimal(self, meta, children):
        return self._literal(meta, children[0], number_value(str(children[0]), self._span(meta), _parse_decimal,
                                                             self.diagnostics))

    def percent(self, meta, children):
        return self._literal(meta, children[0], number_value(str(children[0]), self._span(meta), parse_percent,
                                                             self.diagnostics))

    def quantity(self, meta, children):
        return self._literal(meta, children[0], quantity_value(str(children[0]), self._span(meta), self.diagnostics))

    def negative(self, meta, children):
        inner: ast.Literal = children[0]
        value = inner.value
        if value is not None:
            value = Value(value.type, -value.v)
        return ast.Literal(value, "-" + inner.text, self._span(meta))

    def string(self, meta, children):
        token = children[0]
        return self._literal(meta, token, string_value(str(token), self.source, token.line, token.column,
                                                       self.diagnostics))

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


def _parse_int(text: str) -> Value:
    return Value("int", int(text.replace("_", "")))


def _parse_decimal(text: str) -> Value:
    return Value("float", parse_number(text))


def number_value(text: str, span: Span, parse, diagnostics: Diagnostics) -> Value | None:
    """parse(text), or None after reporting a number too long or too large (E0223)."""
    if len(text) > MAX_DIGITS:                  # (shorter texts cannot have too many digits)
        digits = sum(ch.isdigit() for ch in text)
        if digits > MAX_DIGITS:
            diagnostics.error("E0223", f"the number has {digits} digits", span, "too many digits",
                              help=f"numbers have at most {MAX_DIGITS} digits")
            return None
    value = parse(text)
    problem = out_of_range(value)
    if problem is not None:
        diagnostics.error("E0223", f"`{text}` is out of range", span, "too large", help=problem)
        return None
    return value


def int_value(text: str, span: Span, diagnostics: Diagnostics) -> Value | None:
    return number_value(text, span, _parse_int, diagnostics)


def quantity_value(text: str, span: Span, diagnostics: Diagnostics) -> Value | None:
    """A duration literal (`20ms`), or None after reporting its unit (E0201) or size (E0223)."""
    try:
        return number_value(text, span, parse_quantity, diagnostics)
    except UnitError as error:
        known = ", ".join(u for u in DURATION_UNITS if u != "\u00b5s")
        diagnostics.error("E0201", f"unknown unit `{error}`", span, "not a unit rbl knows",
                          help=f"durations take one of the units {known}; percentages are written `40%`")
        return None


def literal_value(kind: str, text: str, span: Span, diagnostics: Diagnostics) -> Value | None:
    """The value of a number token of the grammar's kind INT, DECIMAL, QUANTITY or PERCENT."""
    if kind == "INT":
        return int_value(text, span, diagnostics)
    if kind == "DECIMAL":
        return number_value(text, span, _parse_decimal, diagnostics)
    if kind == "PERCENT":
        return number_value(text, span, parse_percent, diagnostics)
    return quantity_value(text, span, diagnostics)


def string_value(text: str, source: SourceFile, line: int, column: int, diagnostics: Diagnostics) -> Value | None:
    """The value of a STRING token `text` (quotes included) at line:column, or None after
    reporting a raw control character (E0224) or an escape rbl does not know (E0225)."""
    control = _CONTROL.search(text)
    if control is not None:
        span = Span.point(source, line, column + control.start())
        diagnostics.error("E0224", f"a string holds the control character U+{ord(control.group()):04X}",
                          span, "control character", help="remove it; write a tab or a new line as "
                          "`\\t` or `\\n` where one is meant")
        return None
    if "\\" in text:
        unknown = next((m for m in _ESCAPE.finditer(text) if m.group(1) not in ESCAPES), None)
        if unknown is not None:
            start = column + unknown.start()
            diagnostics.error("E0225", f"unknown escape `{unknown.group()}` in a string",
                              Span(source, line, start, line, start + 2), "not an escape rbl knows",
                              help=f"a string knows the escapes {_KNOWN_ESCAPES}; write the character itself, "
                                   f"or `\\\\` for a backslash")
            return None
    return Value("string", _unescape(text[1:-1]))


def _unescape(text: str) -> str:
    if "\\" not in text:                 # most strings: no copy character by character
        return text
    return _ESCAPE.sub(lambda match: ESCAPES[match.group(1)], text)
