"""The hand-written reader (rbl/lang/fastparse.py) against the Lark parser it stands in for:
on every text it reads, the same AST with the same spans and the same diagnostics; on every text
it does not read, Lark's syntax error, found the same from the thinned-out text it hands over
(fastparse's reduced_text) as from the whole. Texts: the examples, the error corpus, the library
prelude, and specs generated (and then broken) from a fixed seed."""

from __future__ import annotations

import dataclasses
import hashlib
import random
from pathlib import Path

import pytest

import rbl
from rbl.lang import ast
from rbl.lang.diagnostics import Diagnostics
from rbl.lang.fastparse import GRAMMAR_SHA256, LAZY_FROM, LazyNodes, parse_fast
from rbl.lang.frontend import parse_program, parse_program_lark
from rbl.compiler.overrides import from_options
from rbl.compiler.pipeline import compile_bytes, compile_source
from rbl.lang.reading import strip_bom
from rbl.lang.source import SourceFile, Span

from .conftest import EXAMPLES, REPO

def _utf8(path: Path) -> bool:
    try:
        path.read_text(encoding="utf-8")
        return True
    except UnicodeDecodeError:
        return False


ALL_FILES = sorted([*EXAMPLES.glob("*.rbl"), *(REPO / "tests" / "errors").glob("*.rbl"),
                    REPO / "rbl" / "libraries" / "prelude.rbl"])
CORPUS = [path for path in ALL_FILES if _utf8(path)]
NOT_UTF8 = [path for path in ALL_FILES if not _utf8(path)]


def _tree(node):
    """The AST as plain values, spans included (the AST's own == leaves them out)."""
    if isinstance(node, Span):
        return ("span", node.line, node.col, node.end_line, node.end_col)
    if isinstance(node, (tuple, list, LazyNodes)):
        return tuple(_tree(item) for item in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return (type(node).__name__, *((f.name, _tree(getattr(node, f.name))) for f in dataclasses.fields(node)))
    return node


def _said(diagnostics: Diagnostics):
    return [(d.code, d.message, d.help, d.notes,
             [(label.span.line, label.span.col, label.span.end_line, label.span.end_col, label.message)
              for label in d.labels]) for d in diagnostics.sorted()], diagnostics.counts


def check_agrees(text: str) -> str:
    """'read' or 'handed over', after checking that both readers say the same."""
    source = SourceFile("spec.rbl", text)
    fast_said, lark_said = Diagnostics(), Diagnostics()
    fast = parse_fast(source, fast_said)
    lark = parse_program_lark(source, lark_said)
    if isinstance(fast, ast.Program):
        assert lark is not None, "the reader took a text the grammar refuses"
        assert _tree(fast) == _tree(lark)
        assert _said(fast_said) == _said(lark_said)
        return "read"
    assert not fast_said.items
    via_said = Diagnostics()
    via = parse_program(source, via_said)               # Lark on the reduced text, then on the whole
    assert (via is None) == (lark is None)
    assert _said(via_said) == _said(lark_said)
    return "handed over"


def test_the_fast_reader_was_brought_along_with_the_grammar():
    """The hand-written reader pins the grammar it implements: a grammar change fails here until
    fastparse.py reads the new language too (then update GRAMMAR_SHA256)."""
    grammar = (Path(rbl.__file__).parent / "grammar.lark").read_bytes()
    assert hashlib.sha256(grammar).hexdigest() == GRAMMAR_SHA256, (
        "rbl/grammar.lark changed: bring rbl/lang/fastparse.py along (the equivalence tests below hold "
        "the two readers alike), then set its GRAMMAR_SHA256 to the grammar's new hash")


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_the_corpus_reads_alike(path):
    text = strip_bom(path.read_text(encoding="utf-8"))
    outcome = check_agrees(text)
    assert outcome == ("handed over" if path.name.startswith("syntax-") else "read")


@pytest.mark.parametrize("path", NOT_UTF8, ids=lambda p: p.name)
def test_a_file_that_is_not_utf8_is_refused_before_either_reader(path):
    assert [d.code for d in compile_bytes(path.read_bytes(), path.name).diagnostics] == ["E0110"]


def test_the_corpus_holds_a_file_that_is_not_utf8():
    assert NOT_UTF8, "the error corpus lost its encoding case"


# ---- generated specs --------------------------------------------------------------------------

WORDS = ["users", "rounds", "fault", "rate", "in", "true", "false", "step", "client", "space", "let", "use",
         "assert", "size", "noise", "as", "alias", "enum", "pattern", "library", "x", "_y1", "retry"]
SCALARS = ["0", "10", "1_000", "2.5", "20ms", "1.5s", "40%", "3us", "2xyz", "1" * 70, "99999999999999999999",
           '"/bytes/10"', '"a\\"b"', '"t\\tz"', '"\\u0000"', '"a\x01b"', "true", "x", "-5", "- 2ms"]


def _gap(rng, inside: bool) -> str:
    return rng.choice(["", " ", "\t", " \f"] + (["\n", "\n  ", " // c\n ", "\r\n ", "\n\r "] if inside else []))


def _list(rng) -> str:
    count = rng.choice([0, 1, 3, LAZY_FROM - 1, LAZY_FROM, 2 * LAZY_FROM])
    items = [rng.choice(SCALARS) for _ in range(count)]
    body = "".join(_gap(rng, True) + item + _gap(rng, True) + "," for item in items)
    return "[" + (body if rng.random() < 0.3 else body[:-1]) + "]"


def _value(rng) -> str:
    roll = rng.random()
    if roll < 0.4:
        return _list(rng)
    if roll < 0.55:
        step = f" step {rng.choice(SCALARS)}" if rng.random() < .5 else ""
        return f"{rng.choice(SCALARS)}..{rng.choice(SCALARS)}{step}"
    return rng.choice(SCALARS)


def _expr(rng, depth: int = 0) -> str:
    roll = rng.random()
    if roll < 0.15:
        terms = rng.choice([3, LAZY_FROM + 6])
        return f" {rng.choice('+*')} ".join(rng.choice(["1", "2", "1_0"]) for _ in range(terms))
    if roll < 0.35 and depth < 3:
        return f"({_gap(rng, True)}{_expr(rng, depth + 1)}{_gap(rng, True)})"
    if roll < 0.6 and depth < 3:
        return f" {rng.choice('+*')} ".join(_expr(rng, depth + 1) for _ in range(rng.choice([2, 5])))
    return rng.choice(["1", "90", "5%", "2_0", "1.5", "3ms"])


def _call(rng, depth: int = 0) -> str:
    args = []
    for _ in range(rng.choice([0, 1, 2, 5])):
        roll = rng.random()
        inner = _call(rng, depth + 1) if depth < 2 and rng.random() < 0.3 else _value(rng)
        args.append(f"{rng.choice(WORDS)}: {inner}" if roll < 0.4 else
                    f"{rng.choice(WORDS)} in {_value(rng)}" if roll < 0.6 else inner)
    return f"{rng.choice(WORDS)}({', '.join(args)})"


def _statement(rng, where: str) -> str:
    roll = rng.random()
    if where == "space" and roll < 0.15:
        body = "\n".join("    " + _statement(rng, "client") for _ in range(rng.choice([0, 1, 5])))
        label = f" as {rng.choice(WORDS)}" if rng.random() < .3 else ""
        head = f"client {rng.choice(WORDS)}.{rng.choice(WORDS)}{label}"
        return f"{head} {{\n{body}\n  }}" if body else head + " {}"
    if where == "space" and roll < 0.25:
        return f"assert {rng.choice(WORDS)} {rng.choice(['==', '<=', '>=', '<', '>', '!='])} {_expr(rng)}"
    if where == "space" and roll < 0.32:
        return f"let {rng.choice(WORDS)} = {_call(rng)}"
    if where == "client" and roll < 0.15:
        return "use " + (_call(rng) if rng.random() < 0.5 else rng.choice(WORDS))
    key = ".".join(rng.choice(WORDS) for _ in range(rng.choice([1, 2, 3])))
    return f"{key} {rng.choice(['=', 'in'])} {_value(rng)}"


def _library(rng) -> str:
    params = []
    for _ in range(rng.choice([0, 1, 3])):
        kind = rng.choice(["int", "duration", "enum(A, B)", "enum(A, B,)"])
        if rng.random() < 0.4:
            kind += f" & {rng.choice(['>=', '<'])} {rng.choice(SCALARS)}"
        param = f"{rng.choice(WORDS)}{'?' if rng.random() < .2 else ''}: {kind}"
        param += f" = {rng.choice(SCALARS)}" if rng.random() < 0.4 else ""
        param += f" as {rng.choice(WORDS)}" if rng.random() < 0.3 else ""
        param += f" alias {rng.choice(WORDS)}" if rng.random() < 0.2 else ""
        params.append(param)
    body = "\n".join("    " + p for p in params)
    return f'library {rng.choice(WORDS)} {{\n  platform = "python"\n  pattern {rng.choice(WORDS)} {{\n{body}\n  }}\n}}'


def generated_spec(rng) -> str:
    body = "\n".join("  " + _statement(rng, "space") for _ in range(rng.choice([0, 1, 3, 7])))
    name = rng.choice(WORDS) + " " if rng.random() < .7 else ""
    text = (_library(rng) + "\n" if rng.random() < 0.2 else "") + \
        f"space {name}{{\n{body}\n}}" + rng.choice(["", "\n", "\n// end"])
    return text.replace("\n", "\r\n") if rng.random() < 0.1 else text


def broken(rng, text: str) -> str:
    """One edit, most often in the last third (where long repetitions are still open)."""
    at = rng.randrange(len(text) * 2 // 3, len(text) + 1) if rng.random() < 0.6 else rng.randrange(len(text) + 1)
    roll = rng.random()
    if roll < 0.3:
        return text[:at] + text[at + 1:]
    if roll < 0.8:
        inserted = rng.choice(list("[](){}=.,:-+*?&\"\\\n /%@") + ["..", " in ", "step", "x y", "\r"])
        return text[:at] + inserted + text[at:]
    other = rng.randrange(len(text) + 1)
    return text[:at] + text[min(at, other):max(at, other)] + text[at:]


@pytest.mark.parametrize("seed", range(8))
def test_generated_specs_read_alike(seed):
    rng = random.Random(seed)
    outcomes = []
    for _ in range(40):
        text = generated_spec(rng)
        outcomes.append(check_agrees(text))
        outcomes += [check_agrees(broken(rng, text)) for _ in range(2)]
    assert "read" in outcomes and "handed over" in outcomes      # both paths were taken


@pytest.mark.parametrize("where", ["statements", "list", "sum", "call"])
def test_a_late_syntax_error_is_found_from_the_reduced_text(where):
    """Long repetitions before the error are thinned out for Lark, and its message stays the same."""
    head = "space s {\n  users in [1]\n"
    texts = {
        "statements": head + "  bogus = 1\n" * 200 + "  oops = = 1\n}\n",
        "list": head + "  users in [" + "- 1, " * 200 + "x y]\n}\n",
        "sum": head + "  assert size == " + " + ".join(["(1)"] * 200) + " 1\n}\n",
        "call": head + "  let r = retry(" + "attempts: 3, " * 200 + "= 5)\n}\n",
    }
    text = texts[where]
    reduced = parse_fast(SourceFile("spec.rbl", text), Diagnostics())
    assert isinstance(reduced, str) and len(reduced) == len(text)
    assert reduced.count("\n") == text.count("\n") and len(reduced.split()) < len(text.split()) // 10
    assert check_agrees(text) == "handed over"


def test_texts_the_grammar_splits_by_context_are_handed_to_lark():
    """Lark's contextual lexer reads `users in1..5` as `users in 1..5` (no name may follow a key):
    the reader does not, and hands such texts over rather than reading them otherwise."""
    text = "space s {\n  users in1..5\n  client tenacity.retry {}\n}\n"
    assert isinstance(parse_fast(SourceFile("spec.rbl", text), Diagnostics()), str)
    assert check_agrees(text) == "handed over"
    result = compile_source(text)
    assert result.ok and len(result.space.users) == 5


# ---- long lists and sums are views of the text -------------------------------------------------

def test_a_long_list_is_kept_as_a_view_of_its_text():
    values = ", ".join(["10", "20", '"x"', "-5", "- 7", "abc", "true"] * 2000)
    text = f"space s {{\n  target in [{values}]\n}}\n"
    program = parse_fast(SourceFile("spec.rbl", text), Diagnostics())
    items = program.spaces[0].body[0].value.items
    assert isinstance(items, LazyNodes) and len(items) == 14_000
    lark = parse_program_lark(SourceFile("spec.rbl", text), Diagnostics())
    assert items == lark.spaces[0].body[0].value.items              # equal to the tuple Lark's makes
    assert [n.text for n in list(items)[3:5]] == ["-5", "-7"]


def test_a_long_list_of_equal_values_checks_each_once_and_warns_boundedly():
    result = compile_source("space s {\n  users in [" + ", ".join(["10"] * 100_000) + "]\n"
                            "  client tenacity.retry {}\n}\n", "spec.rbl")
    assert result.ok and len(result.space.users) == 100_000
    warnings = [d for d in result.diagnostics if d.code == "W0302"]
    assert len(warnings) == 50 and warnings[0].location == "spec.rbl:2:17"
    assert "99949 more W0302" in warnings[-1].notes[-1]


def test_an_override_of_a_long_list_is_located_in_its_option():
    values = ",".join(["1"] * 100 + ["0"])
    result = compile_source("space s {\n  users in [1]\n  client tenacity.retry {}\n}\n", "spec.rbl",
                            from_options(users=values))
    errors = [d for d in result.diagnostics if d.severity == "error"]
    assert [d.code for d in errors] == ["E0203"] and errors[0].location == f"--users:1:{11 + 3 * 100}"


def test_lowering_errors_inside_a_long_list_are_reported_once_each():
    text = "space s {\n  users in [" + ", ".join(["1", "99999999999999999999", '"\\q"'] * 40) + "]\n}\n"
    said = Diagnostics()
    assert isinstance(parse_fast(SourceFile("spec.rbl", text), said), ast.Program)
    assert said.counts == {"E0223": 40, "E0225": 40}
    assert check_agrees(text) == "read"


def test_capped_diagnostics_keep_the_same_first_ones():
    """More than MAX_PER_CODE of one code, some before a long list and some in it: the same
    first ones are shown, and all counted, as when Lark's lowering reports them."""
    before = "\n".join(f"  rounds{i} = {'9' * 70}" for i in range(30))
    values = ", ".join(["99999999999999999999ms"] * 80)
    text = f"space s {{\n{before}\n  users in [{values}]\n  successes = {'9' * 70}\n}}\n"
    assert check_agrees(text) == "read"
    said = Diagnostics()
    parse_fast(SourceFile("spec.rbl", text), said)
    assert said.counts == {"E0223": 111} and len(said.items) == 50


TOPOLOGY = """space s {{
  users = 1
  topology {{
{body}
  }}
  client istio.retry {{}}
}}
"""


@pytest.mark.parametrize("body, outcome", [
    ("    entry = a\n    service a {\n      work = factorial(300)\n      cpus = 0.5\n      calls b * 4 parallel\n    }\n"
     "    service b {\n      work = sleep(2ms)\n      replicas = 3\n    }", "read"),
    ("    service a {\n      calls b\n      calls c * 1_0\n      calls d sequential\n      work = none()\n    }", "read"),
    ("    service a {\n      work = fast\n      x = 1..3\n      y = true\n    }", "read"),
    ("    service a { work = factorial(n: 3, m in [1, 2]) }", "read"),
    ("    service a {\n      calls b * 4.5\n    }", "handed over"),          # `* times` is an INT
    ("    service a {\n      calls = 3\n    }", "handed over"),             # `calls` is a keyword there
    ("    service a {\n      cpus in [1, 2]\n    }", "handed over"),        # no axis in a service
    ("    entry in [a, b]\n    service a {}", "handed over"),                 # nor in a topology
    ("    service = 2", "handed over"),
    ("    service a {\n      calls b c d\n    }", "handed over"),
    ("    service a {\n      work = f(\n    }", "handed over"),
])
def test_both_readers_read_a_topology_alike(body, outcome):
    assert check_agrees(TOPOLOGY.format(body=body)) == outcome
