"""The directory `rbl compile -o DIR` writes, and what it may overwrite.

rbl records what it wrote, with content hashes, in DIR/.rbl-compiled.json. A later compile into
the same directory may replace those files, unless the user has edited one since; a non-empty
directory without that record was not made by rbl and is left alone. `--force` overrides both.
Files rbl wrote last time and does not write this time are removed (they would be stale).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .. import __version__
from ..errors import UsageError

RECORD = ".rbl-compiled.json"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class CompileDirectory:
    def __init__(self, root: Path, force: bool = False):
        self.root = root
        self.force = force
        self.previous: dict[str, str] = {}
        self.previous_spec: str | None = None

    def claim(self) -> None:
        """Check that rbl may write here; raises UsageError before anything is touched."""
        if self.root.exists() and not self.root.is_dir():
            raise UsageError(f"{self.root} exists and is not a directory")
        if not self.root.exists() or not any(self.root.iterdir()):
            return
        record = self.root / RECORD
        if not record.is_file():
            if self.force:
                return
            raise UsageError(f"{self.root} is not empty and was not written by `rbl compile`",
                             "choose another -o, empty the directory, or pass --force to write into it anyway")
        try:
            recorded = json.loads(record.read_text(encoding="utf-8"))
            self.previous, self.previous_spec = dict(recorded["files"]), recorded.get("spec")
        except (ValueError, KeyError, TypeError):
            if not self.force:
                raise UsageError(f"{record} is damaged", "pass --force to write over the directory") from None
            return
        edited = [name for name, digest in self.previous.items()
                  if (self.root / name).is_file() and _sha256(self.root / name) != digest]
        if edited and not self.force:
            raise UsageError(f"{self.root / edited[0]} was changed since rbl wrote it"
                             + (f" (and {len(edited) - 1} more)" if len(edited) > 1 else ""),
                             "pass --force to overwrite your changes, or choose another -o")

    def finish(self, written: list[Path], spec: str) -> None:
        """Record what this compile wrote; remove what the previous one wrote and this one did not."""
        names = {p.relative_to(self.root).as_posix(): _sha256(p) for p in written if p.is_file()}
        for stale in set(self.previous) - set(names):
            path = self.root / stale
            if path.is_file():
                path.unlink()
        (self.root / RECORD).write_text(json.dumps({"rbl_version": __version__, "spec": spec, "files": names}, indent=2,
                                                   sort_keys=True) + "\n", encoding="utf-8")
