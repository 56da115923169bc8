"""Client services that must be built before they run: the Resilience4j client (clients/resilience4j,
Maven). Built on first use with `mvn -q package` and cached by a hash of its sources, so a rebuild
happens only when they change; or taken from a jar the user points to (--client-jar)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from importlib.resources import as_file, files
from pathlib import Path
from typing import Callable

from ..errors import EnvironmentMissing, RblError, UsageError

JAVA_ADVICE = "install a JDK 17+ and Maven (Debian: `apt-get install -y openjdk-17-jdk maven`)"
BUILT_CLIENTS = {"resilience4j": "rbl-client-resilience4j.jar"}    # client kind -> the jar Maven builds


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rbl" / "clients"


def _source_files(root: Path) -> list[Path]:
    found = [root / "pom.xml"] + sorted(p for p in (root / "src").rglob("*") if p.is_file())
    return [p for p in found if p.is_file()]


def sources_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in _source_files(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@contextmanager
def client_sources(kind: str):
    """The client's source tree, from the installed package (rbl.clients) or the checkout."""
    with as_file(files("rbl.clients") / kind) as root:
        if not (root / "pom.xml").is_file():
            raise RblError(f"the sources of the {kind} client are missing from this installation ({root})",
                           hint="reinstall rbl, or pass --client-jar", exit_code=70)
        yield Path(root)


def cached_jar(kind: str) -> Path:
    with client_sources(kind) as root:
        return cache_dir() / f"{kind}-{sources_digest(root)}.jar"


def needs_build(kind: str, explicit: Path | None = None) -> bool:
    return explicit is None and not cached_jar(kind).is_file()


def client_jar(kind: str, explicit: Path | None = None, say: Callable[[str], None] = lambda _: None) -> Path:
    """The jar to run for a client kind: the user's, the cached build, or a fresh build."""
    if explicit is not None:
        if not explicit.is_file():
            raise UsageError(f"--client-jar {kind}={explicit}: no such file")
        return explicit
    jar = cached_jar(kind)
    if jar.is_file():
        return jar
    if shutil.which("mvn") is None:
        raise EnvironmentMissing(f"building the {kind} client needs Maven (mvn)", hint=JAVA_ADVICE)
    jar.parent.mkdir(parents=True, exist_ok=True)
    with open(jar.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # two runs starting at once build it once
        if not jar.is_file():
            say(f"building the {kind} client (first use, or its sources changed): mvn -q package ...")
            _build(kind, jar)
    return jar


def _build(kind: str, jar: Path) -> None:
    log = jar.with_suffix(".build.log")
    with client_sources(kind) as root, tempfile.TemporaryDirectory(dir=jar.parent) as work:
        # build a copy: an installed package may be read-only, and target/ must not land in it
        tree = Path(work) / kind
        shutil.copytree(root, tree, ignore=shutil.ignore_patterns("target"))
        with log.open("w") as out:
            done = subprocess.run(["mvn", "-q", "-B", "package", "-DskipTests"], cwd=tree, stdout=out,
                                  stderr=subprocess.STDOUT)
        built = tree / "target" / BUILT_CLIENTS[kind]
        if done.returncode != 0 or not built.is_file():
            tail = "\n    ".join(log.read_text(errors="replace").splitlines()[-12:])
            raise RblError(f"building the {kind} client failed (mvn exit {done.returncode}); log: {log}\n    {tail}",
                           hint="Maven needs Maven Central (or a mirror in ~/.m2/settings.xml) the first time",
                           exit_code=4)
        partial = jar.with_suffix(".partial")
        shutil.copyfile(built, partial)
        partial.rename(jar)
