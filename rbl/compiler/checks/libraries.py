"""Pass 2: the catalogue, the prelude's libraries plus those the spec declares."""

from __future__ import annotations

from ...libraries.catalogue import build_libraries, builtin_libraries
from .context import CheckContext


def check_libraries(ctx: CheckContext) -> None:
    builtin = builtin_libraries()
    declared = build_libraries(ctx.program.libraries, ctx.diags, builtin=False, known=builtin)
    ctx.libraries = {**builtin, **declared}
