"""Writing run files so that a crash or a full disk never leaves a half-written one behind, and
never through a link or into a hard-linked file planted in the run directory."""

from __future__ import annotations

import errno
import os
import stat
from contextlib import contextmanager
from pathlib import Path

from ..errors import StorageError, UsageError

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


def planted(path: Path, why: str) -> UsageError:
    """The error for something planted where rbl writes (a link, a special or hard-linked file)."""
    return UsageError(f"{path} {why}; rbl does not write there",
                      hint="move it away, or replace it with a plain copy (rbl writes only its own files in a "
                           "run directory), then try again")


def new_file(path: Path) -> int:
    """A descriptor of a new, empty file at `path`, opened for writing. What is there already (a
    temporary file a crash left, or something planted) is removed first, never written through."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        raise planted(path, "is a directory") from None
    # O_EXCL: a link planted between the unlink and the open makes the open fail, not follow it
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)


def own_directory(path: Path) -> None:
    """Make the directory `path` if need be (its parent must exist); a link or anything but a real
    directory there is refused, never written through."""
    try:
        os.mkdir(path)
    except FileExistsError:
        pass
    mode = os.lstat(path).st_mode
    if stat.S_ISLNK(mode):
        raise planted(path, "is a symbolic link")
    if not stat.S_ISDIR(mode):
        raise planted(path, "is not a directory")


def remove_own_directory(path: Path) -> None:
    """Remove `path`, a directory of files rbl made (a work directory), and the files in it.
    Nothing is followed: a link at `path` is refused, and a link inside is removed itself, never
    what it points to, so nothing outside the directory is ever deleted."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise planted(path, "is a symbolic link" if os.path.islink(path) else "is not a directory") from None
        raise
    try:
        for name in os.listdir(descriptor):
            try:
                os.unlink(name, dir_fd=descriptor)
            except IsADirectoryError:
                raise planted(path / name, "is a directory, which rbl never makes there") from None
            except FileNotFoundError:
                pass
    finally:
        os.close(descriptor)
    os.rmdir(path)          # a link swapped in meanwhile fails here (ENOTDIR), it is not followed


def fresh_directory(path: Path) -> None:
    """An empty directory at `path` that rbl made now: a leftover of an earlier attempt is removed
    first (remove_own_directory), and a link planted meanwhile makes the mkdir fail."""
    remove_own_directory(path)
    try:
        os.mkdir(path)
    except FileExistsError:
        raise planted(path, "appeared while rbl was making it") from None


def open_own(path: Path, flags: int) -> int:
    """os.open for writing a file rbl keeps (results.jsonl, run.lock): refused when it is a link,
    not a regular file, or has another hard link (whose file would change too)."""
    try:
        descriptor = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise planted(path, "is a symbolic link") from None
        if error.errno in (errno.EISDIR, errno.ENXIO):
            raise planted(path, "is not a regular file") from None
        raise
    status = os.fstat(descriptor)
    why = ("is not a regular file" if not stat.S_ISREG(status.st_mode) else
           f"has {status.st_nlink - 1} other hard link(s)" if status.st_nlink > 1 else None)
    if why:
        os.close(descriptor)
        raise planted(path, why)
    os.set_blocking(descriptor, True)
    return descriptor


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text` whole: readers see the old content or the new, never a part."""
    temporary = path.with_name(path.name + ".tmp")
    try:
        with os.fdopen(new_file(temporary), "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)       # a link at `path` is replaced, not followed
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def append_whole(path: Path, data: str) -> None:
    """Append lines and fsync them; on failure cut the file back, so no torn line is left.

    Unbuffered on purpose: a buffered file would retry its buffer (and fail again) before it
    could be cut back."""
    encoded = data.encode("utf-8")
    descriptor = open_own(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
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
    with os.fdopen(new_file(directory / BALLAST), "wb") as out:
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
