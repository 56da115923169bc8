"""A hand-written reader of rbl's grammar (rbl/grammar.lark), equivalent to the Lark parser and
the lowering after it (parser.py, lower.py) on every text it reads: the same AST, the same spans,
the same diagnostics. It exists for big specs: Lark's LALR parser in Python costs some 20 us and a
few hundred bytes per token, so 10 MB of list values or statements took minutes and gigabytes.
This reader takes about a microsecond per token, and keeps a long list of plain values (or a long
flat sum or product) as a view of its text (LazyNodes), not as one object per value.

It reads only what it is sure of. At anything else -- a syntax error, brackets nested deeper
than tokens.MAX_NESTING -- it gives up (Fallback) and the Lark parser reads the text, so malformed
specs get Lark's diagnostics exactly as before: first a copy with most of what precedes the stop
blanked out (Reader.reduced_text), where Lark finds the same error in time proportional to what
is left; and the whole text only when Lark finds no error there (`users in1..5`, which Lark's
contextual lexer reads as `users in 1..5` and this reader does not take). Keywords are recognised
where the grammar's contextual lexer recognises them (`in` after a key, `true` where a value may
stand, `client` or `topology` where a statement starts, `service` in a topology, `calls` in a
service), and are names everywhere else, as in Lark.
The tokens are tokens.py's, shared with the parser's bracket diagnostics.
tests/test_hostile_compile_parser.py holds the two readers to the same results.
"""

from __future__ import annotations

import re
from typing import Callable, Iterator

from . import ast
from .diagnostics import MAX_PER_CODE, Diagnostics
from .lower import int_value, literal_value, string_value
from .source import SourceFile, Span
from .tokens import MAX_NESTING, NAME as _NAME, NUMBER as _NUMBER, STRING as _STRING, TOKEN as _TOKEN
from .units import Value


# The grammar this reader was written against. A change to rbl/grammar.lark fails
# tests/test_hostile_compile_parser.py until this reader is brought along (and this hash with it):
# the two readers must not drift apart unnoticed.
GRAMMAR_SHA256 = "be535ec913c6250c5f3046a17e5cfdda9da2bfdf6a9409b5e2cdc0a177064143"


class Fallback(Exception):
    """The text is not one this reader takes: the Lark parser reads it (and reports its errors)."""


# A list of plain values: numbers (`-` right before one), strings and names, with white space,
# new lines and comments between them. Read in one match, and its values again on demand.
_LIST_WS = r"(?:[ \t\f\n]++|\r\n|//[^\n]*+)*+"
_ELEMENT = rf"(?:-[ \t\f]*+)?{_NUMBER}|{_STRING}|{_NAME}"
_PLAIN_LIST = re.compile(rf"\[{_LIST_WS}(?:(?:{_ELEMENT}){_LIST_WS}(?:,{_LIST_WS}(?:{_ELEMENT}){_LIST_WS})*+"
                         rf"(?:,{_LIST_WS})?+)?+\]")
_PLAIN_PREFIX = re.compile(rf"\[{_LIST_WS}(?:(?:{_ELEMENT}){_LIST_WS},{_LIST_WS})*+")
_LIST_ITEM = re.compile(rf"//[^\n]*+|({_ELEMENT})")
_ELEMENT_ITEM = re.compile(_ELEMENT)
# A flat sum or product of integers on one line (`1 + 1 + ... + 1`), read the same way.
_INT = r"[0-9][0-9_]*+(?![0-9_.%A-Za-z\u00b5])"
_CHAINS = {op: re.compile(rf"{_INT}(?:[ \t\f]*+{re.escape(op)}[ \t\f]*+{_INT})++") for op in "+*"}
_CHAIN_ITEM = re.compile(r"[0-9][0-9_]*+")
_INT_TOKEN = re.compile(r"[0-9][0-9_]*")          # the grammar's INT: a step's `* times`
_AFTER_CHAIN = re.compile(r"[ \t\f]*+(.?)")

LAZY_FROM = 64               # values from which a list is kept as a view of its text
_SURE_DIGITS = 18            # an integer of so many digits is below 2^63: lowering takes it as it is
_CACHE_LIMIT = 4096          # distinct value texts whose lowering is remembered, per list


def _number_kind(text: str) -> str:
    if text.endswith("%"):
        return "PERCENT"
    if not text[-1].isdigit() and text[-1] != "_":
        return "QUANTITY"
    return "DECIMAL" if "." in text else "INT"


class LazyNodes:
    """The nodes of a long list of plain values (or of a flat sum or product of integers), made
    from the text each time they are iterated: a sequence like the tuple lowering makes, at a
    few bytes per value instead of a few hundred. `tail`: nodes read one by one after the plain
    values (a list whose last values are not plain). Equal to the tuple of the same nodes."""

    __slots__ = ("source", "start", "stop", "line", "line_start", "count", "kind", "tail", "ends", "_values")

    def __init__(self, source: SourceFile, start: int, stop: int, line: int, line_start: int, kind: str):
        self.source, self.start, self.stop = source, start, stop
        self.line, self.line_start, self.kind = line, line_start, kind
        self._values: dict = {}
        self.count = 0
        self.tail: tuple = ()
        self.ends: list[int] = []        # where the first three values and the last two end

    def _items(self) -> Iterator[tuple[str, int, int, int]]:
        """(text, line, column, offset) of each value, in order."""
        text, start, stop = self.source.text, self.start, self.stop
        if self.kind != "list":
            pattern, comments = _CHAIN_ITEM, False
        else:
            comments = text.find("//", start, stop) >= 0
            pattern = _LIST_ITEM if comments else _ELEMENT_ITEM
        line, line_start = self.line, self.line_start
        if text.find("\n", start, stop) < 0:             # one line: the column is the offset's
            if comments:
                for match in pattern.finditer(text, start, stop):
                    if match.lastindex is not None:
                        begin = match.start()
                        yield match.group(1), line, begin - line_start + 1, begin
            else:
                for match in pattern.finditer(text, start, stop):
                    begin = match.start()
                    yield match.group(), line, begin - line_start + 1, begin
            return
        previous = start
        for match in pattern.finditer(text, start, stop):
            if comments and match.lastindex is None:
                continue                                  # a comment between values
            begin = match.start()
            newlines = text.count("\n", previous, begin)
            if newlines:
                line += newlines
                line_start = text.rindex("\n", previous, begin) + 1
            previous = begin
            yield match.group(1 if comments else 0), line, begin - line_start + 1, begin

    def _value(self, item: str, line: int, col: int, diagnostics: Diagnostics):
        """The value of a number or string item (remembered when lowering reports nothing)."""
        value = self._values.get(item)
        if value is not None:
            return value
        if len(item) <= _SURE_DIGITS and item.isdigit():      # what lowering makes of it, without a word
            value = Value("int", int(item))
        elif self.kind != "list":
            value = int_value(item, Span(self.source, line, col, line, col + len(item)), diagnostics)
        else:
            value = _element_value(item, self.source, line, col, diagnostics)
        if value is not None and len(self._values) < _CACHE_LIMIT:
            self._values[item] = value
        return value

    def validate(self, diagnostics: Diagnostics) -> None:
        """Count the items once, reporting what lowering reports about them, and note where the
        first three and the last two end (Reader.reduced_text)."""
        count, last = 0, []
        for item, line, col, offset in self._items():
            count += 1
            first = item[0]
            if len(item) <= _SURE_DIGITS and item.isdigit():
                pass                                      # nothing to report
            elif self.kind != "list" or first == '"' or first == "-" or first.isdigit():
                self._value(item, line, col, diagnostics)
            if count <= 3:
                self.ends.append(offset + len(item))
            else:
                last.append(offset + len(item))
                if len(last) > 2:
                    del last[0]
        self.ends += last
        self.count = count

    def __iter__(self) -> Iterator:
        quiet = Diagnostics()                             # reported once, by validate
        source = self.source
        if self.kind != "list":
            for item, line, col, _ in self._items():
                value = self._value(item, line, col, quiet)
                yield ast.IntExpr(value.v if value is not None else 0, Span(source, line, col, line, col + len(item)))
            return
        for item, line, col, _ in self._items():
            span = Span(source, line, col, line, col + len(item))
            first = item[0]
            if first == "-":
                text = "-" + item[1:].lstrip(" \t\f")       # `- 5` reads `-5`, as lowering writes it
                yield ast.Literal(self._value(item, line, col, quiet), text, span)
            elif first == '"' or first.isdigit():
                yield ast.Literal(self._value(item, line, col, quiet), item, span)
            elif item == "true" or item == "false":
                yield ast.Literal(Value("bool", item == "true"), item, span)
            else:
                yield ast.NameRef(item, span)
        yield from self.tail

    def entries(self) -> Iterator[tuple[str, object]]:
        """(key, entry) of each node without making it: the key is the node's text as written
        (one text, one value) and node(entry) makes the node. For checks that need the nodes of a
        list of 10^6 equal values only once (checks/values.py)."""
        if self.kind != "list":
            raise TypeError("entries() is for lists")
        for entry in self._items():
            yield entry[0], entry
        for node in self.tail:
            yield (node.text if isinstance(node, ast.Literal) else node.name), node

    def ints(self) -> Iterator[int]:
        """The value of each integer of a chain, without making its node (what IntExpr.value
        would hold: 0 for one lowering refused)."""
        quiet = Diagnostics()
        for item, line, col, _ in self._items():
            if len(item) <= _SURE_DIGITS and item.isdigit():
                yield int(item)
                continue
            value = self._value(item, line, col, quiet)
            yield value.v if value is not None else 0

    def node(self, entry):
        """The node of an entry of entries()."""
        if not isinstance(entry, tuple):
            return entry
        item, line, col, _ = entry
        span = Span(self.source, line, col, line, col + len(item))
        first = item[0]
        if first == "-":
            return ast.Literal(self._value(item, line, col, Diagnostics()), "-" + item[1:].lstrip(" \t\f"), span)
        if first == '"' or first.isdigit():
            return ast.Literal(self._value(item, line, col, Diagnostics()), item, span)
        if item == "true" or item == "false":
            return ast.Literal(Value("bool", item == "true"), item, span)
        return ast.NameRef(item, span)

    def __len__(self) -> int:
        return self.count + len(self.tail)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __getitem__(self, index):
        return tuple(self)[index]

    def __eq__(self, other) -> bool:
        if isinstance(other, (LazyNodes, tuple)):
            return len(self) == len(other) and tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"LazyNodes({len(self)} {self.kind} items at {self.source.name}:{self.line})"


def _element_value(item: str, source: SourceFile, line: int, col: int, diagnostics: Diagnostics):
    if item[0] == '"':
        return string_value(item, source, line, col, diagnostics)
    negative = item[0] == "-"
    number = item[1:].lstrip(" \t\f") if negative else item
    start = col + len(item) - len(number)         # lowering reports a number at the number, not at `-`
    value = literal_value(_number_kind(number), number, Span(source, line, start, line, start + len(number)),
                          diagnostics)
    return Value(value.type, -value.v) if negative and value is not None else value


class _Ends(list):
    """Where each item of a repetition ends (Reader.sequence)."""

    free = True


class _Reader:
    """Recursive descent over the token stream, with the postlexer's new-line rules: new lines
    inside () and [] are dropped, a run of them is one."""

    def __init__(self, source: SourceFile, diagnostics: Diagnostics):
        self.source = source
        self.text = source.text
        self.diags = diagnostics
        self.pos = 0
        self.line, self.line_start = 1, 0       # of self.pos
        self.depth = 0                          # open () and []
        self.nesting = 0                        # open brackets of every kind
        self.previous_newline = False
        self.names: dict[str, str] = {}
        self.keys: dict[tuple, tuple] = {}
        self.values: dict[str, Value] = {}
        self.kind = self.value = ""
        self.start = self.stop = self.tline = self.tcol = 0
        self.end_line = self.end_col = 0
        self.previous_stop = 0                  # where the token before the current one ends
        self.sequences: list[_Ends] = []        # the open repetitions: where each item read ends
        self.closed: list[tuple[int, _Ends]] = []   # those closed at the current token
        self.advance()

    # ---- tokens ----
    def advance(self) -> None:
        text = self.text
        self.previous_stop = self.stop
        while True:
            match = _TOKEN.match(text, self.pos)
            if match is None:
                raise Fallback
            kind = match.lastgroup
            start, stop = match.span(kind)
            self.pos = stop
            line, col = self.line, start - self.line_start + 1
            if kind == "nl":
                newlines = text.count("\n", start, stop)
                self.line += newlines
                self.line_start = text.rindex("\n", start, stop) + 1
                if self.depth > 0 or self.previous_newline:
                    continue
                self.previous_newline = True
                self.end_line, self.end_col = self.line, stop - self.line_start + 1
            else:
                self.previous_newline = False
                self.end_line, self.end_col = line, col + stop - start
                if kind == "op":
                    value = text[start:stop]
                    if value == "(" or value == "[":
                        self.depth += 1
                    elif (value == ")" or value == "]") and self.depth > 0:
                        self.depth -= 1
                    if value in "([{":
                        self.nesting += 1
                        if self.nesting > MAX_NESTING:
                            raise Fallback              # Lark reports E0112
                    elif value in ")]}" and self.nesting > 0:
                        self.nesting -= 1
            self.kind, self.start, self.stop, self.tline, self.tcol = kind, start, stop, line, col
            if kind == "name":              # one string per distinct name: 10^5 statements repeat a few
                value = text[start:stop]
                self.value = self.names.setdefault(value, value)
            else:
                self.value = text[start:stop] if kind != "nl" else "\n"
            return

    def expect(self, value: str) -> None:
        if self.value != value or self.kind not in ("op", "name"):
            raise Fallback
        self.advance()

    def is_op(self, value: str) -> bool:
        return self.kind == "op" and self.value == value

    def token_span(self) -> Span:
        return Span(self.source, self.tline, self.tcol, self.end_line, self.end_col)

    def name(self) -> ast.Ident:
        if self.kind != "name":
            raise Fallback
        ident = ast.Ident(self.value, self.token_span())
        self.advance()
        return ident

    def sequence(self, lines: bool = False) -> list[int]:
        """The ends of a repetition's items, as they are read. `lines`: items are separated by
        new lines (statements), else by `,` or an operator, where a new line outside brackets
        would end the statement: such a repetition is thinned out only inside brackets, or when
        no new line is in what would be blanked."""
        ends = _Ends()
        ends.free = lines or self.depth > 0
        self.sequences.append(ends)
        return ends

    def close_sequence(self) -> None:
        # kept while the reader is on the token that closed it: a syntax error right there
        # (`1 + 1 + ... + 1 2`) leaves Lark's parser inside the repetition still
        if self.closed and self.closed[-1][0] != self.start:
            self.closed = []
        self.closed.append((self.start, self.sequences.pop()))

    def reduced_text(self) -> str:
        """The text with what the Lark parser need not read to fail where this reader failed:
        in each repetition still open (statements of a block, values of a list, operands, call
        arguments, the items of the file), the items between the third and the last one read are
        blanked (white space, new lines kept, so every position stays). The grammar's repetitions
        are left-recursive, so Lark's parser is in the same state after the first three items and
        the last as after all of them: its error, and its message, are the same, at the cost of
        the text left."""
        text, out, position = self.text, [], 0
        repetitions = self.sequences + [ends for start, ends in self.closed if start == self.start]
        blanked = sorted((ends[2], ends[-2]) for ends in repetitions if len(ends) > 4 and ends[2] < ends[-2] and
                         (ends.free or text.find("\n", ends[2], ends[-2]) < 0))
        for begin, end in blanked:             # apart: each lies before the next one's last item
            out.append(text[position:begin])
            out.append("\n".join(" " * len(line) for line in text[begin:end].split("\n")))
            position = end
        out.append(text[position:])
        return "".join(out)

    def mark(self) -> tuple[int, int]:
        return self.tline, self.tcol

    def span_from(self, mark: tuple[int, int], end: Span) -> Span:
        return Span(self.source, mark[0], mark[1], end.end_line, end.end_col)

    def optional_newline(self) -> None:
        if self.kind == "nl":
            self.advance()

    # ---- program ----
    def program(self) -> ast.Program:
        first = self.token_span() if self.kind != "end" else None
        last = first
        if self.kind == "nl":
            self.advance()
        items = []
        ends = self.sequence(lines=True)
        while self.kind != "end":
            if self.kind == "name" and self.value == "space":
                items.append(self.space())
            elif self.kind == "name" and self.value == "library":
                items.append(self.library())
            else:
                raise Fallback
            ends.append(self.previous_stop)
            last = items[-1].span
            if self.kind == "nl":
                last = self.token_span()
                self.advance()
            elif self.kind != "end":
                raise Fallback
        spaces = tuple(i for i in items if isinstance(i, ast.Space))
        libraries = tuple(i for i in items if isinstance(i, ast.LibraryDecl))
        span = Span.point(self.source, 1, 1) if first is None else Span(
            self.source, first.line, first.col, last.end_line, last.end_col)
        return ast.Program(spaces, libraries, span)

    def block(self, statement: Callable[[], object]) -> tuple[list, Span]:
        """`{` _NL? [stmt (_NL stmt)* _NL?] `}`: the statements and the span of the `}`."""
        self.expect("{")
        self.optional_newline()
        body, ends = [], self.sequence(lines=True)
        while not self.is_op("}"):
            body.append(statement())
            ends.append(self.previous_stop)
            if self.kind == "nl":
                self.advance()
            elif not self.is_op("}"):
                raise Fallback
        self.close_sequence()
        close = self.token_span()
        self.advance()
        return body, close

    def space(self) -> ast.Space:
        mark = self.mark()
        self.advance()                                    # `space`
        name = self.name() if self.kind == "name" else None
        body, close = self.block(self.space_statement)
        return ast.Space(name, tuple(body), self.span_from(mark, close))

    def space_statement(self):
        if self.kind == "name":
            if self.value == "client":
                return self.client()
            if self.value == "assert":
                return self.assertion()
            if self.value == "let":
                return self.let()
            if self.value == "topology":
                return self.topology()
        return self.setting()

    # ---- settings and values ----
    def key(self) -> ast.Key:
        if self.kind != "name":
            raise Fallback
        line, col, parts = self.tline, self.tcol, [self.value]
        end_line, end_col = self.end_line, self.end_col
        self.advance()
        while self.is_op("."):
            self.advance()
            if self.kind != "name":
                raise Fallback
            parts.append(self.value)
            end_line, end_col = self.end_line, self.end_col
            self.advance()
        key = tuple(parts)
        key = self.keys.setdefault(key, key)          # one tuple per distinct key
        return ast.Key(key, Span(self.source, line, col, end_line, end_col))

    def setting(self):
        key = self.key()
        if self.is_op("="):
            self.advance()
            value = self.value_node()
            return ast.Bind(key, value, key.span.to(value.span))
        if self.kind == "name" and self.value == "in":
            self.advance()
            value = self.value_node()
            return ast.Axis(key, value, key.span.to(value.span))
        raise Fallback

    def value_node(self):
        if self.is_op("["):
            return self.list_value()
        start = self.scalar()
        if self.is_op(".."):
            self.advance()
            end = self.scalar()
            step = None
            if self.kind == "name" and self.value == "step":
                self.advance()
                step = self.scalar()
            return ast.RangeValue(start, end, step, start.span.to((step or end).span))
        return start

    def scalar(self):
        kind = self.kind
        span = self.token_span()
        if kind == "num" or kind == "str":
            text = self.value
            value = self.values.get(text)
            if value is None:
                if kind == "num":
                    value = literal_value(_number_kind(text), text, span, self.diags)
                else:
                    value = string_value(text, self.source, self.tline, self.tcol, self.diags)
                # one Value per distinct text that lowering takes without a word (10^5 statements
                # repeat a few); a text it reports is lowered, and reported, each time
                if value is not None and len(self.values) < _CACHE_LIMIT:
                    self.values[text] = value
            self.advance()
            return ast.Literal(value, text, span)
        if kind == "name":
            text = self.value
            self.advance()
            if text == "true" or text == "false":
                return ast.Literal(Value("bool", text == "true"), text, span)
            return ast.NameRef(text, span)
        if self.is_op("-"):
            self.advance()
            if self.kind != "num":
                raise Fallback
            inner = self.scalar()
            value = inner.value
            if value is not None:
                value = Value(value.type, -value.v)
            return ast.Literal(value, "-" + inner.text, span.to(inner.span))
        raise Fallback

    def list_value(self) -> ast.ListValue:
        """A list, the `[` being the current token. Its plain values are read in one match of
        the text: now, to count them and report what lowering reports, and again each time they
        are iterated (LazyNodes); a short list becomes a tuple. What follows the plain values
        (a list whose last values are not plain, or a syntax error) is read token by token."""
        text, first_line, first_col = self.text, self.tline, self.tcol
        whole = _PLAIN_LIST.match(text, self.start)
        plain = whole or _PLAIN_PREFIX.match(text, self.start)
        end = plain.end()
        items = LazyNodes(self.source, self.start + 1, end - 1 if whole else end, first_line, self.line_start, "list")
        found = Diagnostics()
        items.validate(found)
        if not whole and items.count < LAZY_FROM:
            return self.list_by_tokens()                  # a few plain values: all read by tokens
        _add(self.diags, found)
        newlines = text.count("\n", self.start, end)
        if newlines:
            self.line += newlines
            self.line_start = text.rindex("\n", self.start, end) + 1
        self.pos = self.stop = end
        self.previous_newline = False
        if whole:
            span = Span(self.source, first_line, first_col, self.line, end - self.line_start + 1)
            self.depth -= 1                               # the `]`, as the postlexer counts it
            self.nesting -= 1
            self.advance()
            return ast.ListValue(items if items.count >= LAZY_FROM else tuple(items), span)
        self.advance()                                    # the first value after the plain ones
        tail, ends = [], self.sequence()
        ends += items.ends                                # the plain values count for reduced_text
        while not self.is_op("]"):
            tail.append(self.scalar())
            ends.append(self.previous_stop)
            if self.is_op(","):
                self.advance()
            elif not self.is_op("]"):
                raise Fallback
        self.close_sequence()
        close = self.token_span()
        self.advance()
        items.tail = tuple(tail)
        return ast.ListValue(items, Span(self.source, first_line, first_col, close.end_line, close.end_col))

    def list_by_tokens(self) -> ast.ListValue:
        mark = self.mark()
        self.advance()                                    # `[`
        items, ends = [], self.sequence()
        while not self.is_op("]"):
            items.append(self.scalar())
            ends.append(self.previous_stop)
            if self.is_op(","):
                self.advance()
            elif not self.is_op("]"):
                raise Fallback
        self.close_sequence()
        close = self.token_span()
        self.advance()
        return ast.ListValue(tuple(items), self.span_from(mark, close))

    # ---- clients and neutral values ----
    def client(self) -> ast.Client:
        mark = self.mark()
        self.advance()                                    # `client`
        library = self.name()
        self.expect(".")
        parts = [self.name()]
        while self.is_op("+"):
            self.advance()
            parts.append(self.name())
        label = None
        if self.kind == "name" and self.value == "as":
            self.advance()
            label = self.name()
        body, close = self.block(self.client_statement)
        return ast.composed_client(library, tuple(parts), label, tuple(body), self.span_from(mark, close))

    def client_statement(self):
        if self.kind == "name" and self.value == "use":
            mark = self.mark()
            self.advance()
            if self.kind != "name":
                raise Fallback
            name = self.name()
            if self.is_op("("):
                value = self.call_rest(name)
            else:
                value = ast.NameRef(name.name, name.span)
            return ast.Use(value, self.span_from(mark, value.span))
        return self.setting()

    def let(self) -> ast.Let:
        mark = self.mark()
        self.advance()                                    # `let`
        name = self.name()
        self.expect("=")
        call = self.call_rest(self.name())
        return ast.Let(name, call, self.span_from(mark, call.span))

    def call_rest(self, name: ast.Ident) -> ast.Call:
        """NAME `(` [call_arg (`,` call_arg)* [`,`]] `)`, NAME already read."""
        self.expect("(")
        args, ends = [], self.sequence()
        while not self.is_op(")"):
            args.append(self.call_arg())
            ends.append(self.previous_stop)
            if self.is_op(","):
                self.advance()
            elif not self.is_op(")"):
                raise Fallback
        self.close_sequence()
        close = self.token_span()
        self.advance()
        return ast.Call(name, tuple(args), name.span.to(close))

    def call_arg(self) -> ast.CallArg:
        if self.kind == "name" and self.value not in ("true", "false"):
            name = self.name()
            if self.is_op(":"):
                self.advance()
                value = self.call_value()
                return ast.CallArg(name, value, False, name.span.to(value.span))
            if self.kind == "name" and self.value == "in":
                self.advance()
                value = self.value_node()
                return ast.CallArg(name, value, True, name.span.to(value.span))
            if self.is_op("("):
                value = self.call_rest(name)
            else:
                value = ast.NameRef(name.name, name.span)
                if self.is_op(".."):
                    value = self.range_rest(value)
            return ast.CallArg(None, value, False, value.span)
        value = self.call_value()
        return ast.CallArg(None, value, False, value.span)

    def call_value(self):
        if self.kind == "name" and self.value not in ("true", "false"):
            name = self.name()
            if self.is_op("("):
                return self.call_rest(name)
            value = ast.NameRef(name.name, name.span)
            return self.range_rest(value) if self.is_op("..") else value
        return self.value_node()

    def range_rest(self, start) -> ast.RangeValue:
        self.advance()                                    # `..`
        end = self.scalar()
        step = None
        if self.kind == "name" and self.value == "step":
            self.advance()
            step = self.scalar()
        return ast.RangeValue(start, end, step, start.span.to((step or end).span))

    # ---- a topology ----
    def topology(self) -> ast.Topology:
        mark = self.mark()
        self.advance()                                    # `topology`
        body, close = self.block(self.topology_statement)
        return ast.Topology(tuple(body), self.span_from(mark, close))

    def topology_statement(self):
        if self.kind == "name" and self.value == "service":
            mark = self.mark()
            self.advance()                                # `service`
            name = self.name()
            body, close = self.block(self.service_statement)
            return ast.Service(name, tuple(body), self.span_from(mark, close))
        return self.bind()

    def bind(self) -> ast.Bind:
        """`key = value` only: where the grammar has no axis (a topology's statements)."""
        setting = self.setting()
        if not isinstance(setting, ast.Bind):
            raise Fallback
        return setting

    def service_statement(self):
        if self.kind == "name" and self.value == "calls":
            return self.calls()
        key = self.key()
        if not self.is_op("="):
            raise Fallback
        self.advance()
        if self.kind == "name" and self.value not in ("true", "false"):
            name = self.name()
            if self.is_op("("):                       # `work = factorial(300)`
                call = self.call_rest(name)
                return ast.CallBind(key, call, key.span.to(call.span))
            value = ast.NameRef(name.name, name.span)
            value = self.range_rest(value) if self.is_op("..") else value
        else:
            value = self.value_node()
        return ast.Bind(key, value, key.span.to(value.span))

    def calls(self) -> ast.Calls:
        """`calls NAME [* INT] [NAME]`."""
        mark = self.mark()
        self.advance()                                    # `calls`
        service = self.name()
        last = service.span
        times = None
        if self.is_op("*"):
            self.advance()
            if self.kind != "num" or not _INT_TOKEN.fullmatch(self.value):
                raise Fallback
            span = self.token_span()
            times = ast.Literal(int_value(self.value, span, self.diags), self.value, span)
            last = span
            self.advance()
        mode = None
        if self.kind == "name":
            mode = self.name()
            last = mode.span
        return ast.Calls(service, times, mode, self.span_from(mark, last))

    # ---- assertions ----
    def assertion(self) -> ast.Assertion:
        mark = self.mark()
        self.advance()                                    # `assert`
        subject = self.name()
        if self.kind != "op" or self.value not in ("==", "!=", "<=", ">=", "<", ">"):
            raise Fallback
        op = self.value
        self.advance()
        expr, end = self.expr()
        return ast.Assertion(subject, op, expr, self.span_from(mark, end))

    def expr(self):
        """An expression and the span it stands in: its own, or its brackets'."""
        return self.chain("+") or self.operation("+", self.term)

    def term(self):
        return self.chain("*") or self.operation("*", self.factor)

    def operation(self, op: str, operand):
        first, first_place = operand()
        if not self.is_op(op):
            return first, first_place
        operands, place, ends = [first], first_place, self.sequence()
        ends.append(self.previous_stop)
        while self.is_op(op):
            self.advance()
            node, place = operand()
            operands.append(node)
            ends.append(self.previous_stop)
        self.close_sequence()
        span = first_place.to(place)
        return ast.OpExpr(op, tuple(operands), span), span

    def factor(self):
        span = self.token_span()
        if self.kind == "num":
            text = self.value
            kind = _number_kind(text)
            if kind == "INT":
                value = int_value(text, span, self.diags)
                self.advance()
                return ast.IntExpr(value.v if value is not None else 0, span), span
            if kind == "PERCENT":
                value = literal_value(kind, text, span, self.diags)
                self.advance()
                return ast.PercentExpr(float(value.v) if value is not None else 0.0, span), span
            raise Fallback
        if self.is_op("("):
            self.advance()
            inner, _ = self.expr()
            if not self.is_op(")"):
                raise Fallback
            close = self.token_span()
            self.advance()
            return inner, span.to(close)
        raise Fallback

    def chain(self, op: str):
        """A long flat chain of integers joined by `op` on one line, read in one match
        (LazyNodes), when it is one whole operand: not followed by a tighter operator."""
        if self.kind != "num":
            return None
        match = _CHAINS[op].match(self.text, self.start)
        if match is None or self.text.count(op, self.start, match.end()) + 1 < LAZY_FROM:
            return None
        after = _AFTER_CHAIN.match(self.text, match.end()).group(1)
        if after and (after in "*(.%+" or after.isalnum() or after == "_"):
            return None                       # not a whole operand, or not an expression: read by tokens
        items = LazyNodes(self.source, self.start, match.end(), self.tline, self.line_start, "chain")
        items.validate(self.diags)
        span = Span(self.source, self.tline, self.tcol, self.tline, self.tcol + match.end() - self.start)
        self.pos = self.stop = match.end()
        self.previous_newline = False
        self.advance()
        return ast.OpExpr(op, items, span), span

    # ---- library declarations ----
    def library(self) -> ast.LibraryDecl:
        mark = self.mark()
        self.advance()                                    # `library`
        name = self.name()
        body, close = self.block(self.library_statement)
        settings = tuple(b for b in body if isinstance(b, (ast.Bind, ast.Axis)))
        patterns = tuple(b for b in body if isinstance(b, ast.PatternDecl))
        return ast.LibraryDecl(name, settings, patterns, self.span_from(mark, close))

    def library_statement(self):
        if self.kind == "name" and self.value == "pattern":
            mark = self.mark()
            self.advance()
            name = self.name()
            params, close = self.block(self.param_decl)
            return ast.PatternDecl(name, tuple(params), self.span_from(mark, close))
        setting = self.setting()
        if not isinstance(setting, ast.Bind):
            raise Fallback                                # a library binds its settings with `=`
        return setting

    def param_decl(self) -> ast.ParamDecl:
        name = self.name()
        optional = False
        if self.is_op("?"):
            optional = True
            self.advance()
        self.expect(":")
        type_expr = self.type_expr()
        end = type_expr.span
        default = handoff = alias = None
        if self.is_op("="):
            self.advance()
            default = self.scalar()
            end = default.span
        if self.kind == "name" and self.value == "as":
            self.advance()
            handoff = self.name()
            end = handoff.span
        if self.kind == "name" and self.value == "alias":
            self.advance()
            alias = self.name()
            end = alias.span
        return ast.ParamDecl(name, optional, type_expr, default, handoff, alias, name.span.to(end))

    def type_expr(self) -> ast.TypeExpr:
        start = self.token_span()
        if self.kind == "name" and self.value == "enum":
            self.advance()
            self.expect("(")
            members = [self.name()]
            while self.is_op(","):
                self.advance()
                if self.is_op(")"):
                    break
                members.append(self.name())
            if not self.is_op(")"):
                raise Fallback
            end = self.token_span()
            self.advance()
            type_name, member_idents = None, tuple(members)
        else:
            ident = self.name()
            end, type_name, member_idents = ident.span, ident, ()
        constraints = []
        while self.is_op("&"):
            self.advance()
            mark = self.mark()
            if self.kind != "op" or self.value not in ("==", "!=", "<=", ">=", "<", ">"):
                raise Fallback
            op = self.value
            self.advance()
            bound = self.scalar()
            constraints.append(ast.Constraint(op, bound, self.span_from(mark, bound.span)))
            end = bound.span
        return ast.TypeExpr(type_name, member_idents, tuple(constraints), start.to(end))


def parse_fast(source: SourceFile, diagnostics: Diagnostics) -> ast.Program | str:
    """The program, with lowering's diagnostics added to `diagnostics`; or, when the Lark parser
    must read the text, the text it may read in place of the source's to find the same syntax
    error (Reader.reduced_text; nothing is added to `diagnostics` then)."""
    local = Diagnostics()
    reader = None
    try:
        reader = _Reader(source, local)
        program = reader.program()
    except (Fallback, RecursionError):
        return reader.reduced_text() if reader is not None else source.text
    _add(diagnostics, local)
    return program


def _add(diagnostics: Diagnostics, more: Diagnostics) -> None:
    """`more`'s diagnostics after `diagnostics`' own, as if reported to it: at most
    MAX_PER_CODE of a code are kept, and all are counted."""
    listed: dict[str, int] = {}
    for item in more.items:
        listed[item.code] = listed.get(item.code, 0) + 1
        if diagnostics.counts.get(item.code, 0) < MAX_PER_CODE:
            diagnostics.items.append(item)
        diagnostics.counts[item.code] = diagnostics.counts.get(item.code, 0) + 1
    for code, count in more.counts.items():                 # counted there, never listed
        diagnostics.counts[code] = diagnostics.counts.get(code, 0) + count - listed.get(code, 0)
    diagnostics.error_count += more.error_count
