"""The directory `rbl compile -o DIR` writes, and what it may overwrite or remove.

rbl records what it wrote, with content hashes, in DIR/.rbl-compiled.json. A later compile into
the same directory may replace those files, unless the user has edited one since; a non-empty
directory without that record was not made by rbl and is left alone. `--force` overrides both.
Files rbl wrote last time and does not write this time are removed (they would be stale).

Nothing rbl writes or removes may resolve outside DIR (DIR itself may be a symbolic link: the
user named it). The record is untrusted input: an entry that is not a plain relative path beneath
DIR makes the whole record damaged, and a damaged record never removes anything. A symbolic
link, a hard-linked file or a special file where rbl writes counts as a change by the user
(refused without --force); with --force the link itself is removed, never what it points to.
rbl's own files are written to a temporary file beside the target and moved into place.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import tempfile
from pathlib import Path

from .. import __version__
from ..errors import UsageError

RECORD = ".rbl-compiled.json"
# Every top-level name `rbl compile` writes (plan.py and artifacts.py): the only places checked
# for links before writing. tests/test_compile_dir_safety.py fails when a compile writes elsewhere.
OWN_FILES = ("plan.json", "scenarios.jsonl", "scenarios.csv", "docker-compose.yaml", RECORD)
OWN_DIRECTORIES = ("envoy", "docker", "kubernetes", "istio")
RECORD_LIMIT = 16 << 20          # bytes; a real record lists a few hundred files (~40 KB)
ENTRY_LIMIT = 100_000
NAME_LIMIT = 1024
_DIGEST = re.compile(r"[0-9a-f]{64}")
_UMASK = os.umask(0o022)
os.umask(_UMASK)


class DamagedRecord(ValueError):
    pass


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def safe_name(name: object) -> bool:
    """A record entry rbl may act on: a plain relative POSIX path with no `.`/`..` parts."""
    if not isinstance(name, str) or not 0 < len(name) <= NAME_LIMIT or name == RECORD:
        return False
    if "\\" in name or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name):
        return False
    try:
        name.encode("utf-8")          # a lone surrogate from JSON cannot name a file
    except UnicodeEncodeError:
        return False
    return all(part not in ("", ".", "..") for part in name.split("/"))


def regular_file_inside(root: Path, name: str) -> Path | None:
    """root/name if it is a regular file reached through real directories only, else None."""
    path = root
    parts = name.split("/")
    for part in parts[:-1]:
        path = path / part
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):     # lstat: a link to a directory is no directory
                return None
        except OSError:
            return None
    path = path / parts[-1]
    try:
        return path if stat.S_ISREG(os.lstat(path).st_mode) else None
    except OSError:
        return None


def _directory_inside(root: Path, relative: str) -> Path:
    """Create root/relative as real directories; a link or file on the way is refused."""
    root.mkdir(parents=True, exist_ok=True)    # e.g. a docker run's deployment/ (the user named -o)
    path = root
    for part in filter(None, relative.split("/")):
        path = path / part
        try:
            os.mkdir(path)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                raise UsageError(f"{path} is not a directory (a file or a link)",
                                 "move it away; rbl writes only real files beneath -o") from None
    return path


def write_file(root: Path, name: str, data: bytes, executable: bool = False) -> Path:
    """Write root/name as a new file: a temporary file beside it, then os.replace. A link or a
    hard-linked file already there is replaced, never written through."""
    folder, _, base = name.rpartition("/")
    parent = _directory_inside(root, folder)
    descriptor, temporary = tempfile.mkstemp(dir=parent, prefix=".rbl-")
    try:
        with os.fdopen(descriptor, "wb") as out:
            out.write(data)
        os.chmod(temporary, 0o755 if executable else 0o666 & ~_UMASK)
        os.replace(temporary, parent / base)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
    return parent / base


def _unexpected(path: Path, st: os.stat_result, want_directory: bool) -> str | None:
    """Why rbl must not write at path (an existing entry), or None."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link (rbl would write through it)"
    if want_directory:
        return None if stat.S_ISDIR(st.st_mode) else "is not a directory"
    if not stat.S_ISREG(st.st_mode):
        return "is a directory" if stat.S_ISDIR(st.st_mode) else "is not a regular file"
    if st.st_nlink > 1:
        return f"has {st.st_nlink - 1} other hard link(s)"
    return None


def read_record(path: Path) -> dict:
    """The record's content, checked; raises DamagedRecord with the reason."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise DamagedRecord("it is not a regular file")
    if st.st_size > RECORD_LIMIT:
        raise DamagedRecord(f"it is larger than {RECORD_LIMIT >> 20} MB")
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(descriptor, "rb") as source:
        data = source.read(RECORD_LIMIT + 1)
    try:
        recorded = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        raise DamagedRecord("it is not JSON") from None
    files = recorded.get("files") if isinstance(recorded, dict) else None
    if not isinstance(files, dict) or len(files) > ENTRY_LIMIT:
        raise DamagedRecord("it has no list of files")
    spec = recorded.get("spec")
    if spec is not None and not isinstance(spec, str):
        raise DamagedRecord("its spec is not a string")
    for name, digest in files.items():
        if not safe_name(name):
            raise DamagedRecord(f"the entry {json.dumps(name)[:80]} is not a path inside the directory")
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            raise DamagedRecord(f"the entry {json.dumps(name)[:80]} has no SHA-256 digest")
    return {"files": files, "spec": spec}


class CompileDirectory:
    def __init__(self, root: Path, force: bool = False):
        self.root = root
        self.force = force
        self.previous: dict[str, str] = {}
        self.previous_spec: str | None = None

    def claim(self) -> None:
        """Check that rbl may write here; raises UsageError before anything is touched (with
        --force, links where rbl writes are removed first, so that no write goes through them)."""
        if self.root.is_symlink() and not self.root.exists():
            raise UsageError(f"{self.root} is a symbolic link to nothing", "remove it or choose another -o")
        if self.root.exists() and not self.root.is_dir():
            raise UsageError(f"{self.root} exists and is not a directory")
        if not self.root.exists() or not any(self.root.iterdir()):
            return
        record = self.root / RECORD
        if not os.path.lexists(record):
            if not self.force:
                raise UsageError(f"{self.root} is not empty and was not written by `rbl compile`",
                                 "choose another -o, empty the directory, or pass --force to write into it anyway")
        else:
            try:
                recorded = read_record(record)
                self.previous, self.previous_spec = dict(recorded["files"]), recorded["spec"]
            except (DamagedRecord, OSError) as error:
                if not self.force:
                    raise UsageError(f"{record} is damaged: {error}",
                                     "pass --force to write over the directory (rbl then removes none of the "
                                     "files the record lists)") from None
        problems = self._links_where_rbl_writes()
        edited = [f"{path} was changed since rbl wrote it" for name, digest in self.previous.items()
                  if (path := regular_file_inside(self.root, name)) and _sha256(path) != digest]
        changes = [f"{path} {why}" for path, why, _ in problems] + edited
        if changes and not self.force:
            raise UsageError(changes[0] + (f" (and {len(changes) - 1} more)" if len(changes) > 1 else ""),
                             "pass --force to overwrite your changes (a link is removed, not followed), "
                             "or choose another -o")
        for path, why, removable in problems:
            if not removable:
                raise UsageError(f"{path} {why}; rbl writes its own files there", "move it away or choose another -o")
            os.unlink(path)

    def _links_where_rbl_writes(self) -> list[tuple[Path, str, bool]]:
        """(path, why, removable) for every entry rbl would write through or cannot replace."""
        found = []

        def check(path: Path, want_directory: bool) -> None:
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                return
            why = _unexpected(path, st, want_directory)
            if why:
                # a link, a special file or a hard link is only a directory entry: unlinking it
                # removes nothing it points to; a real directory or file in the wrong place is data
                found.append((path, why, not stat.S_ISDIR(st.st_mode) and (stat.S_ISLNK(st.st_mode)
                                                                            or not want_directory)))
            elif want_directory:
                for entry in os.scandir(path):
                    check(Path(entry.path), entry.is_dir(follow_symlinks=False))

        for name in OWN_FILES:
            check(self.root / name, False)
        for name in OWN_DIRECTORIES:
            check(self.root / name, True)
        return found

    def finish(self, written: list[Path], spec: str) -> None:
        """Record what this compile wrote; remove what the previous one wrote and this one did not."""
        names = {}
        for path in written:
            name = path.relative_to(self.root).as_posix()
            if regular_file_inside(self.root, name):
                names[name] = _sha256(path)
        for stale in set(self.previous) - set(names):
            path = regular_file_inside(self.root, stale) if safe_name(stale) else None
            if path is not None:
                path.unlink()
        record = {"rbl_version": __version__, "spec": spec, "files": names}
        write_file(self.root, RECORD, (json.dumps(record, indent=2, sort_keys=True) + "\n").encode("utf-8"))
