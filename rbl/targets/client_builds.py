"""Client services that must be built before they run: the Resilience4j client (clients/resilience4j,
Maven), the Node.js client (clients/node, npm) and the Go client (clients/go); and the Go tools built
the same way: rbl-load (clients/loadgen) and rbl-chain (services/chain, every tier of a topology). Each
is built on first use and cached by a hash of its sources, so a rebuild happens only when they change;
or taken from what the user points to (--client-jar / --client-dir / --client-bin LIBRARY=PATH).

What a build produces and how it runs, per kind:
  resilience4j  mvn -q package          ~/.cache/rbl/clients/resilience4j-HASH.jar   java -jar JAR
  node          npm ci (the lockfile)   ~/.cache/rbl/clients/node-HASH/              node DIR/src/main.js
  go            go build                ~/.cache/rbl/clients/go-HASH                 BIN
  loadgen       go build                ~/.cache/rbl/clients/loadgen-HASH            BIN (rbl-load)
  chain         go build                ~/.cache/rbl/clients/chain-HASH              BIN (rbl-chain)
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.resources import as_file, files
from pathlib import Path
from typing import Callable

from ..errors import EnvironmentMissing, RblError, UsageError

JAVA_ADVICE = "install a JDK 17+ and Maven (Debian: `apt-get install -y openjdk-17-jdk maven`)"
NODE_ADVICE = "install Node.js 20+ and npm (Debian: `apt-get install -y nodejs npm`; or https://nodejs.org)"
GO_ADVICE = "install Go 1.22+ (Debian: `apt-get install -y golang-go`; or https://go.dev/doc/install)"


@dataclass(frozen=True)
class Recipe:
    marker: str                    # the file that says the sources are there
    sources: tuple[str, ...]       # files and directories (recursively) the hash covers
    build_tool: str                # the command a build needs
    advice: str
    runtime: str                   # the command the built client runs on
    artifact_is_dir: bool = False
    what: str = "jar"              # how the override option calls it
    command: str = ""              # Go: the main package's name under cmd/ (and the binary's)
    package: str = "rbl.clients"   # the package whose directory KIND holds the sources


RECIPES = {
    "resilience4j": Recipe("pom.xml", ("pom.xml", "src"), "mvn", JAVA_ADVICE, "java"),
    "node": Recipe("package.json", ("package.json", "package-lock.json", "src"), "npm", NODE_ADVICE, "node",
                   artifact_is_dir=True, what="directory"),
    "go": Recipe("go.mod", ("go.mod", "go.sum", "cmd", "internal"), "go", GO_ADVICE, "", what="binary",
                 command="rbl-client-go"),
    # rbl-load, the open-loop load generator (vegeta): not a client service, built like the Go client
    "loadgen": Recipe("go.mod", ("go.mod", "go.sum", "cmd"), "go", GO_ADVICE, "", what="binary", command="rbl-load"),
    # rbl-chain, the synthetic service of every tier of a topology (standard library only)
    "chain": Recipe("go.mod", ("go.mod", "cmd", "internal"), "go", GO_ADVICE, "", what="binary", command="rbl-chain",
                    package="rbl.services"),
}
TOOLS = ("loadgen", "chain")          # built like the clients, but no client service
BUILT_CLIENTS = tuple(kind for kind in RECIPES if kind not in TOOLS)   # client kinds rbl builds (the catalogue's `client`)


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rbl" / "clients"


def _source_files(root: Path, recipe: Recipe) -> list[Path]:
    found: list[Path] = []
    for name in recipe.sources:
        path = root / name
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.is_file() and "node_modules" not in p.parts)
    return found


def sources_digest(root: Path, kind: str = "resilience4j") -> str:
    digest = hashlib.sha256()
    for path in _source_files(root, RECIPES[kind]):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@contextmanager
def client_sources(kind: str):
    """The client's source tree, from the installed package (rbl.clients, rbl.services) or the checkout."""
    recipe = RECIPES[kind]
    with as_file(files(recipe.package) / kind) as root:
        if not (root / recipe.marker).is_file():
            raise RblError(f"the sources of the {kind} client are missing from this installation ({root})",
                           hint="reinstall rbl" if kind in TOOLS else
                           f"reinstall rbl, or pass --client-{recipe.what.replace('directory', 'dir')}",
                           exit_code=70)
        yield Path(root)


def cached_artifact(kind: str) -> Path:
    with client_sources(kind) as root:
        name = f"{kind}-{sources_digest(root, kind)}"
    return cache_dir() / (name + ".jar" if kind == "resilience4j" else name)


cached_jar = cached_artifact          # the Resilience4j client's name for it


def needs_build(kind: str, explicit: Path | None = None) -> bool:
    return explicit is None and not cached_artifact(kind).exists()


def client_command(kind: str, artifact: Path) -> list[str]:
    """How a built (or user-given) client of this kind starts; the runner adds --listen and --target."""
    if kind == "resilience4j":
        return ["java", "-jar", str(artifact)]
    if kind == "node":
        return ["node", str(artifact / "src" / "main.js")]
    return [str(artifact)]                # go, or a client of another kind the user gave


def check_explicit(kind: str, library: str, explicit: Path) -> Path:
    """A client the user points to: it must be what this kind runs."""
    if kind == "node":
        if not (explicit / "src" / "main.js").is_file():
            raise UsageError(f"--client-dir {library}={explicit}: not a built Node.js client (no src/main.js)",
                             hint="give a copy of clients/node after `npm ci` in it")
    elif not explicit.is_file():
        raise UsageError(f"--client-{'jar' if kind == 'resilience4j' else 'bin'} {library}={explicit}: no such file")
    elif kind != "resilience4j" and not os.access(explicit, os.X_OK):
        raise UsageError(f"--client-bin {library}={explicit}: not executable", hint=f"chmod +x {explicit}")
    return explicit


def client_artifact(kind: str, explicit: Path | None = None, say: Callable[[str], None] = lambda _: None,
                    library: str | None = None) -> Path:
    """What to run for a client kind: the user's, the cached build, or a fresh build."""
    if explicit is not None:
        return check_explicit(kind, library or kind, explicit)
    recipe = RECIPES[kind]
    artifact = cached_artifact(kind)
    if artifact.exists():
        return artifact
    if shutil.which(recipe.build_tool) is None:
        raise EnvironmentMissing(f"building the {kind} client needs {recipe.build_tool}", hint=recipe.advice)
    artifact.parent.mkdir(parents=True, exist_ok=True)
    with open(artifact.with_name(artifact.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # two runs starting at once build it once
        if not artifact.exists():
            say(f"building the {kind} client (first use, or its sources changed) ...")
            _build(kind, artifact)
    return artifact


def chain_binary(say: Callable[[str], None] = lambda _: None) -> Path:
    """rbl-chain, the service every tier of a topology runs: the cached build, or a fresh one."""
    return client_artifact("chain", say=say)


def client_jar(kind: str, explicit: Path | None = None, say: Callable[[str], None] = lambda _: None) -> Path:
    return client_artifact(kind, explicit, say)


def _run(argv: list[str], cwd: Path, log: Path, env: dict | None = None) -> int:
    with log.open("a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        return subprocess.run(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env).returncode


def _build(kind: str, artifact: Path) -> None:
    log = artifact.with_name(artifact.name + ".build.log")
    log.write_text("")
    with client_sources(kind) as root, tempfile.TemporaryDirectory(dir=artifact.parent) as work:
        # build a copy: an installed package may be read-only, and build output must not land in it
        tree = Path(work) / kind
        shutil.copytree(root, tree, ignore=shutil.ignore_patterns("target", "node_modules"))
        if kind == "resilience4j":
            code = _run(["mvn", "-q", "-B", "package", "-DskipTests"], tree, log)
            built, hint = tree / "target" / "rbl-client-resilience4j.jar", \
                "Maven needs Maven Central (or a mirror in ~/.m2/settings.xml) the first time"
        elif kind == "node":
            # the lockfile's exact versions; no dev tools, no scripts of dependencies
            code = _run(["npm", "ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund"], tree, log)
            built, hint = tree, "npm needs the npm registry (or a mirror in ~/.npmrc) the first time"
        else:
            command = RECIPES[kind].command
            code = _run(["go", "build", "-trimpath", "-mod=readonly", "-o", str(tree / command), f"./cmd/{command}"],
                        tree, log, env={**os.environ, "CGO_ENABLED": "0"})
            built, hint = tree / command, "go needs the module proxy (or GOPROXY/GOFLAGS=-mod=vendor) the first time"
        if code != 0 or not built.exists():
            tail = "\n    ".join(log.read_text(errors="replace").splitlines()[-12:])
            raise RblError(f"building the {kind} client failed ({RECIPES[kind].build_tool} exit {code}); log: {log}\n    {tail}",
                           hint=hint, exit_code=4)
        partial = artifact.with_name(artifact.name + ".partial")
        if partial.is_dir():
            shutil.rmtree(partial)
        if RECIPES[kind].artifact_is_dir:
            built.rename(partial)
        else:
            shutil.copyfile(built, partial)
            partial.chmod(0o755)
        partial.rename(artifact)
