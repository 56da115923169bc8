"""The grammar's tokens as one regular expression (TOKEN), read by the hand-written reader
(fastparse.py) and, for the parser's bracket diagnostics, by bracket_tokens; and the bracket
nesting cap both readers stop at. Every token is the one Lark's lexer reads (rbl/grammar.lark)."""

from __future__ import annotations

import re
from typing import Iterator

# Brackets nest at most this deep. Real specs nest three or four; the cap keeps every walk of
# the tree (Lark's transformers, the checks) far from Python's recursion limit.
MAX_NESTING = 64


class TooDeep(Exception):
    """Raised from the token stream at the bracket that nests too deep."""

    def __init__(self, token):
        super().__init__(token)
        self.token = token


WS = r"(?:[ \t\f]++|//[^\n]*+)*+"            # what the grammar ignores between tokens
NUMBER = r"[0-9][0-9_]*+(?:\.[0-9][0-9_]*+)?+(?:[A-Za-z\u00b5]++|%)?+"     # INT, DECIMAL, QUANTITY, PERCENT
NAME = r"[A-Za-z_][A-Za-z0-9_]*+"
STRING = r'"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"'
# One token after what is ignored. Numbers are one alternative: a number token is the longest of
# INT, DECIMAL, QUANTITY and PERCENT, which is also the order Lark tries them in.
TOKEN = re.compile(rf"""{WS}(?:
      (?P<nl>\r?\n[ \t\f\r\n]*+)
    | (?P<num>{NUMBER})
    | (?P<name>{NAME})
    | (?P<str>{STRING})
    | (?P<op>\.\.|[=!<>]=|[<>{{}}\[\]()=.,:+*?&-])
    | (?P<end>\Z))""", re.X)
_BRACKETS = frozenset("()[]{}")


class Unlexable(Exception):
    """The text holds what no token of the grammar reads (where Lark's lexer fails)."""


def bracket_tokens(text: str) -> Iterator:
    """The brackets of `text` as the Lark lexer and the postlexer give them (lark Tokens, in
    order), at the hand-written reader's speed: Unlexable where the lexer fails, TooDeep where
    the postlexer stops. For the parser's bracket diagnostics (parser._check_brackets)."""
    from lark import Token

    position, line, line_start, nesting = 0, 1, 0, 0
    while True:
        match = TOKEN.match(text, position)
        if match is None:
            raise Unlexable
        kind = match.lastgroup
        if kind == "end":
            return
        start, stop = match.span(kind)
        position = stop
        if kind == "nl":
            line += text.count("\n", start, stop)
            line_start = text.rindex("\n", start, stop) + 1
            continue
        if kind != "op":
            continue
        value = text[start:stop]
        if value not in _BRACKETS:
            continue
        column = start - line_start + 1
        token = Token("BRACKET", value, start, line, column, line, column + 1, stop)
        if value in "([{":
            nesting += 1
            if nesting > MAX_NESTING:
                raise TooDeep(token)
        elif nesting > 0:
            nesting -= 1
        yield token
