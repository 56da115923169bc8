"""`rbl merge`: the shards of one plan joined into one run directory."""

from __future__ import annotations

from pathlib import Path

import typer


def merge(dirs: list[Path] = typer.Argument(..., metavar="DIR...", help="The shards' run directories (`rbl run --shard I/N -o DIR`)."),
          output: Path = typer.Option(..., "-o", "--output", help="The merged run directory to create."),
          allow_gaps: bool = typer.Option(False, "--allow-gaps", help="Write what there is even when rounds are "
                                          "missing (the exit code is still 3).")):
    """Join the shards of one plan into one run directory (results.jsonl, CSV, manifest with every
    shard's host and timing) that `rbl report` reads. Exit 3, listing them, when rounds are missing
    or in two shards."""
    from ..store.merge import describe, merge as merge_shards
    result = merge_shards(dirs, output, allow_gaps, say=lambda text: typer.echo(text, err=True))
    code = result.code
    if result.out is not None:
        typer.echo(describe(result), err=True)
        from ..report.noise_assert import check_noise_assertion
        code = check_noise_assertion(result.out, code, lambda text: typer.echo(text, err=True))
        typer.echo(f"next: `rbl report {result.out}`", err=True)
    raise typer.Exit(code)
