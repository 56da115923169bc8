"""Front end: source text -> AST (parse, then lower)."""

from __future__ import annotations

from . import ast
from .diagnostics import Diagnostics
from .lower import lower
from .parser import parse_tree
from .source import SourceFile


def parse_program(source: SourceFile, diags: Diagnostics) -> ast.Program | None:
    tree = parse_tree(source, diags)
    if tree is None:
        return None
    return lower(tree, source, diags)
