"""The containers a plan needs, as data: one model that the compose template renders and the
docker backend runs, so the two cannot describe different services.

The layout follows the seed paper's run-time architecture (section 4.1): one target container
holding the fault proxy and httpbin together (so the proxy's filtering does not lower the
target's share of the machine, and the proxy stays invisible to the clients), one container per
client library the plan uses, and the runner on the host talking to published loopback ports.
A mesh client (istio) is a plain client container in the network namespace of a sidecar Envoy
container, as a mesh injects its proxy into a pod (sidecar_service). A plan that sets the
target's resources (target.cpus, target.replicas) gets one container per replica under its CPU
limit and the proxy in a container of its own (target_replicas.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from ...compiler.plan import axis_largest
from ...clients.protocol import max_jobs_arguments
from ...dataplane.target_settings import target_environment
from ...plan_records import MESH_SERVICE, OPEN_LOOP_CONNECTIONS, is_open_loop
from .target_replicas import PROXY_ROLE, PROXY_SERVICE, has_resources, split_target
from .topology_services import CHAIN_DOCKERFILE, CHAIN_IMAGE, SERVICE_SIDECAR_ROLE, topology_deployment
from .images import ImageChoice

PROXY_PORT = 9211       # the fault proxy's data port (the paper's `server:9211`)
ADMIN_PORT = 9901       # the proxy's admin API (rbl/dataplane/fault_proxy.py)
HTTPBIN_PORT = 8000     # httpbin, reachable only from inside the target container
CLIENT_PORT = 8080      # every client service, inside its own container
FIRST_CLIENT_HOST_PORT = 18081
TARGET_SERVICE = "target"
ENVOY_CONFIG_IN_CONTAINER = "/etc/rbl/envoy.yaml"
# A mesh client's sidecar, on Istio's own ports: the outbound listener (15001) and the proxy's admin
# API (15000), which the runner reaches on a published loopback port to switch configurations and
# read counters. Its xDS files live in a directory bind-mounted from the host, so the runner's
# rename of a file there is what the sidecar's file watch sees.
SIDECAR_PORT = 15001
SIDECAR_ADMIN_PORT = 15000
FIRST_SIDECAR_ADMIN_HOST_PORT = 15000
FIRST_SIDECAR_LISTEN_HOST_PORT = 15100   # where open-loop load from the host enters a sidecar
SIDECAR_DIR_IN_CONTAINER = "/etc/rbl/sidecar"
MESH_KIND = MESH_SERVICE


@dataclass(frozen=True)
class ClientRecipe:
    """How rbl builds and starts the client service of one kind (the library's `client`)."""
    image: str                   # built image name, e.g. client-python
    dockerfile: str | None       # template under templates/docker/, None: rbl ships no such client
    base_args: tuple[str, ...]   # the base images the Dockerfile takes as build args
    command: tuple[str, ...]     # arguments after the image's entrypoint; {library}, {listen}, {target}
    healthcheck: tuple[str, ...]


PYTHON_HEALTHCHECK = ("CMD", "python", "-c",
                      "import urllib.request as u; u.urlopen('http://127.0.0.1:{port}/health', timeout=2)")

CLIENT_RECIPES = {
    "python": ClientRecipe("client-python", "client-python.Dockerfile", ("python",),
                           ("--library", "{library}", "--listen", "{listen}", "--target", "{target}"),
                           PYTHON_HEALTHCHECK),
    "resilience4j": ClientRecipe("client-resilience4j", "client-resilience4j.Dockerfile", ("maven", "java"),
                                 ("--library", "{library}", "--listen", "{listen}", "--target", "{target}"),
                                 ("CMD", "java", "-cp", "/opt/rbl/client.jar", "dev.rbl.client.HealthCheck",
                                  "http://127.0.0.1:{port}/health")),
    "node": ClientRecipe("client-node", "client-node.Dockerfile", ("node",),
                         ("--library", "{library}", "--listen", "{listen}", "--target", "{target}"),
                         ("CMD", "node", "-e", "require('http').get('http://127.0.0.1:{port}/health', r => "
                          "process.exit(r.statusCode === 200 ? 0 : 1)).on('error', () => process.exit(1))")),
    "go": ClientRecipe("client-go", "client-go.Dockerfile", ("golang", "debian"),
                       ("--library", "{library}", "--listen", "{listen}", "--target", "{target}"),
                       ("CMD", "/opt/rbl/rbl-client-go", "--health", "http://127.0.0.1:{port}/health")),
    # rbl's Python client as the mesh client (no policy of its own), its --target the sidecar; the
    # image also holds the sidecar's Envoy, which the sidecar container runs (sidecar_service)
    MESH_KIND: ClientRecipe("client-mesh", "client-mesh.Dockerfile", ("python",),
                            ("--library", "{library}", "--version", "{version}", "--listen", "{listen}",
                             "--target", "{target}"),
                            PYTHON_HEALTHCHECK),
}
# client kinds whose sources the build context carries (clients/<kind>, shipped as rbl.clients)
CLIENT_SOURCES = {"client-resilience4j.Dockerfile": "resilience4j", "client-node.Dockerfile": "node",
                  "client-go.Dockerfile": "go", CHAIN_DOCKERFILE: "chain"}


@dataclass(frozen=True)
class Layout:
    """Where the services listen. The compose file's (`published`): every container binds 0.0.0.0
    on the fixed ports inside its own network namespace, and the host sees them on published
    loopback ports. With host networking (`host`): no namespaces, so every service binds
    127.0.0.1 on its own free port and nothing is published."""
    network: str = "bridge"                 # bridge | host
    bind_host: str = "0.0.0.0"
    proxy_port: int = PROXY_PORT
    admin_port: int = ADMIN_PORT
    httpbin_port: int = HTTPBIN_PORT
    client_ports: tuple[int, ...] = ()      # host mode: one per client library, in plan order
    # host mode: (listen, admin) of each client library's sidecar, in plan order; None without one
    sidecar_ports: tuple[tuple[int, int] | None, ...] = ()
    replica_ports: tuple[int, ...] = ()     # host mode: httpbin's port in each target replica (target.replicas)

    @property
    def host_network(self) -> bool:
        return self.network == "host"

    def client_port(self, index: int) -> int:
        return self.client_ports[index] if self.host_network else CLIENT_PORT

    def sidecar_port(self, index: int) -> tuple[int, int]:
        """(listen, admin) of the sidecar of the client library at `index`, inside its namespace."""
        if not self.host_network:
            return SIDECAR_PORT, SIDECAR_ADMIN_PORT
        ports = self.sidecar_ports[index] if index < len(self.sidecar_ports) else None
        if ports is None:
            raise ValueError(f"the host layout has no sidecar ports for client library {index}")
        return ports

    def replica_port(self, index: int) -> int:
        """httpbin's port in target replica `index` (its own namespace, except on the host network)."""
        if self.host_network and self.replica_ports:
            return self.replica_ports[index]
        return self.httpbin_port

    def published(self, host_port: int, container_port: int) -> tuple[tuple[int, int], ...]:
        return () if self.host_network else ((host_port, container_port),)


COMPOSE_LAYOUT = Layout()


@dataclass(frozen=True)
class Build:
    dockerfile: str
    args: dict[str, str]


@dataclass(frozen=True)
class Service:
    name: str
    role: str                          # target | proxy | client | sidecar | service | service-sidecar
    image: str
    build: Build | None                # None: a prebuilt image (the user's, or one rbl cannot build)
    command: tuple[str, ...]
    ports: tuple[tuple[int, int], ...]  # (host port on 127.0.0.1, container port)
    healthcheck: tuple[str, ...]
    environment: dict[str, str] = field(default_factory=dict)
    volumes: tuple[tuple[str, str], ...] = ()     # (path relative to the compiled dir, container path)
    library: str | None = None
    depends_on: tuple[str, ...] = ()
    note: str | None = None            # why a service cannot be built, shown in the compose file
    entrypoint: tuple[str, ...] = ()   # replaces the image's (a sidecar runs Envoy from its client's image)
    network_of: str | None = None      # the service whose network namespace it joins (bridge layout)
    pull_policy: str | None = None     # compose's; `never` for an image another service builds
    cpus: float | None = None          # the container's CPU limit (a target replica's target.cpus)


@dataclass(frozen=True)
class Deployment:
    project: str
    services: tuple[Service, ...]
    dockerfiles: tuple[str, ...]       # the Dockerfile templates the services use
    needs_rbl_source: bool             # some image installs rbl itself (target, Python clients)
    warnings: tuple[str, ...]
    layout: Layout = COMPOSE_LAYOUT

    def service(self, name: str) -> Service:
        return next(s for s in self.services if s.name == name)

    @property
    def proxy_name(self) -> str:
        """The service holding the fault proxy: `target` itself, or `proxy` in front of replicas."""
        return next((s.name for s in self.services if s.role == PROXY_ROLE), TARGET_SERVICE)

    def sidecar_of(self, library: str) -> Service | None:
        return next((s for s in self.services if s.role == "sidecar" and s.library == library), None)

    def client_index(self, library: str) -> int:
        """The client library's place in plan order, which its ports (and its sidecar's) follow."""
        return [s.library for s in self.services if s.role == "client"].index(library)


def project_name(plan_name: str) -> str:
    """A compose project name (lowercase letters, digits, `-`, `_`) derived from the plan's."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", plan_name.lower()).strip("-_")
    return f"rbl-{slug or 'space'}"


def client_libraries(header: dict) -> list[tuple[str, str]]:
    """(library, client service kind) pairs of the plan, in first-use order, once each."""
    seen: dict[str, str] = {}
    for client in header["clients"]:
        seen.setdefault(client["library"], client["service"])
    return list(seen.items())


def client_image_name(kind: str) -> str:
    recipe = CLIENT_RECIPES.get(kind)
    # a user-declared library may name any client kind: keep image names valid references
    return recipe.image if recipe else "client-" + (re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-") or "unnamed")


def built_image_names(header: dict) -> list[str]:
    names = ["target", CHAIN_IMAGE] if header.get("topology") else ["target"]
    for _, kind in client_libraries(header):
        name = client_image_name(kind)
        if name not in names:
            names.append(name)
    return names


def deployment_for(header: dict, images: ImageChoice, layout: Layout = COMPOSE_LAYOUT) -> Deployment:
    target = _target_service(images, layout)
    resources = header.get("target") or {}
    dockerfiles = [] if images.is_prebuilt("target") else ["target.Dockerfile"]
    if header.get("topology"):
        if layout.host_network:
            raise ValueError("a topology's containers each need a network namespace of their own")
        # the topology's replicas and their sidecars, the proxy alone in front of the entry
        services = topology_deployment(target, header, images, SIDECAR_PORT, SIDECAR_ADMIN_PORT,
                                       SIDECAR_DIR_IN_CONTAINER, PROXY_SERVICE, PROXY_ROLE)
        dockerfiles += [] if images.is_prebuilt(CHAIN_IMAGE) else [CHAIN_DOCKERFILE]
    elif has_resources(resources):
        # target.cpus/replicas: httpbin replicas in containers of their own, the proxy in its own
        services = split_target(target, layout, resources)
    else:
        services = [replace(target, environment={**target.environment, **target_environment(resources)})]
    proxy = services[-1].name
    warnings = []
    # open-loop load: a client may hold as many calls at once as the load generator opens
    max_users = OPEN_LOOP_CONNECTIONS if is_open_loop(header) else axis_largest(header["users"])
    for index, (library, kind) in enumerate(client_libraries(header)):
        service = _client_service(library, kind, index, images, layout, max_users, proxy)
        if kind == MESH_KIND and not service.note:
            sidecar = sidecar_service(service, index, layout)
            services.append(sidecar)
            # the client joins its sidecar's namespace, whose container publishes the client's port
            service = replace(service, ports=(), depends_on=(proxy, sidecar.name),
                              network_of=None if layout.host_network else sidecar.name)
        services.append(service)
        if service.build and service.build.dockerfile not in dockerfiles:
            dockerfiles.append(service.build.dockerfile)
        if service.note:
            warnings.append(service.note)
    warnings += list(dict.fromkeys(s.note for s in services if s.role == SERVICE_SIDECAR_ROLE and s.note))
    needs_rbl_source = any(s.build and s.build.dockerfile in ("target.Dockerfile", "client-python.Dockerfile",
                                                              "client-mesh.Dockerfile") for s in services)
    return Deployment(project_name(header["name"]), tuple(services), tuple(dockerfiles),
                      needs_rbl_source, tuple(warnings), layout)


def _target_service(images: ImageChoice, layout: Layout) -> Service:
    build = None
    if not images.is_prebuilt("target"):
        args = {"PYTHON_IMAGE": images.bases["python"]}
        if images.with_envoy and not images.envoy_from_wheel:
            args["ENVOY_IMAGE"] = images.bases["envoy"]
        build = Build("target.Dockerfile", args)
    check = ("import urllib.request as u; "
             f"u.urlopen('http://127.0.0.1:{layout.admin_port}/ready', timeout=2); "
             f"u.urlopen('http://127.0.0.1:{layout.proxy_port}/status/200', timeout=2)")
    return Service(
        name=TARGET_SERVICE, role="target", image=images.image_for("target"), build=build, command=(),
        ports=layout.published(PROXY_PORT, layout.proxy_port) + layout.published(ADMIN_PORT, layout.admin_port),
        healthcheck=("CMD", "python", "-c", check),
        environment={"RBL_PROXY": "auto" if images.with_envoy else "builtin",
                     "BIND_HOST": layout.bind_host, "PROXY_PORT": str(layout.proxy_port),
                     "ADMIN_PORT": str(layout.admin_port), "HTTPBIN_PORT": str(layout.httpbin_port)},
        volumes=(("envoy/envoy.yaml", ENVOY_CONFIG_IN_CONTAINER),),
    )


def _client_service(library: str, kind: str, index: int, images: ImageChoice, layout: Layout,
                    max_users: int, proxy: str = TARGET_SERVICE) -> Service:
    recipe = CLIENT_RECIPES.get(kind)
    image_name = client_image_name(kind)
    port = layout.client_port(index)
    common = dict(name=f"client-{library}", role="client", image=images.image_for(image_name),
                  ports=layout.published(FIRST_CLIENT_HOST_PORT + index, port), library=library,
                  depends_on=(proxy,))
    if recipe is None:
        note = None
        if not images.is_prebuilt(image_name):
            note = (f"rbl ships no `{kind}` client service yet: build one that speaks rbl client protocol v1 "
                    f"(clients/protocol.py) on port {port} and pass --image {image_name}=REF")
        return Service(**common, build=None, command=(), healthcheck=(), note=note)
    # {target}: the fault proxy's data address as the client reaches it (docker_backend.target_url);
    # a mesh client's is its sidecar's listener, on the loopback of the namespace they share
    target_host = "127.0.0.1" if layout.host_network else proxy
    target = f"{target_host}:{layout.proxy_port}"
    if kind == MESH_KIND:
        target = f"127.0.0.1:{layout.sidecar_port(index)[0]}"
        if not images.with_envoy and not images.is_prebuilt(image_name):
            return Service(**common, build=None, command=(), healthcheck=(), note=(
                f"{library} runs its requests through a sidecar Envoy, which --image envoy=none leaves out: "
                f"give the sidecar's Envoy with --image envoy=wheel (the default) or envoy=REF"))
    fill = {"library": library, "listen": f"{layout.bind_host}:{port}", "port": port, "target": target,
            "version": images.envoy_version or "unknown"}
    build = None if images.is_prebuilt(image_name) else Build(
        recipe.dockerfile, {f"{base.upper()}_IMAGE": images.bases[base] for base in recipe.base_args}
        | _envoy_args(kind, images))
    command = tuple(a.format(**fill) for a in recipe.command) + max_jobs_arguments(max_users)
    return Service(**common, build=build, command=command,
                   healthcheck=tuple(a.format(**fill) for a in recipe.healthcheck))


def _envoy_args(kind: str, images: ImageChoice) -> dict[str, str]:
    """The mesh client's image holds its sidecar's Envoy, from the same place as the target's."""
    if kind == MESH_KIND and images.with_envoy and not images.envoy_from_wheel:
        return {"ENVOY_IMAGE": images.bases["envoy"]}
    return {}


def sidecar_service(client: Service, index: int, layout: Layout) -> Service:
    """A mesh client's sidecar Envoy: a container of its own whose network namespace the client
    joins, as a mesh injects its proxy (Istio's istio-proxy container in the application's pod).

    Why a container of its own rather than a second process in the client's: it keeps apart what
    the runner watches. A sidecar that dies is a container that stopped (lost_services names it and
    the client is restarted with it), its log is its own, and the client's container runs exactly a
    client's command. The sidecar owns the namespace and publishes both ports the runner uses (the
    client's and the sidecar's admin API), so it starts first and the client once it is ready, as
    Istio's holdApplicationUntilProxyStarts does: the client's warm-up already goes through it, as
    on the local backend. Its image is the client's, which holds Envoy, built once, for the client
    (`pull_policy: never`: compose would otherwise try a registry for it first); one worker, as the
    local backend runs it (rbl/backends/local/backend.py).
    """
    listen, admin = layout.sidecar_port(index)
    check = f"import urllib.request as u; u.urlopen('http://127.0.0.1:{admin}/ready', timeout=2)"
    return Service(
        name=f"sidecar-{client.library}", role="sidecar", image=client.image, build=None,
        pull_policy="never" if client.build else None, entrypoint=("envoy",),
        # dynamic base id: with host networking, the target's Envoy shares the namespace that holds
        # hot restart's abstract sockets
        command=("-c", f"{SIDECAR_DIR_IN_CONTAINER}/envoy.json", "--concurrency", "1", "--use-dynamic-base-id",
                 "--log-level", "warning"),
        ports=client.ports + layout.published(FIRST_SIDECAR_ADMIN_HOST_PORT + index, admin)
        + layout.published(FIRST_SIDECAR_LISTEN_HOST_PORT + index, listen),
        healthcheck=("CMD", "python", "-c", check),
        volumes=((sidecar_directory(client.library), SIDECAR_DIR_IN_CONTAINER),),
        library=client.library, depends_on=client.depends_on)


def sidecar_directory(library: str) -> str:
    """The sidecar's xDS directory, relative to the compiled directory (and RUN_DIR/deployment)."""
    return f"envoy/sidecar-{re.sub(r'[^A-Za-z0-9._-]', '_', library).lstrip('.')}"
