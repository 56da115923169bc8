"""`rbl check`: type-check a spec, its diagnostics located (or as JSON)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .options import RoundsOpt, SetOpt, SpecArg, UsersOpt
from .spec_input import compile_spec, read_spec, spec_name, spec_overrides


def check(spec: Path = SpecArg,
          json_output: bool = typer.Option(False, "--json", help="Print diagnostics as JSON on stdout."),
          rounds: Optional[int] = RoundsOpt, users: Optional[str] = UsersOpt, sets: list[str] = SetOpt):
    """Type-check a spec: exit 0 when it is valid, 1 with located diagnostics when not."""
    overrides = spec_overrides(rounds, users, sets)
    if json_output:
        from ..compiler.pipeline import compile_bytes
        result = compile_bytes(read_spec(spec), spec_name(spec), overrides)
        typer.echo(json.dumps({"ok": result.ok, "diagnostics": diagnostics_json(result),
                               "size": result.space.size if result.ok else None}, indent=2))
        if not result.ok:
            raise typer.Exit(1)
        return
    from ..report.labels import plural
    space = compile_spec(spec, overrides=overrides).space
    typer.echo(f"ok: {space.name}: {plural(space.size, 'scenario')} x {plural(space.rounds, 'round')} = "
               f"{plural(space.runs, 'run')}")         # the verdict on stdout; diagnostics on stderr


def diagnostics_json(result) -> list[dict]:
    out = []
    for d in result.diagnostics:
        p = d.primary
        out.append({"code": d.code, "severity": d.severity, "message": d.message,
                    "file": p.span.file.name if p else None, "line": p.span.line if p else None,
                    "column": p.span.col if p else None, "help": d.help, "notes": list(d.notes)})
    return out
