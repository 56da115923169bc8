"""The malformed-spec corpus: each file's rendered diagnostics, exit code 1, no traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ERRORS = Path(__file__).parent / "errors"
CASES = sorted(p.name for p in ERRORS.glob("*.rbl"))
# Lark's internal names, which must never reach a user.
LARK_NAMES = re.compile(r"__ANON|\b(LSQB|RSQB|LBRACE|RBRACE|LPAR|RPAR|_NL|COMMA|EQUAL|DOT|QUANTITY|PERCENT|DECIMAL)\b|\$END")


def test_corpus_is_large_enough():
    assert len(CASES) >= 30


@pytest.mark.parametrize("name", CASES)
def test_malformed_spec(name, cli, monkeypatch, text_snapshot):
    monkeypatch.chdir(ERRORS)
    code, out, err = cli("check", name)
    assert code == 1
    assert out == ""
    assert "Traceback" not in err
    assert not LARK_NAMES.search(err), err
    assert re.search(rf"--> {re.escape(name)}:\d+:\d+", err), "diagnostics are located"
    assert "error[E" in err
    assert err == text_snapshot


@pytest.mark.parametrize("name", CASES)
def test_every_code_has_an_explanation(name, cli, monkeypatch):
    monkeypatch.chdir(ERRORS)
    _, _, err = cli("check", name)
    for code in set(re.findall(r"(?:error|warning)\[(\w+)\]", err)):
        status, out, _ = cli("explain", code)
        assert status == 0 and out.startswith(code)
