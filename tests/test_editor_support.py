"""Editor support: the VS Code TextMate grammar (tested headlessly with vscode-tmgrammar-test) and
the Pygments lexer (also used to colour diagnostics), both kept in step with rbl/grammar.lark."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from lark.lexer import PatternStr
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.token import Error, Keyword, Name, Number, Operator, Punctuation, String, Whitespace

from rbl.lang.diagnostics import Diagnostic
from rbl.lang.parser import lark_parser
from rbl.compiler.pipeline import compile_source
from rbl.lang.render import render_all
from rbl.highlight import RblLexer

from .conftest import EXAMPLES, REPO

VSCODE = REPO / "editors" / "vscode"
TM_GRAMMAR = json.loads((VSCODE / "syntaxes" / "rbl.tmLanguage.json").read_text())
ANSI = re.compile(r"\x1b\[[0-9;]*m")


OPERATOR_CHARS = "=!<>+*-&?.:,{}[]()%|^~@#$;/"


def grammar_literals() -> tuple[set[str], set[str]]:
    """The keywords and the operator/punctuation strings of rbl/grammar.lark: string terminals,
    plus every 1-2 character operator a regex terminal (COMPARE: `==`, `<=`, ...) accepts."""
    terminals = lark_parser().terminals
    literals = {t.pattern.value for t in terminals if isinstance(t.pattern, PatternStr)}
    candidates = set(OPERATOR_CHARS) | {a + b for a in OPERATOR_CHARS for b in OPERATOR_CHARS}
    for terminal in terminals:
        if terminal.name not in ("COMMENT",):
            literals |= {c for c in candidates if re.fullmatch(terminal.pattern.to_regexp(), c)}
    keywords = {lit for lit in literals if lit.isalpha()}
    return keywords, literals - keywords


def tm_patterns(*groups: str) -> list[str]:
    return [p["match"] for group in groups for p in TM_GRAMMAR["repository"][group]["patterns"]]


# -- drift: both highlighters know every keyword and operator of the grammar ---------------------------
def test_the_grammar_has_the_keywords_and_operators_this_test_expects():
    keywords, operators = grammar_literals()
    assert {"space", "client", "assert", "in", "step", "library", "pattern", "enum"} <= keywords
    assert {"..", "==", "!=", "<=", ">", "=", "&", "?", "{", "["} <= operators


def test_every_keyword_is_a_keyword_in_both_highlighters():
    keywords, _ = grammar_literals()
    tm_keyword_rules = tm_patterns("keywords")
    for keyword in sorted(keywords):
        assert any(re.fullmatch(rule, keyword) for rule in tm_keyword_rules), f"tmLanguage misses `{keyword}`"
        ((token, value),) = [t for t in RblLexer().get_tokens(keyword) if t[1] != "\n"]
        assert value == keyword and (token in Keyword or token in Operator.Word), f"Pygments: {keyword} is {token}"


def test_every_operator_is_an_operator_or_punctuation_in_both_highlighters():
    _, operators = grammar_literals()
    tm_rules = tm_patterns("operators", "punctuation")
    for operator in sorted(operators):
        assert any(re.fullmatch(rule, operator) for rule in tm_rules), f"tmLanguage misses `{operator}`"
        tokens = [t for t in RblLexer().get_tokens(f"x {operator} y") if t[1].strip()]
        assert tokens[1] == (tokens[1][0], operator) and (tokens[1][0] in Operator or tokens[1][0] in Punctuation), \
            f"Pygments lexes `{operator}` as {tokens[1]}"


# -- the VS Code grammar, tested by vscode-tmgrammar-test -------------------------------------------------
def test_vscode_extension_declares_the_language_and_grammar():
    package = json.loads((VSCODE / "package.json").read_text())
    (language,) = package["contributes"]["languages"]
    (grammar,) = package["contributes"]["grammars"]
    assert language["extensions"] == [".rbl"] and grammar["scopeName"] == TM_GRAMMAR["scopeName"] == "source.rbl"
    assert (VSCODE / grammar["path"]).resolve() == (VSCODE / "syntaxes" / "rbl.tmLanguage.json").resolve()
    configuration = json.loads((VSCODE / language["configuration"]).read_text())
    assert configuration["comments"]["lineComment"] == "//"


def test_every_example_has_a_grammar_snapshot():
    snapshots = {p.name.removesuffix(".snap") for p in (VSCODE / "tests" / "snap").glob("*.snap")}
    assert snapshots == {p.name for p in EXAMPLES.glob("*.rbl")}


def test_vscode_tmgrammar_unit_and_snapshot_tests_pass():
    npm = shutil.which("npm")
    assert npm, "Node.js 20+ and npm are needed for the grammar tests"
    if not (VSCODE / "node_modules" / ".bin" / "vscode-tmgrammar-test").exists():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=VSCODE, check=True, capture_output=True)
    done = subprocess.run([npm, "test"], cwd=VSCODE, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("run successfuly") == len(list((VSCODE / "tests" / "unit").glob("*.rbl")))


# -- the Pygments lexer ---------------------------------------------------------------------------------
def test_the_lexer_is_registered_with_pygments():
    assert isinstance(get_lexer_by_name("rbl"), RblLexer)
    assert isinstance(get_lexer_for_filename("spec.rbl"), RblLexer)


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.rbl")))
def test_every_example_tokenizes_without_error_tokens(name):
    text = (EXAMPLES / name).read_text()
    tokens = list(RblLexer().get_tokens(text))
    assert not [t for t in tokens if t[0] in Error]
    assert "".join(value for _, value in tokens) == text


SNIPPETS = {
    "client-header": "  client resilience4j.retry as fast {\n",
    "axis-with-units": "  initialIntervalMillis in [20ms, 1.5s]\n",
    "fault-range": "  fault.rate in 0%..80% step 20%  // five rates\n",
    "param-declaration": '    cap?: duration & >= 1ms = 500ms as ms alias "old"\n',
}


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_golden_token_streams(name, text_snapshot):
    tokens = [(str(token), value) for token, value in RblLexer().get_tokens(SNIPPETS[name])
              if token not in Whitespace]
    assert "\n".join(f"{token:<28} {value!r}" for token, value in tokens) + "\n" == text_snapshot


def test_golden_streams_have_the_expected_kinds():
    tokens = dict((value, token) for token, value in RblLexer().get_tokens(SNIPPETS["client-header"]))
    assert tokens["resilience4j"] in Name.Namespace and tokens["retry"] in Name.Class
    tokens = list(RblLexer().get_tokens(SNIPPETS["axis-with-units"]))
    assert (Number, "20") in tokens and (Keyword.Type, "ms") in tokens and (Name.Variable, "initialIntervalMillis") in tokens
    assert any(token in String for token, _ in RblLexer().get_tokens('target = "/x"'))


# -- diagnostics are highlighted on a colour terminal -------------------------------------------------
def test_diagnostics_colour_the_source_lines_only_when_asked():
    result = compile_source("space s {\n  users = 0\n  client tenacity.retry {}\n}\n", "bad.rbl")
    diagnostics: list[Diagnostic] = result.diagnostics
    assert diagnostics
    plain, coloured = render_all(diagnostics), render_all(diagnostics, colour=True)
    assert "\x1b[" not in plain and "\x1b[" in coloured
    assert ANSI.sub("", coloured) == plain


@pytest.mark.parametrize("env, coloured", [({"FORCE_COLOR": "1"}, True), ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
                                           ({}, False)])
def test_rbl_check_colours_only_on_request_or_a_terminal(tmp_path, env, coloured):
    import os
    import sys
    (tmp_path / "bad.rbl").write_text("space s {\n  users = 0\n}\n")
    clean = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    done = subprocess.run([sys.executable, "-m", "rbl", "check", "bad.rbl"], cwd=tmp_path, capture_output=True,
                          text=True, env={**clean, **env, "PYTHONPATH": str(REPO)})
    assert done.returncode == 1
    assert ("\x1b[" in done.stderr) == coloured
