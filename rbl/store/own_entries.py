"""Before `rbl run --resume` writes into a run directory: every place it writes must hold rbl's own
files, so a link, a FIFO or a hard-linked file planted there is refused before anything is written."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .durable import planted

TREE_ENTRIES_LIMIT = 100_000      # entries looked at under one tree; a run's logs hold a few dozen
TREE_DEPTH_LIMIT = 16


def check_own_entries(run_dir: Path, files: tuple[str, ...], trees: tuple[str, ...]) -> None:
    """Raise UsageError when run_dir/FILE (for each of `files`) is anything but absent or a regular
    file of one link, or a tree (e.g. logs/, where services append) is not a real directory of such
    files. The run directory itself may be a link: the user named it."""
    for name in files:
        _check(run_dir / name, directory=False)
    for name in trees:
        root = run_dir / name
        if _check(root, directory=True):
            _check_tree(root)


def _check(path: Path, directory: bool) -> bool:
    """Whether path exists (and is what it should be); raises when it is something else."""
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return False
    why = _why(status, directory)
    if why:
        raise planted(path, why)
    return True


def _why(status: os.stat_result, directory: bool) -> str | None:
    mode = status.st_mode
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    if directory:
        return None if stat.S_ISDIR(mode) else "is not a directory"
    if not stat.S_ISREG(mode):
        return "is a directory" if stat.S_ISDIR(mode) else "is not a regular file"
    if status.st_nlink > 1:
        return f"has {status.st_nlink - 1} other hard link(s)"
    return None


def _check_tree(root: Path) -> None:
    pending, seen = [(root, 0)], 0
    while pending:
        directory, depth = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                seen += 1
                if seen > TREE_ENTRIES_LIMIT or depth >= TREE_DEPTH_LIMIT:
                    raise planted(root, f"holds more than {TREE_ENTRIES_LIMIT} entries or {TREE_DEPTH_LIMIT} "
                                        "levels, which rbl never writes")
                status = entry.stat(follow_symlinks=False)
                is_directory = stat.S_ISDIR(status.st_mode)
                why = _why(status, is_directory)
                if why:
                    raise planted(Path(entry.path), why)
                if is_directory:
                    pending.append((Path(entry.path), depth + 1))
