"""Reading a spec (a file or standard input) and compiling it with the command line's overrides."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import SpecError, UsageError


def read_spec(path: Path) -> bytes:
    """A spec's bytes (decoded by the compiler, which locates encoding errors and applies the
    size limit; only as much is read as that limit needs)."""
    from ..lang.reading import read_limited
    if str(path) == "-":
        return read_limited(sys.stdin.buffer)
    try:
        with path.open("rb") as spec:
            return read_limited(spec)
    except FileNotFoundError:
        raise UsageError(f"no such file: {path}", "check the path of the spec")
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory, not a spec file")
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror}")


def spec_name(path: Path) -> str:
    return str(path) if str(path) != "-" else "<stdin>"


def compile_spec(spec: Path, json_output: bool = False, overrides: list | None = None):
    """Compile a spec (with the command line's overrides), print its diagnostics to stderr;
    raise SpecError if it has errors."""
    from ..compiler.pipeline import compile_bytes
    from ..lang.render import render_all
    result = compile_bytes(read_spec(spec), spec_name(spec), overrides or [])
    if result.diagnostics and not json_output:
        from ..highlight import colour_wanted       # pygments only when there is something to show
        colour = colour_wanted()
        typer.echo(render_all(result.diagnostics, colour=colour), err=True, color=colour or None)
    if not result.ok:
        raise SpecError("the spec has errors")
    return result


def spec_overrides(rounds: Optional[int], users: Optional[str], sets: list[str]) -> list:
    """--rounds, --users and --set as the compiler's overrides."""
    from ..compiler.overrides import from_options
    return from_options(rounds, users, sets)
