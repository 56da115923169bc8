"""`rbl import -o FILE`: whether FILE may be written, and writing it so a failure leaves it as it was."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import UsageError


def check_import_output(output: Path, force: bool) -> None:
    """`rbl import -o FILE`: a file that may be written, or a usage error saying why not."""
    if output.is_dir():                          # also through a link: --force never replaces a directory
        raise UsageError(f"{output} is a directory", "give the file to write, e.g. -o DIR/spec.rbl")
    if os.path.lexists(output) and not force:    # lexists: a dangling link is something the user has
        raise UsageError(f"{output} already exists", "pass --force to overwrite it")
    parent = output.parent
    if not parent.is_dir():
        raise UsageError(f"cannot write {output}: there is no directory {parent}", "create it first, or give "
                         "another -o")


def write_import_output(output: Path, text: str) -> None:
    """Write the spec into place in one step: a temporary file beside it, renamed over it, so a
    failed write (disk full) leaves an existing FILE as it was. A link named by -o is replaced,
    never what it points to; a device or pipe (-o /dev/stdout) is written into."""
    import stat
    import tempfile

    from ..errors import StorageError
    from ..store.durable import is_storage_error
    try:
        try:
            existing = os.stat(output)
        except FileNotFoundError:
            existing = None
        if existing is not None and not stat.S_ISREG(existing.st_mode):
            with output.open("w", encoding="utf-8") as special:
                special.write(text)
            return
        if existing is not None:
            mode = stat.S_IMODE(existing.st_mode)
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        descriptor, temporary = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.", suffix=".tmp")
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as out:
                out.write(text)
            os.chmod(temporary, mode)
            os.replace(temporary, output)
        except BaseException:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise
    except OSError as error:
        reason = os.strerror(error.errno) if error.errno else str(error)
        if is_storage_error(error):
            raise StorageError(f"cannot write {output}: {reason}", hint="free some space (or fix the device) and "
                               "import again; an existing file was left as it was")
        raise UsageError(f"cannot write {output}: {reason}", "check the permissions of the file and its directory")
