"""The options every spec-reading command shares: the spec argument and the overrides."""

from __future__ import annotations

import typer

SpecArg = typer.Argument(..., help="The spec file (.rbl), or - for standard input.", show_default=False)
# Overrides, for a quick run of a big spec (rbl/compiler/overrides.py); the same on every command.
RoundsOpt = typer.Option(None, "--rounds", min=1, metavar="N", help="Override the spec's `rounds`.")
UsersOpt = typer.Option(None, "--users", metavar="N,M,...",
                        help="Override the spec's `users` axis, e.g. --users 1,5 or --users 5..50 step 5.")
SetOpt = typer.Option([], "--set", metavar="SETTING",
                      help="Override one setting, written as in a spec: --set successes=5, "
                           "--set 'fault.rate in [0%, 50%]', or a client parameter as LABEL.param "
                           "(--set 'resilience4j.retry.maxAttempts = 3'). Repeatable. A size "
                           "assertion that no longer holds is then a warning.")


def choices(*values: str):
    """Shell completion of an option's value among fixed choices (typer's `autocompletion`)."""
    def complete(incomplete: str) -> list[str]:
        return [value for value in values if value.startswith(incomplete)]
    return complete


def complete_code(incomplete: str) -> list[str]:
    """Shell completion of `rbl explain`'s argument: the diagnostic codes (E0203, W0501, ...)."""
    from ..lang.codes import CODES
    return sorted(code for code in CODES if code.startswith(incomplete.upper()))
