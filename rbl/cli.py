"""The `rbl` command line: check, plan, compile, run, calibrate, report, diff, merge, explain,
import.

This module is the typer wiring only: the app, the error handling every command shares and the
registration of the commands, each of which lives in a module of its own in rbl/commands/.
Data goes to stdout, diagnostics and progress to stderr. Domain errors (RblError) become exit
codes in one place, RblGroup.invoke; see rbl/errors.py for the codes. Each command imports what
it needs when it runs, so `rbl --help` and shell completion stay fast (bench/cli_startup.py).
"""

from __future__ import annotations

import os
import re
import sys
import traceback

import typer

from . import __version__
from .commands import calibrate, check, compile as compile_, diff, explain, import_, merge, plan, report, run
from .errors import EXIT_INTERNAL, EXIT_STORAGE, RblError, SpecError


def _framework_exceptions() -> tuple[type, ...]:
    """Exceptions the CLI framework uses for control flow (exit, usage errors): never caught here.
    Found through typer's public classes, since typer may vendor its own click."""
    classes = {typer.Exit, typer.Abort}
    classes.update(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    return tuple(classes)


_FRAMEWORK_EXCEPTIONS = _framework_exceptions()


def _skip_coercing_absent_flags() -> None:
    """typer (0.2x) builds a pydantic validator to coerce every parsed value, even the None of a
    flag that was not given (--help, --install-completion): importing pydantic for that costs
    `rbl run --help` and shell completion a few hundred ms. An absent flag needs no coercion.
    Applied only where typer has the method this relies on; otherwise typer's own path runs."""
    parameter = getattr(getattr(typer, "core", None), "_TyperParameter", None)
    original = getattr(parameter, "process_value", None)
    if original is None:
        return

    def process_value(self, ctx, value):
        descriptor = getattr(self, "type_descriptor", None)
        if value is None and getattr(descriptor, "annotation", None) is bool and not self.required:
            return self.callback(ctx, self, value) if self.callback is not None else value
        return original(self, ctx, value)

    parameter.process_value = process_value


_skip_coercing_absent_flags()


class RblGroup(typer.core.TyperGroup):
    """Turns domain errors into messages and exit codes, once, for every command."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except _FRAMEWORK_EXCEPTIONS:
            raise
        except RblError as error:
            if not isinstance(error, SpecError):
                typer.echo(f"error: {error.message}", err=True)
                if error.hint:
                    typer.echo(f"  = help: {error.hint}", err=True)
            ctx.exit(error.exit_code)
        except KeyboardInterrupt as interrupt:
            if not getattr(interrupt, "reported", False):     # `rbl run` already said what was kept
                typer.echo("interrupted", err=True)
            ctx.exit(130)
        except BrokenPipeError:
            # the reader went away (`rbl compile -o - | head`): stop quietly, as Unix tools do
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(141)
        except OSError as error:
            from .store.durable import is_storage_error
            if not is_storage_error(error):
                _internal_error(ctx)
            # the disk refused a write (compiling, or writing stdout to a file): not a bug
            where = f" {error.filename}" if error.filename else ""
            typer.echo(f"error: cannot write{where}: {os.strerror(error.errno)}", err=True)
            typer.echo("  = help: free some space (or fix the device) and run the command again; "
                       "a partly written -o directory then needs --force", err=True)
            ctx.exit(EXIT_STORAGE)
        except Exception:
            _internal_error(ctx)


    def get_command(self, ctx, name):
        """The command, its values named in help as SPEC, RUN_DIR, WORKERS (not <path>, <int range>)."""
        command = super().get_command(ctx, name)
        for param in getattr(command, "params", ()):
            if param.metavar is None and not getattr(param, "is_flag", False):
                param.metavar = param.name.upper() + ("..." if getattr(param, "multiple", False) else "")
        return command

    def format_commands(self, ctx, formatter) -> None:
        """Each command with its first sentence, wrapped (click cut them at one line, with `...`)."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                text = " ".join((command.short_help or command.help or "").split())
                rows.append((name, re.split(r"(?<!e\.g)(?<!i\.e)\. ", text)[0].rstrip(".")))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _internal_error(ctx) -> None:
    """A bug in rbl: say so plainly, keep the traceback for the report."""
    typer.echo("internal error: rbl failed unexpectedly; please report this with the "
               "traceback below", err=True)
    typer.echo(traceback.format_exc(), err=True)
    ctx.exit(EXIT_INTERNAL)


app = typer.Typer(
    cls=RblGroup,
    add_completion=True,                  # --install-completion / --show-completion (bash, zsh, fish, ...)
    rich_markup_mode=None,                # plain help: `[default: ...]` and `--flag` print as written
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="rbl: controlled, repeatable benchmarks of resiliency patterns (Retry, Circuit Breaker) "
         "across resilience libraries. Write a test space in spec.rbl, then check, plan, compile.",
)


def _version(value: bool):
    if value:
        typer.echo(f"rbl {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")):
    pass


# The commands, in the order `rbl --help` lists them.
app.command("check")(check.check)
app.command("plan")(plan.plan)
app.command("compile")(compile_.compile_)
app.command("run")(run.run)
app.command("calibrate")(calibrate.calibrate)
app.command("report")(report.report)
app.command("diff")(diff.diff)
app.command("merge")(merge.merge)
app.command("explain")(explain.explain)
app.command("import")(import_.import_)


def main() -> None:
    for name in ("COLUMNS", "LINES"):
        value = os.environ.get(name)
        if value is not None and not (value.isascii() and value.isdigit()):
            del os.environ[name]        # rich int()s what str.isdigit() takes, "²" included, and would crash
    app(prog_name="rbl")        # also under `python -m rbl`: help and completion scripts name `rbl`
