"""The compose file and the docker build context it references, from a Deployment."""

from __future__ import annotations

import shutil
from importlib.metadata import PackageNotFoundError, requires
from pathlib import Path

from .deployment import ADMIN_PORT, Deployment
from .images import ImageChoice
from .templating import render, template_dir

COMPOSE_FILE = "docker-compose.yaml"
BUILD_CONTEXT = "docker"
_NOT_IN_IMAGES = ("__pycache__", "*.pyc", "templates", "clients")   # rendered or built on the host


def render_compose(header: dict, deployment: Deployment) -> str:
    return render(f"{COMPOSE_FILE}.j2", plan=header, deployment=deployment, admin_port=ADMIN_PORT)


def build_context_files(deployment: Deployment, images: ImageChoice) -> dict[str, str]:
    """Text files of the build context, by path relative to it (the rbl source copy aside)."""
    files = {name: render(f"docker/{name}", with_envoy=images.with_envoy) for name in deployment.dockerfiles}
    if "target.Dockerfile" in deployment.dockerfiles:
        files["target-entrypoint.sh"] = (template_dir() / "docker" / "target-entrypoint.sh").read_text(encoding="utf-8")
    if deployment.needs_rbl_source:
        files["rbl/pyproject.toml"] = render("docker/rbl-pyproject.toml", requirements=runtime_requirements())
    return files


def runtime_requirements() -> list[str]:
    """rbl's own runtime dependencies, as installed (the images install the same ones)."""
    try:
        declared = requires("rbl") or []
    except PackageNotFoundError:    # running from a source tree that was never installed
        declared = []
    return [r for r in declared if "extra ==" not in r]


def copy_client_sources(kind: str, destination: Path) -> list[Path]:
    """A client's source tree (clients/<kind>, without build output) for its image's build."""
    from ..runner.client_builds import client_sources
    with client_sources(kind) as root:
        shutil.copytree(root, destination / kind, ignore=shutil.ignore_patterns("target", "node_modules", ".gitignore"),
                        dirs_exist_ok=True)
    return sorted(p for p in (destination / kind).rglob("*") if p.is_file())


def copy_rbl_package(destination: Path) -> None:
    """The installed rbl package, for the images that run rbl's services."""
    import rbl
    shutil.copytree(Path(rbl.__file__).parent, destination, ignore=shutil.ignore_patterns(*_NOT_IN_IMAGES),
                    dirs_exist_ok=True)
