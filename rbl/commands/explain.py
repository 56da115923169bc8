"""`rbl explain`: the long explanation of a diagnostic code."""

from __future__ import annotations

import typer

from ..errors import UsageError
from .options import complete_code


def explain(code: str = typer.Argument(..., help="A diagnostic code, e.g. E0203.", autocompletion=complete_code)):
    """Print the long explanation of a diagnostic code."""
    from ..lang.codes import CODES, explain as explain_code
    text = explain_code(code)
    if text is None:
        raise UsageError(f"unknown code `{code}`", f"codes are {', '.join(sorted(CODES))}")
    typer.echo(text)
