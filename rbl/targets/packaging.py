"""What the images of the compose and Kubernetes targets get of rbl itself: its Python package
(with the Python client service and the client protocol), its runtime requirements, and the
sources of the client services built in other languages."""

from __future__ import annotations

import shutil
from importlib.metadata import PackageNotFoundError, requires
from importlib.resources import as_file, files
from pathlib import Path

from .client_builds import client_sources

# rbl.templates and rbl.clients are copied apart below, because an editable install keeps them
# outside the package directory; of the clients only the Python parts (the others are built on the
# host). The templates go in whole: a pod's `rbl run` renders its Envoy config from them.
_NOT_IN_IMAGES = ("__pycache__", "*.pyc", "templates", "clients")
# the Python parts of rbl.clients: the protocol every client speaks and the Python client service
_PYTHON_CLIENT_PARTS = ("__init__.py", "protocol.py", "python")


def runtime_requirements() -> list[str]:
    """rbl's own runtime dependencies, as installed (the images install the same ones)."""
    try:
        declared = requires("rbl") or []
    except PackageNotFoundError:    # running from a source tree that was never installed
        declared = []
    return [r for r in declared if "extra ==" not in r]


def copy_client_sources(kind: str, destination: Path) -> list[Path]:
    """A client's source tree (clients/<kind>, without build output) for its image's build."""
    with client_sources(kind) as root:
        shutil.copytree(root, destination / kind, ignore=shutil.ignore_patterns("target", "node_modules", ".gitignore"),
                        dirs_exist_ok=True)
    return sorted(p for p in (destination / kind).rglob("*") if p.is_file())


def copy_rbl_package(destination: Path) -> None:
    """The installed rbl package, for the images that run rbl's services."""
    import rbl
    ignore = shutil.ignore_patterns(*_NOT_IN_IMAGES)
    shutil.copytree(Path(rbl.__file__).parent, destination, ignore=ignore, dirs_exist_ok=True)
    with as_file(files("rbl.templates")) as templates:
        shutil.copytree(templates, destination / "templates", ignore=ignore, dirs_exist_ok=True)
    with as_file(files("rbl.clients")) as clients:
        for part in _PYTHON_CLIENT_PARTS:
            source, target = clients / part, destination / "clients" / part
            if source.is_dir():
                shutil.copytree(source, target, ignore=ignore, dirs_exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
