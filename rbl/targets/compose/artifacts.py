"""Everything `rbl compile -o DIR` writes besides the plan: the compose file, the Envoy config of
the target container, each mesh client's sidecar files, a topology's replica configurations and
sidecar files, and the docker build context the compose file references."""

from __future__ import annotations

from pathlib import Path

from .deployment import (CLIENT_SOURCES, COMPOSE_LAYOUT, SIDECAR_ADMIN_PORT, SIDECAR_DIR_IN_CONTAINER, SIDECAR_PORT,
                         Deployment, Layout, built_image_names, deployment_for)
from ..envoy import EnvoyAddresses, render_envoy_config
from .images import ImageChoice, parse_image_overrides
from ..output_dir import write_file
from ..packaging import copy_client_sources, copy_rbl_package
from .compose import BUILD_CONTEXT, COMPOSE_FILE, build_context_files, render_compose
from .sidecars import sidecar_files
from .target_replicas import PROXY_ROLE, replica_upstreams
from .topology_services import entry_upstreams, topology_files
from ...topology import topology_from_record

ENVOY_FILE = "envoy/envoy.yaml"


def envoy_addresses(layout: Layout, replicas: int = 0) -> EnvoyAddresses:
    """The proxy's Envoy: listen where the layout says, reach httpbin on the target container's
    loopback, or with `replicas` (the target's own containers) each of them in turn."""
    if not replicas:
        return EnvoyAddresses(listen_port=layout.proxy_port, admin_port=layout.admin_port, upstream_host="127.0.0.1",
                              upstream_port=layout.httpbin_port, bind_host=layout.bind_host)
    (host, port), *more = replica_upstreams(layout, replicas)
    return EnvoyAddresses(listen_port=layout.proxy_port, admin_port=layout.admin_port, upstream_host=host,
                          upstream_port=port, bind_host=layout.bind_host, more_upstreams=tuple(more))


def proxy_envoy_addresses(deployment: Deployment, header: dict | None = None) -> EnvoyAddresses:
    if header is not None and header.get("topology"):
        (host, port), *more = entry_upstreams(topology_from_record(header["topology"]))
        layout = deployment.layout
        return EnvoyAddresses(listen_port=layout.proxy_port, admin_port=layout.admin_port, upstream_host=host,
                              upstream_port=port, bind_host=layout.bind_host, more_upstreams=tuple(more))
    split = any(s.role == PROXY_ROLE for s in deployment.services)
    replicas = sum(s.role == "target" for s in deployment.services) if split else 0
    return envoy_addresses(deployment.layout, replicas)


CONTAINER_ENVOY = envoy_addresses(COMPOSE_LAYOUT)


def plan_deployment(header: dict, image_overrides: list[str],
                    layout: Layout = COMPOSE_LAYOUT) -> tuple[Deployment, ImageChoice]:
    """The deployment of a plan; a bad --image raises UsageError before anything is written."""
    images = parse_image_overrides(image_overrides, built_image_names(header))
    return deployment_for(header, images, layout), images


def write_artifacts(header: dict, out_dir: Path, deployment: Deployment, images: ImageChoice) -> list[Path]:
    texts = {COMPOSE_FILE: render_compose(header, deployment),
             ENVOY_FILE: render_envoy_config(proxy_envoy_addresses(deployment, header), node_id=deployment.project,
                                             fault=header["fault"]),
             **sidecar_files(deployment)}
    if header.get("topology"):
        texts.update(topology_files(header, SIDECAR_DIR_IN_CONTAINER, SIDECAR_PORT, SIDECAR_ADMIN_PORT,
                                    deployment.project))
    for name, text in build_context_files(deployment, images).items():
        texts[f"{BUILD_CONTEXT}/{name}"] = text
    written = []
    for name, text in texts.items():
        # replaced, never written through: CompileDirectory.claim checked for links, this closes the gap
        written.append(write_file(out_dir, name, text.encode("utf-8"), executable=name.endswith(".sh")))
    for dockerfile in deployment.dockerfiles:
        if dockerfile in CLIENT_SOURCES:
            written += copy_client_sources(CLIENT_SOURCES[dockerfile], out_dir / BUILD_CONTEXT / "clients")
    if deployment.needs_rbl_source:
        package = out_dir / BUILD_CONTEXT / "rbl" / "rbl"
        copy_rbl_package(package)
        written.extend(p for p in sorted(package.rglob("*")) if p.is_file())
    return written
