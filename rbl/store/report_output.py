"""The directory `rbl report` and `rbl diff` write their files into, by default inside a run
directory that may hold anything: files are made in a fresh staging directory and moved in at the
end, and a link planted where the directory or a file goes is refused, never written through (as
`rbl compile -o` refuses one)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import weakref
from pathlib import Path

from ..errors import UsageError
from .run_reader import shown

STAGING = ".rbl-staging-"


class OutputDirectory:
    """Claimed when made: `path` is created if absent, and refused if it is a link rbl chose (the
    default inside a run directory; one the user named with -o may be a link) or not a directory.
    Writers write into .staging; commit() moves what they wrote into `path`."""

    def __init__(self, path: Path, named_by_user: bool):
        self.path = path
        try:
            status = os.lstat(path)
        except FileNotFoundError:
            path.mkdir(parents=True, exist_ok=True)
            status = os.lstat(path)
        if stat.S_ISLNK(status.st_mode) and not named_by_user:
            raise _refused(path, "is a symbolic link (rbl would write through it)", named_by_user)
        if not path.is_dir():
            raise _refused(path, "exists and is not a directory", named_by_user)
        self.staging = Path(tempfile.mkdtemp(dir=path, prefix=STAGING))    # new and private: nothing planted
        # removed however the command ends: on success by commit(), else when this object goes
        self._remove_staging = weakref.finalize(self, shutil.rmtree, str(self.staging), ignore_errors=True)

    def commit(self, files: list[Path]) -> list[Path]:
        """Move every staged file into the directory, and return where `files` (staged paths) now
        are. Checked first, all of them: nothing is moved if any would replace a link, a directory
        or a special file."""
        staged = sorted(entry.name for entry in os.scandir(self.staging))
        for name in staged:
            target = self.path / name
            try:
                status = os.lstat(target)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(status.st_mode):
                why = ("is a symbolic link (rbl would write through it)" if stat.S_ISLNK(status.st_mode)
                       else "is a directory" if stat.S_ISDIR(status.st_mode) else "is not a regular file")
                self._remove_staging()
                raise _refused(target, why, named_by_user=True)
        for name in staged:
            os.replace(self.staging / name, self.path / name)     # a regular file there is replaced whole
        self._remove_staging()
        return [self.path / Path(f).relative_to(self.staging) for f in files]


def _refused(path: Path, why: str, named_by_user: bool) -> UsageError:
    return UsageError(f"{shown(path)} {why}; rbl writes its own files there",
                      hint="move it away, or choose another directory with -o" if named_by_user
                      else "remove the link, or choose another directory with -o")
