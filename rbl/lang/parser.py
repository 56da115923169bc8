"""The parser: one cached Lark LALR parser (positions on) and the translation of Lark's
exceptions into rbl diagnostics. Lark's own names never reach the user. It reads what the
hand-written reader (fastparse.py, tried first) does not: every text with a syntax error."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from .diagnostics import Diagnostics
from .source import SourceFile, Span
from .tokens import MAX_NESTING, TooDeep, Unlexable, bracket_tokens

OPENERS = {"(": ")", "[": "]", "{": "}"}
CLOSERS = {v: k for k, v in OPENERS.items()}

# Human names of the grammar's regex terminals; literal terminals are shown as `text`.
TERMINAL_NAMES = {
    "NAME": "a name",
    "INT": "an integer",
    "DECIMAL": "a decimal number",
    "QUANTITY": "a duration (e.g. `20ms`)",
    "PERCENT": "a percentage (e.g. `40%`)",
    "STRING": "a string",
    "COMPARE": "a comparison (`==`, `<=`, ...)",
    "_NL": "a new line",
    "$END": "the end of the file",
    "OPTIONAL": "`?`",
}


class _NewlinePostLexer:
    """Drops newlines inside () and [] and collapses runs of newlines (comments between them);
    stops at a bracket nested deeper than MAX_NESTING."""

    always_accept = ("_NL",)

    def process(self, stream):
        depth = 0            # () and [], inside which newlines do not end statements
        nesting = 0          # all brackets
        previous_newline = False
        for token in stream:
            if token.type == "_NL":
                if depth > 0 or previous_newline:
                    continue
                previous_newline = True
                yield token
                continue
            previous_newline = False
            if token in ("(", "["):
                depth += 1
            elif token in (")", "]") and depth > 0:
                depth -= 1
            if token in OPENERS and token.type != "STRING":
                nesting += 1
                if nesting > MAX_NESTING:
                    raise TooDeep(token)
            elif token in CLOSERS and token.type != "STRING" and nesting > 0:
                nesting -= 1
            yield token


@lru_cache(maxsize=1)
def lark_parser() -> Lark:
    grammar = resources.files("rbl").joinpath("grammar.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=True,
                maybe_placeholders=True, postlex=_NewlinePostLexer(), cache=False)


@lru_cache(maxsize=1)
def _terminal_texts() -> dict[str, str]:
    from lark.lexer import PatternStr

    texts = {}
    for terminal in lark_parser().terminals:
        if isinstance(terminal.pattern, PatternStr):
            texts[terminal.name] = f"`{terminal.pattern.value}`"
    return texts


def describe_terminal(name: str) -> str:
    if name in TERMINAL_NAMES:
        return TERMINAL_NAMES[name]
    return _terminal_texts().get(name, f"`{name.lower()}`")


def describe_token(token: Token) -> str:
    if token.type == "$END":
        return "end of file"
    if token.type == "_NL":
        return "end of line"
    return f"`{token.value}`"


def _expected_list(names) -> str:
    described = sorted({describe_terminal(n) for n in names if n not in ("COMMENT",)})
    if not described:
        return "something else"
    if len(described) == 1:
        return described[0]
    return "one of " + ", ".join(described)


# Common mistakes, recognised by the parser state they fail in (Lark's match_examples).
_MISTAKES: dict[tuple[str, str, str], list[str]] = {
    ("E0105", "missing value", "write a value after `=` or `in`, e.g. `rounds = 10` or `users in [50, 100]`"): [
        "space {\n rounds =\n}", "space {\n users in\n}", "space {\n rounds = }",
        "space { client a.b {\n x =\n} }", "space { client a.b {\n x in\n} }",
    ],
    ("E0108", "`:` is not how a value is bound", "bind a value with `=` (one value) or `in` (an axis): `rounds = 10`"): [
        "space {\n rounds: 10\n}", "space { client a.b {\n x: 1\n} }",
    ],
    ("E0107", "a client needs a library and a pattern", "write `client <library>.<pattern> { ... }`, e.g. `client resilience4j.retry { }`"): [
        "space {\n client retry {}\n}", "space {\n client retry\n}", "space {\n client \n}",
        "space {\n client a. {}\n}",
    ],
    ("E0109", "statements must be on separate lines", "put each setting on its own line"): [
        "space {\n x = 1 y = 2\n}",
        "space { client a.b {\n x = 1 y = 2\n} }",
        "space {\n x = [1] y = 2\n}",
        "space { client a.b {\n x = [1] y = 2\n} }",
        "space {\n x = \"x\" y = 2\n}",
        "space { client a.b {\n x = \"x\" y = 2\n} }",
        "space {\n x = abc y = 2\n}",
        "space { client a.b {\n x = abc y = 2\n} }",
        "space {\n x = 1ms y = 2\n}",
        "space { client a.b {\n x = 1ms y = 2\n} }",
        "space {\n x = 1% y = 2\n}",
        "space { client a.b {\n x = 1% y = 2\n} }",
        "space {\n x = 1.5 y = 2\n}",
        "space { client a.b {\n x = 1.5 y = 2\n} }",
        "space {\n x = 1..2 y = 2\n}",
        "space { client a.b {\n x = 1..2 y = 2\n} }",
        "space {\n x = 1..2 step 1 y = 2\n}",
        "space { client a.b {\n x = 1..2 step 1 y = 2\n} }",
        "space {\n x = true y = 2\n}",
        "space { client a.b {\n x = true y = 2\n} }",
        "space {\n x = -1 y = 2\n}",
        "space { client a.b {\n x = -1 y = 2\n} }",
    ],
}


def parse_tree(source: SourceFile, diagnostics: Diagnostics, text: str | None = None) -> Tree | None:
    """Parse a source file; on failure report one located diagnostic and return None. `text`, when
    given, is read in place of the source's: the same length and lines (fastparse's reduced text)."""
    parser = lark_parser()
    text = source.text if text is None else text
    try:
        return parser.parse(text)
    except UnexpectedInput as error:
        _report(source, error, diagnostics, text)
        return None
    except TooDeep as deep:
        diagnostics.error("E0112", "brackets nested too deeply", Span.of_token(source, deep.token),
                          f"more than {MAX_NESTING} levels deep",
                          help=f"brackets nest at most {MAX_NESTING} levels; write the expression flatter")
        return None


def _report(source: SourceFile, error: UnexpectedInput, diagnostics: Diagnostics, text: str) -> None:
    if _report_brackets(source, error, diagnostics, text):
        return
    if isinstance(error, UnexpectedCharacters):
        span = Span.point(source, error.line, error.column)
        char = source.text[error.pos_in_stream] if error.pos_in_stream < len(source.text) else "?"
        hint = "strings use double quotes" if char == "'" else "remove it or check for a typo"
        diagnostics.error("E0104", f"unexpected character `{char}`", span, "not valid here", help=hint)
        return
    if isinstance(error, UnexpectedToken):
        token = error.token
        span = _token_span(source, token)
        mistake = None if _is_range_word(token) else _match_mistake(error)
        expected = _expected_list(error.accepts or error.expected)
        if mistake is not None:
            code, message, hint = mistake
            diagnostics.error(code, message, span, f"expected {expected}", help=hint)
        elif token.type == "$END":
            diagnostics.error("E0103", "unexpected end of file", span, f"expected {expected}",
                              help="the file ends in the middle of a statement")
        else:
            diagnostics.error("E0101", f"unexpected {describe_token(token)}", span,
                              f"expected {expected}", help=_hint_for(token))
        return
    diagnostics.error("E0101", "syntax error", Span.point(source, 1, 1))  # pragma: no cover


@lru_cache(maxsize=1)
def _mistake_states() -> dict[tuple[int, str], tuple[str, str, str]]:
    """(parser state, token type) at which each example mistake fails -> its diagnostic.

    Lark's match_examples also compares the depth of the parser stack, which here grows with
    every statement before the mistake; the state and token alone identify a mistake."""
    states = {}
    for label, examples in _MISTAKES.items():
        for example in examples:
            try:
                lark_parser().parse(example)
            except UnexpectedToken as error:
                states.setdefault((error.state.position, error.token.type), label)
    return states


def _match_mistake(error: UnexpectedToken):
    return _mistake_states().get((error.state.position, error.token.type))


def _is_range_word(token: Token) -> bool:
    return token.type == "NAME" and token.value in ("with", "to", "by", "through", "until")


def _hint_for(token: Token) -> str | None:
    if _is_range_word(token):
        return "ranges are written `a..b step s`"
    if token.value == "'" or token.value.startswith("'"):
        return "strings use double quotes"
    if token.type == "_NL":
        return "the statement is incomplete"
    return None


def _token_span(source: SourceFile, token: Token) -> Span:
    if token.type == "$END" or token.line is None:
        line, col = source.end
        return Span.point(source, line, col)
    if token.type == "_NL":
        return Span.point(source, token.line, token.column)
    return Span.of_token(source, token)


def _report_brackets(source: SourceFile, error: UnexpectedInput, diagnostics: Diagnostics, text: str) -> bool:
    """Unclosed or mismatched brackets are reported from the bracket, not where parsing stopped."""
    stack: list[Token] = []
    try:
        return _check_brackets(source, error, diagnostics, stack, bracket_tokens(text))
    except (Unlexable, TooDeep):         # the text does not lex (or nests too deep) further on:
        return False                     # report the parser's error


def _check_brackets(source: SourceFile, error: UnexpectedInput, diagnostics: Diagnostics,
                    stack: list[Token], tokens) -> bool:
    for token in tokens:               # the brackets as Lark's lexer reads them, streamed
        if token.value in OPENERS and token.type not in ("STRING",):
            stack.append(token)
        elif token.value in CLOSERS and token.type not in ("STRING",):
            if not stack:
                diagnostics.error("E0106", f"unmatched `{token.value}`", Span.of_token(source, token),
                                  "this bracket closes nothing",
                                  help="remove it, or add the opening bracket it belongs to")
                return True
            opener = stack.pop()
            if OPENERS[opener.value] != token.value:
                diagnostics.error(
                    "E0102", f"unclosed `{opener.value}`", Span.of_token(source, opener),
                    "this bracket is never closed",
                    secondary=((Span.of_token(source, token), f"`{token.value}` found here"),),
                    help=f"add the matching `{OPENERS[opener.value]}`")
                return True
    if stack:
        opener = _innermost_unclosed(stack, error)
        diagnostics.error("E0102", f"unclosed `{opener.value}`", Span.of_token(source, opener),
                          "this bracket is never closed",
                          secondary=((_error_span(source, error), "parsing stopped here"),),
                          help=f"add the matching `{OPENERS[opener.value]}`")
        return True
    return False


def _innermost_unclosed(stack: list[Token], error: UnexpectedInput) -> Token:
    """The innermost unclosed bracket that opened before the point where parsing failed."""
    line = getattr(error, "line", None)
    column = getattr(error, "column", None)
    if line is None or line < 0:
        return stack[-1]
    before = [t for t in stack if (t.line, t.column) <= (line, column)]
    return before[-1] if before else stack[0]


def _error_span(source: SourceFile, error: UnexpectedInput) -> Span:
    if isinstance(error, UnexpectedToken):
        return _token_span(source, error.token)
    return Span.point(source, error.line, error.column)
