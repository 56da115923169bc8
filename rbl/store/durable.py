"""Writing run files so that a crash or a full disk never leaves a half-written one behind."""

from __future__ import annotations

import errno
import os
from contextlib import contextmanager
from pathlib import Path

from ..errors import StorageError

# errors of the storage itself, as opposed to a bug or a missing permission: the run stops,
# says so and stays resumable
STORAGE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EFBIG}

# Space set aside when a run starts and given back when the disk fills up, so the runner can
# still record that it stopped (the manifest) instead of leaving it "running".
BALLAST = ".rbl-ballast"
BALLAST_BYTES = 64 * 1024


def is_storage_error(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in STORAGE_ERRNOS


def storage_error(error: OSError, run_dir: Path, resumable: bool = True) -> StorageError:
    where = f" ({error.filename})" if error.filename else ""
    then = (f"what was written is kept, and `rbl run --resume {run_dir}` continues the run" if resumable
            else "nothing was started")
    return StorageError(f"cannot write the run directory {run_dir}{where}: {os.strerror(error.errno)}",
                        hint=f"free some space (or fix the device); {then}")


def fsync_directory(path: Path) -> None:
    """Make a rename or a new file in `path` survive a power loss."""
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text` whole: readers see the old content or the new, never a part."""
    temporary = path.with_name(path.name + ".tmp")
    try:
        with temporary.open("w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def append_whole(path: Path, data: str) -> None:
    """Append lines and fsync them; on failure cut the file back, so no torn line is left.

    Unbuffered on purpose: a buffered file would retry its buffer (and fail again) before it
    could be cut back."""
    encoded = data.encode("utf-8")
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        start = os.lseek(descriptor, 0, os.SEEK_END)
        try:
            written = 0
            while written < len(encoded):
                written += os.write(descriptor, encoded[written:])
            os.fsync(descriptor)
        except BaseException:
            try:
                os.ftruncate(descriptor, start)     # shrinking needs no space: works on a full disk
            except OSError:
                pass
            raise
    finally:
        os.close(descriptor)


def reserve_ballast(directory: Path) -> None:
    """Set aside BALLAST_BYTES in `directory` (real blocks, not a sparse file)."""
    with (directory / BALLAST).open("wb") as out:
        out.write(b"\0" * BALLAST_BYTES)
        out.flush()
        os.fsync(out.fileno())


def release_ballast(directory: Path) -> None:
    (directory / BALLAST).unlink(missing_ok=True)


@contextmanager
def storage_errors(run_dir: Path, resumable: bool = True):
    """Turn the disk's refusals (ENOSPC, EIO, ...) into a StorageError that names the run directory."""
    try:
        yield
    except OSError as error:
        if is_storage_error(error):
            raise storage_error(error, run_dir, resumable) from error
        raise
