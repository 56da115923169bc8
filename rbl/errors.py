"""Domain errors, turned into exit codes once at the CLI boundary (rbl/cli.py)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_SPEC = 1
EXIT_USAGE = 2
EXIT_RUN_FAILED = 3
EXIT_ENVIRONMENT = 4      # something the run needs is missing, or went away during the run
EXIT_STORAGE = 5          # a file could not be written (disk full, I/O error); the run stays resumable
EXIT_INTERNAL = 70


class RblError(Exception):
    """An error the user can act on: message, exit code, optional hint."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, hint: str | None = None, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(RblError):
    exit_code = EXIT_USAGE


class SpecError(RblError):
    """The spec has errors; the diagnostics have already been printed."""

    exit_code = EXIT_SPEC


class EnvironmentMissing(RblError):
    exit_code = EXIT_ENVIRONMENT


class StorageError(RblError):
    """The disk refused a write (ENOSPC, EIO, ...): nothing is wrong with the plan or rbl."""

    exit_code = EXIT_STORAGE
