"""Front end: source text -> AST. The hand-written reader (fastparse.py) reads what it can; the
Lark parser (parse, then lower) reads the rest and reports every syntax error."""

from __future__ import annotations

from . import ast
from .diagnostics import Diagnostics
from .fastparse import _add, parse_fast
from .lower import lower
from .parser import parse_tree
from .source import SourceFile


def parse_program(source: SourceFile, diags: Diagnostics) -> ast.Program | None:
    program = parse_fast(source, diags)
    if isinstance(program, ast.Program):
        return program
    if program != source.text:
        # Lark first reads the text with what precedes the reader's stop thinned out: the same
        # syntax error, found in time proportional to what is left (a 10 MB spec with a typo on
        # its last line). The reader stops on a few texts Lark reads (`users in1`): those are
        # read again in full.
        probe = Diagnostics()
        if parse_tree(source, probe, text=program) is None:
            _add(diags, probe)
            return None
    return parse_program_lark(source, diags)


def parse_program_lark(source: SourceFile, diags: Diagnostics) -> ast.Program | None:
    tree = parse_tree(source, diags)
    if tree is None:
        return None
    return lower(tree, source, diags)
