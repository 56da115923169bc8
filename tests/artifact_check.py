"""tools/artifact-check, built on first use and cached by a hash of its sources: Envoy configs
checked against Envoy's API definitions (go-control-plane), compose files loaded by compose-go,
the loader of Docker Compose v2, Istio resources read strictly and validated by Istio's own code."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

TOOL = Path(__file__).resolve().parent.parent / "tools" / "artifact-check"


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rbl"


@lru_cache(maxsize=1)
def binary() -> Path:
    sources = sorted(p for p in TOOL.iterdir() if p.suffix == ".go" or p.name in ("go.mod", "go.sum"))
    digest = hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in sources)).hexdigest()[:16]
    path = _cache_dir() / f"artifact-check-{digest}"
    if not path.exists():
        go = shutil.which("go")
        assert go, "Go is needed to build tools/artifact-check (https://go.dev/doc/install)"
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        subprocess.run([go, "build", "-o", str(partial), "."], cwd=TOOL, check=True)
        partial.rename(path)
    return path


def check_envoy(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary()), "envoy", *map(str, paths)], capture_output=True, text=True)


def check_istio(*paths: Path) -> subprocess.CompletedProcess:
    """Exit 0 when every file's DestinationRules and VirtualServices are valid; each problem on stdout."""
    return subprocess.run([str(binary()), "istio", *map(str, paths)], capture_output=True, text=True)


def load_compose(path: Path) -> tuple[int, dict | None, str]:
    """(exit code, the resolved project, stderr)."""
    done = subprocess.run([str(binary()), "compose", str(path)], capture_output=True, text=True)
    return done.returncode, json.loads(done.stdout) if done.returncode == 0 else None, done.stderr
