"""A Pygments lexer for rbl (registered under the `pygments.lexers` entry point as `rbl`), and
the colouring of source lines in diagnostics on a colour terminal.

It follows rbl/grammar.lark; tests/test_editor_support.py fails when a keyword or operator of the
grammar is missing here or in the VS Code grammar (editors/vscode/syntaxes/rbl.tmLanguage.json).
"""

from __future__ import annotations

import os
import sys

from pygments import highlight
from pygments.formatters import TerminalFormatter
from pygments.lexer import RegexLexer, bygroups, default, include, words
from pygments.token import (Comment, Keyword, Name, Number, Operator, Punctuation, String, Text,
                            Whitespace)

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
DECLARATIONS = ("space", "library", "pattern", "client", "topology", "service")
WORD_OPERATORS = ("in", "step", "as", "alias")
NEUTRAL_KEYWORDS = ("let", "use")
KEYWORDS = DECLARATIONS + WORD_OPERATORS + NEUTRAL_KEYWORDS + ("assert", "calls", "enum", "true", "false")
OPERATORS = ("..", "==", "!=", "<=", ">=", "<", ">", "=", "+", "*", "-", "&", "?")
PUNCTUATION = (",", ":", ".", "{", "}", "[", "]", "(", ")")


class RblLexer(RegexLexer):
    name = "rbl"
    aliases = ["rbl"]
    filenames = ["*.rbl"]
    mimetypes = ["text/x-rbl"]
    url = "https://github.com/rbl-bench/rbl"

    tokens = {
        "root": [
            # a statement's key: `rounds =`, `fault.rate in`, `maxAttempts: int` (library declarations);
            # first, because only here is the lexer at the start of a line
            (rf"^([ \t]*)({IDENT}(?:\.{IDENT})*)(?=\s*(?:=(?!=)|in\b|\??\s*:))", bygroups(Whitespace, Name.Variable)),
            (r"\n", Whitespace),
            (r"[ \t\f]+", Whitespace),
            (r"//.*?$", Comment.Single),
            # client LIBRARY.PATTERN [+ PATTERN ...] [as NAME]
            (rf"(client)(\s+)({IDENT})(\s*)(\.)(\s*)({IDENT})",
             bygroups(Keyword.Declaration, Whitespace, Name.Namespace, Whitespace, Punctuation, Whitespace,
                      Name.Class), "client-tail"),
            (rf"(space|library)(\s+)({IDENT})", bygroups(Keyword.Declaration, Whitespace, Name.Namespace)),
            (rf"(pattern|service)(\s+)({IDENT})", bygroups(Keyword.Declaration, Whitespace, Name.Class)),
            # a service's downstream calls: calls NAME [* times] [parallel]
            (rf"(calls)(\s+)({IDENT})", bygroups(Keyword, Whitespace, Name.Class)),
            # library-neutral values: let NAME = retry(attempts: 3, backoff: constant(50ms))
            (rf"(let)(\s+)({IDENT})", bygroups(Keyword.Declaration, Whitespace, Name.Constant)),
            (rf"([(,])(\s*)({IDENT})(?=\s*(?::|in\b))", bygroups(Punctuation, Whitespace, Name.Variable)),
            (rf"(?!(?:enum)\b){IDENT}(?=\s*\()", Name.Function),
            include("keywords"),
            include("values"),
            (words(OPERATORS), Operator),
            (words(PUNCTUATION), Punctuation),
            (IDENT, Name),
        ],
        # a composed client's further patterns, then its label
        "client-tail": [
            (rf"([ \t]*)(\+)([ \t]*)({IDENT})", bygroups(Whitespace, Operator, Whitespace, Name.Class)),
            (rf"([ \t]+)(as)([ \t]+)({IDENT})", bygroups(Whitespace, Operator.Word, Whitespace, Name.Label), "#pop"),
            default("#pop"),
        ],
        "keywords": [
            (words(("assert", "use", "calls"), suffix=r"\b"), Keyword),
            (words(("let",), suffix=r"\b"), Keyword.Declaration),
            (words(WORD_OPERATORS, suffix=r"\b"), Operator.Word),
            (words(("enum",), suffix=r"\b"), Keyword.Type),
            (words(("true", "false"), suffix=r"\b"), Keyword.Constant),
            (words(DECLARATIONS, suffix=r"\b"), Keyword.Declaration),
        ],
        "values": [
            (r'"', String.Double, "string"),
            (r"([0-9][0-9_]*(?:\.[0-9][0-9_]*)?)(%)", bygroups(Number, Keyword.Type)),
            (r"([0-9][0-9_]*(?:\.[0-9][0-9_]*)?)([A-Za-zµ]+)", bygroups(Number, Keyword.Type)),
            (r"[0-9][0-9_]*\.[0-9][0-9_]*", Number.Float),
            (r"[0-9][0-9_]*", Number.Integer),
            (r"[A-Z][A-Z0-9_]*\b", Name.Constant),
        ],
        "string": [
            (r'\\.', String.Escape),
            (r'"', String.Double, "#pop"),
            (r"$", Text, "#pop"),              # an unterminated string ends with its line
            (r'[^"\\\n]+', String.Double),
        ],
    }


def colour_wanted(stream=None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    stream = stream or sys.stderr
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(stream, "isatty") and stream.isatty() and os.environ.get("TERM") != "dumb"


_LEXER = RblLexer(stripnl=False, ensurenl=False)
_FORMATTER = TerminalFormatter()


def colour_source_line(text: str) -> str:
    """One line of rbl source with ANSI colours."""
    return highlight(text, _LEXER, _FORMATTER).rstrip("\n")
