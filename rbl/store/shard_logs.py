"""A shard's service logs copied into a merged run directory (logs/shard-I-of-N/): real files and
directories only, within bounds, so that a link in a shard cannot pull in what it points at."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .run_reader import shown

LOG_BYTES_LIMIT = 1 << 30         # per shard; a shard's logs are a few MB
LOG_ENTRIES_LIMIT = 10_000        # files and directories per shard
DEPTH_LIMIT = 16
SHOWN = 5                         # entries named in the warning about what was not copied


def copy_logs(run_dir: Path, target: Path, say) -> None:
    """Copy run_dir/logs to target (which must not exist); say what was left out, and why."""
    source = run_dir / "logs"
    try:
        status = os.lstat(source)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(status.st_mode):
        say(f"warning: {shown(source)} {_what(status.st_mode)}; not copied")
        return
    copy = _Copy(say)
    copy.tree(source, target, 0)
    copy.report(source)


class _Copy:
    def __init__(self, say):
        self.say = say
        self.bytes_left = LOG_BYTES_LIMIT
        self.entries = 0
        self.left_out: list[str] = []

    def tree(self, source: Path, target: Path, depth: int) -> None:
        os.mkdir(target)
        try:
            with os.scandir(source) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as error:
            self.left_out.append(f"{source}: {error.strerror or error}")
            return
        for entry in entries:
            path, into = Path(entry.path), target / entry.name
            self.entries += 1
            if self.entries > LOG_ENTRIES_LIMIT:
                self.left_out.append(f"{path}: more than {LOG_ENTRIES_LIMIT} entries")
                continue
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode) and depth < DEPTH_LIMIT:
                self.tree(path, into, depth + 1)
            elif stat.S_ISREG(mode):
                self.file(path, into)
            else:
                self.left_out.append(f"{path}: {_what(mode) if not stat.S_ISDIR(mode) else 'nested too deeply'}")

    def file(self, source: Path, target: Path) -> None:
        try:
            descriptor = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as error:
            self.left_out.append(f"{source}: {error.strerror or error}")
            return
        with os.fdopen(descriptor, "rb") as reading:
            status = os.fstat(descriptor)
            if not stat.S_ISREG(status.st_mode):        # swapped since it was listed
                self.left_out.append(f"{source}: {_what(status.st_mode)}")
                return
            if status.st_size > self.bytes_left:
                self.left_out.append(f"{source}: beyond the {LOG_BYTES_LIMIT >> 20} MB copied per shard")
                return
            os.set_blocking(descriptor, True)
            left = status.st_size                      # no further: a log may still be growing
            self.bytes_left -= left
            out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
            with os.fdopen(out, "wb") as writing:
                while left > 0 and (block := reading.read(min(left, 1 << 20))):
                    writing.write(block)
                    left -= len(block)

    def report(self, source: Path) -> None:
        if not self.left_out:
            return
        listed = "; ".join(self.left_out[:SHOWN]) + (f"; and {len(self.left_out) - SHOWN} more"
                                                     if len(self.left_out) > SHOWN else "")
        self.say(f"warning: {len(self.left_out)} entr{'y' if len(self.left_out) == 1 else 'ies'} of "
                 f"{shown(source)} not copied (only real files and directories are): {shown(listed)}")


def _what(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    if stat.S_ISFIFO(mode):
        return "is a FIFO"
    if stat.S_ISSOCK(mode):
        return "is a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device"
    return "is not a directory"
