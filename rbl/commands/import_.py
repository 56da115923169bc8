"""`rbl import`: a ResilienceBench JSON test space converted into an equivalent rbl spec."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import SpecError
from .import_output import check_import_output, write_import_output
from .spec_input import read_spec, spec_name


def import_(file: Path = typer.Argument(..., help="A ResilienceBench JSON test space, or - for standard input."),
            output: Optional[Path] = typer.Option(None, "-o", "--output", metavar="FILE",
                                                  help="Write the spec here instead of stdout (- for stdout)."),
            force: bool = typer.Option(False, "--force", help="Overwrite an existing output file.")):
    """Convert a ResilienceBench JSON test space into an equivalent rbl spec."""
    from ..lang.render import render_all
    from ..importer import ImportFailed, import_file_bytes

    if output is not None and str(output) == "-":
        output = None
    if output is not None:
        check_import_output(output, force)         # before the JSON is read: nothing is done for nothing
    try:
        imported = import_file_bytes(read_spec(file), spec_name(file))
    except ImportFailed as failure:
        typer.echo(render_all([failure.diagnostic]), err=True)
        raise SpecError("import failed")
    if imported.diagnostics:
        typer.echo(render_all(imported.diagnostics), err=True)
    if output is None:
        typer.echo(imported.text, nl=False)
    else:
        write_import_output(output, imported.text)
        typer.echo(f"wrote {output} ({imported.size} scenario{'s' if imported.size != 1 else ''})", err=True)
