"""Pass 1: a spec holds exactly one `space` block."""

from __future__ import annotations

from ...lang.source import Span
from .context import CheckContext


def check_structure(ctx: CheckContext) -> None:
    spaces = ctx.program.spaces
    if not spaces:
        line, col = ctx.source.end
        ctx.diags.error("E0310", "the spec has no `space` block", Span.point(ctx.source, 1, 1),
                        "expected `space { ... }`",
                        help="a spec describes one test space: `space name { users in [10] ... }`")
        return
    ctx.space = spaces[0]
    for extra in spaces[1:]:
        ctx.diags.error("E0311", "a spec holds one `space` block", extra.span, "second space",
                        secondary=((spaces[0].span, "the first one"),),
                        help="put each test space in its own file")
