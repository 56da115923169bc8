"""The docker backend: the services of the compose file `rbl compile` writes (one model,
rbl/targets/compose/deployment.py), built and run through the Docker SDK, driven by the same
executor, fault control and client protocol as the local backend.

Images are built from the run's own copy of the artifacts (RUN_DIR/deployment/; builds.py), so
an unchanged image is reused across runs. Each run gets its own containers (and, on a bridge
network, its own network), labelled rbl.run=ID, and removes them when it ends, fails or is
interrupted. Services bind loopback (host network) or live in the run's network with only
127.0.0.1 ports published. A mesh client's sidecar Envoy is a container whose network namespace
its client joins (deployment.sidecar_service); the runner switches its configuration by renaming
files into its bind-mounted xDS directory and reads its admin API on a published port, as the
local backend does with a sidecar process (rbl/mesh/sidecar.py). A topology's services are
containers too, each replica with its own CPU limit and its callers' sidecars beside it (topology.py).
"""

from __future__ import annotations

import re
import secrets
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from ... import __version__
from ...dataplane.target_token import TOKEN_ENV, TOKEN_HEADER
from ...errors import EnvironmentMissing, UsageError
from ...libraries.istio import release_of
from ...mesh.sidecar import Sidecar, SidecarError
from ...plan_records import is_open_loop
from ...runner.backend import Prepared, RoundFailed
from ...runner.fault_control import FaultControl
from ...runner.notices import BuildNotice
from ...targets.compose.artifacts import plan_deployment, write_artifacts
from ...targets.compose.deployment import (ADMIN_PORT, MESH_KIND, PROXY_PORT, SIDECAR_ADMIN_PORT, SIDECAR_PORT,
                                           TARGET_SERVICE, Layout, Service, client_libraries)
from ...targets.compose.sidecars import host_sidecar, upstream_of
from ...targets.client_builds import client_artifact
from ...targets.compose.target_replicas import (ENDPOINT_STATS_FILE, describe_targets, nano_cpus, replica_port,
                                                save_endpoint_stats)
from ...targets.compose.topology_services import (CHAIN_IMAGE, CHAIN_PORT, COMPOSE_TOKEN, REPLICA_ROLE,
                                                  SERVICE_SIDECAR_ROLE, replica_containers)
from ...targets.envoy_binary import ENVOY_WHEEL_VERSION
from ...topology import topology_from_record
from ..net import HOST, free_port, reported_limit, reported_version
from ..topology_control import TopologyFaults
from .builds import build_images
from .topology import ContainerTopology, describe_topology, runner_ports

NETWORKS = ("bridge", "host")
SIDECAR_DEATH_GRACE_S = 3.0      # how long a sidecar whose admin API broke off may take to be seen stopped
ENGINE_ADVICE = ("install Docker (Debian: `apt-get install -y docker.io`), start it (`dockerd &` or "
                 "`systemctl start docker`), or point DOCKER_HOST at a reachable engine")


@dataclass
class DockerOptions:
    network: str = "bridge"
    images: list[str] = field(default_factory=list)      # --image / --base-image NAME=REF
    ready_timeout: float = 180.0


def connect():
    """The Docker engine, or exit 4 with advice."""
    try:
        import docker
        from docker.errors import DockerException
    except ImportError:                                    # pragma: no cover - a dependency of rbl
        raise EnvironmentMissing("the Docker SDK for Python is not installed", hint="pip install docker") from None
    try:
        engine = docker.from_env()
        engine.ping()
    except DockerException as error:
        raise EnvironmentMissing(f"no Docker engine reachable: {error}", hint=ENGINE_ADVICE) from None
    return engine


def _engine_lost_errors() -> tuple[type[BaseException], ...]:
    """What the Docker SDK raises when the engine goes away mid-request (e.g. dockerd stopped
    during an image build): the connection errors of the HTTP layer beneath it."""
    import requests
    import urllib3
    return requests.exceptions.ConnectionError, urllib3.exceptions.ProtocolError


class DockerBackend:
    """Containers through a Docker engine, from the images of the compose file's build context."""

    name = "docker"
    samples_other_work = False       # the containers run under the engine, not under the runner

    def __init__(self, options: DockerOptions | None = None):
        self.options = options or DockerOptions()
        if self.options.network not in NETWORKS:
            raise UsageError(f"--network must be one of {', '.join(NETWORKS)}, got {self.options.network!r}")

    def check(self, header: dict, console: Console) -> Prepared:
        """A deployment for the plan (a bad --image fails here) and a reachable engine; the clients
        are built inside their images, so no local java or mvn is needed. An open-loop plan's load
        generator runs on this machine (built here, with Go), calling the containers' published
        ports: outside the containers, so its own CPU never comes out of their limits."""
        if "topology" in header and self.options.network == "host":
            raise UsageError("a topology runs each replica in a network namespace of its own (its sidecar joins "
                             "it), which --network host does not give",
                             hint="leave out --network host: the run's own bridge network is the default")
        deployment, _ = plan_deployment(header, self.options.images)
        if deployment.warnings:
            raise EnvironmentMissing(deployment.warnings[0], hint="the docker backend runs only client services "
                                                                   "it can build or that you name with --image")
        connect()
        loadgen = None
        if is_open_loop(header):
            with BuildNotice(console) as notice:
                loadgen = client_artifact("loadgen", say=notice.say)
        return Prepared(loadgen=loadgen)   # the images build the clients when the services start

    def proxy_kind(self, header: dict) -> str:
        """The fault proxy the plan's target container runs: Envoy when its image holds one."""
        _, images = plan_deployment(header, self.options.images)
        return "envoy" if images.with_envoy else "builtin"

    def session_settings(self) -> dict:
        return {"network": self.options.network}

    def start(self, header: dict, run_dir: Path, logs: Path, prepared: Prepared) -> "DockerServices":
        return DockerServices(run_dir, logs, header, self.options)


class DockerServices:
    """One run's containers (and network), labelled rbl.run=ID, with their endpoints."""

    def __init__(self, run_dir: Path, logs: Path, header: dict, options: DockerOptions):
        self.run_dir, self.logs, self.header, self.options = run_dir, logs, header, options
        self.run_id = uuid.uuid4().hex[:10]
        self.target_token = secrets.token_hex(16)          # the target answers with it (target_app)
        layout = self._layout(options.network, header)
        self.deployment, self.images = plan_deployment(header, options.images, layout)
        self.proxy_kind = "envoy" if self.images.with_envoy else "builtin"     # as DockerBackend.proxy_kind
        # an Envoy copied from a user's image may be any release
        self.proxy_version = (ENVOY_WHEEL_VERSION if self.images.envoy_from_wheel else None) if self.images.with_envoy \
            else __version__
        self.engine = None
        self.network = None
        self.containers: dict[str, object] = {}            # service name -> container
        self.host_ports: dict[str, dict[int, int]] = {}     # service name -> container port -> host port
        self.tags: dict[str, str] = {}                      # dockerfile -> built tag
        self.fault: FaultControl | None = None
        self.sidecars: dict[str, Sidecar] = {}              # a mesh client's library -> its sidecar
        self.upstream_host: str | None = None               # the fault proxy's address, as a sidecar reaches it
        self.target_description = ""                        # the target's containers and their CPU limits
        # a topology's replicas (by container name) and, once they run, the runner's hold on them
        self.replica_containers = {r.name: r for r in replica_containers(topology_from_record(header["topology"]))} \
            if "topology" in header else {}
        self.topology: ContainerTopology | None = None

    @staticmethod
    def _layout(network: str, header: dict) -> Layout:
        if network == "bridge":
            return Layout()
        libraries = client_libraries(header)
        replicas = (header.get("target") or {}).get("replicas", 1)
        return Layout("host", HOST, free_port(), free_port(), free_port(), tuple(free_port() for _ in libraries),
                      tuple((free_port(), free_port()) if kind == MESH_KIND else None for _, kind in libraries),
                      tuple(free_port() for _ in range(replicas)))

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> "DockerServices":
        try:
            self.engine = connect()
            context = self.run_dir / "deployment"
            write_artifacts(self.header, context, self.deployment, self.images)
            self.tags = build_images(self.engine, self.deployment, context / "docker", self.logs)
            if not self.deployment.layout.host_network:
                self.network = self.engine.networks.create(f"rbl-{self.run_id}", driver="bridge",
                                                           labels={"rbl.run": self.run_id})
            # the target's replicas, the proxy, then the clients; a sidecar before its client (deployment_for)
            for service in self._start_order():
                self._start(service, context)
                if service.name == self.deployment.proxy_name:
                    self.fault = FaultControl(HOST, self._target_port(ADMIN_PORT))
                    self.upstream_host = self._proxy_address()
                    self.target_description = describe_targets(self.deployment, self.containers, self.proxy_kind)
            if self.replica_containers:
                self._hold_topology(context)
        except BaseException as error:
            self.stop()
            if isinstance(error, _engine_lost_errors()):
                raise EnvironmentMissing(f"lost the Docker engine while setting up the deployment: {error}",
                                         hint=ENGINE_ADVICE) from None
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Remove every container and the network this run created (keeping their logs)."""
        from docker.errors import DockerException
        proxy = self.deployment.proxy_name
        if self.proxy_kind == "envoy" and proxy != TARGET_SERVICE and proxy in self.containers:
            save_endpoint_stats(f"http://{HOST}:{self._target_port(ADMIN_PORT)}", self.logs / ENDPOINT_STATS_FILE)
        for name, container in reversed(list(self.containers.items())):
            try:
                # service names carry the plan's library names: keep the log inside logs/
                safe = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".")
                (self.logs / f"{safe}.log").write_bytes(container.logs())
            except (DockerException, OSError):
                pass
            try:
                container.remove(force=True)
            except DockerException:
                pass
        self.containers.clear()
        if self.network is not None:
            try:
                self.network.remove()
            except DockerException:
                pass
            self.network = None

    def _start_order(self) -> list[Service]:
        """The deployment's order, except that a topology's replicas start from the last tier up (each
        with its sidecar after it): a sidecar then finds the names of the replicas it calls from the start."""
        services = list(self.deployment.services)
        tiers = [s for s in services if s.role in (REPLICA_ROLE, SERVICE_SIDECAR_ROLE)]
        groups: list[list[Service]] = []
        for service in tiers:
            if service.role == REPLICA_ROLE:
                groups.append([service])
            else:
                groups[-1].append(service)
        rest = [s for s in services if s not in tiers]
        return [s for group in reversed(groups) for s in group] + rest

    def _hold_topology(self, context: Path) -> None:
        """The runner's hold on the started topology; faults at a service go through it (TopologyFaults)."""
        topology = topology_from_record(self.header["topology"])
        self.topology = ContainerTopology(topology, self.target_token, context, self.host_ports, release_of(self.header))
        self.fault = TopologyFaults(self.fault, self.topology)
        self.target_description = describe_topology(topology, self.containers)

    # -- containers ----------------------------------------------------------------------------
    def _image(self, service: Service) -> str:
        if service.role == "sidecar":            # its client's image, which holds Envoy
            service = self._client_service(service.library)
        elif service.build is None:              # a target replica or the proxy: the image built for `target`
            service = next((s for s in self.deployment.services if s.build and s.image == service.image), service)
        return self.tags[service.build.dockerfile] if service.build else service.image

    def _start(self, service: Service, context: Path) -> None:
        layout = self.deployment.layout
        image = self._image(service)
        environment = dict(service.environment)
        if service.role == "target":         # not in the compose file: a token belongs to one run
            environment[TOKEN_ENV] = self.target_token
        command = list(service.command)
        if service.role == REPLICA_ROLE:     # the run's token, not the compose file's
            command = [self.target_token if argument == COMPOSE_TOKEN else argument for argument in command]
        kwargs = dict(image=image, command=command or None, environment=environment,
                      init=True, name=f"rbl-{self.run_id}-{service.name}", detach=True,
                      labels={"rbl.run": self.run_id, "rbl.role": service.role, "rbl.plan": self.header["name"],
                              **({"rbl.library": service.library} if service.library else {})})
        if service.entrypoint:
            kwargs["entrypoint"] = list(service.entrypoint)
        if service.cpus is not None:             # Docker's CPU limit: a CFS quota on the container's cgroup
            kwargs["nano_cpus"] = nano_cpus(service.cpus)
        if service.volumes:
            kwargs["volumes"] = {str((context / source).resolve()): {"bind": target, "mode": "ro"}
                                 for source, target in service.volumes}
        if layout.host_network:
            kwargs["network_mode"] = "host"
        elif service.network_of:                 # a mesh client, in its sidecar's namespace
            kwargs["network_mode"] = f"container:{self.containers[service.network_of].id}"
        else:
            inside = [port for _, port in service.ports] or self._runner_ports(service)
            ports = {container: free_port() for container in inside}
            self.host_ports[service.name] = ports
            kwargs["ports"] = {f"{container}/tcp": (HOST, host) for container, host in ports.items()}
        container = self._create(service, kwargs)
        self.containers[service.name] = container
        if self.network is not None and not service.network_of:
            self.network.connect(container, aliases=[service.name])
        container.start()
        self._wait_ready(service, container)
        if service.role == "sidecar":
            self._drive_sidecar(service, context)

    def _runner_ports(self, service: Service) -> list[int]:
        """What a container without ports of its own publishes for the runner: a target replica's httpbin,
        so the host sees it become ready (compose uses its healthcheck); a topology replica's control
        and its sidecar's admin API."""
        if service.role == REPLICA_ROLE:
            return runner_ports(self.replica_containers[service.name])
        return [port for port in [replica_port(service)] if port]

    def _create(self, service: Service, kwargs: dict):
        from docker.errors import APIError
        try:
            return self.engine.containers.create(**kwargs)
        except APIError as error:
            if service.cpus is None:
                raise
            raise EnvironmentMissing(f"the Docker engine refused {service.name}'s CPU limit of {service.cpus:g}: "
                                     f"{error.explanation or error}",
                                     hint="the engine needs the CPU CFS controller (cgroup cpu); or leave out "
                                          "target.cpus") from None

    def _drive_sidecar(self, service: Service, context: Path) -> None:
        """The runner's hold on a started sidecar: its files on the host and its admin API."""
        previous = self.sidecars.get(service.library)
        sidecar = host_sidecar(context, self.deployment, service, self._sidecar_admin_port(service.library),
                               self.upstream_host, release_of(self.header))
        if previous is not None:                 # a replaced sidecar reads the files at their last version
            sidecar.version = previous.version
        self.sidecars[service.library] = sidecar

    def _proxy_address(self) -> str:
        """The fault proxy's address as a sidecar reaches it. On the run's network the runner gives
        the target container's address, as istiod gives a sidecar its endpoints' addresses, so the
        sidecar's cluster is the local backend's (STATIC; Envoy's STATIC takes no name)."""
        host, _ = upstream_of(self.deployment)
        if self.network is None:
            return host
        proxy = self.containers[self.deployment.proxy_name]
        proxy.reload()
        return proxy.attrs["NetworkSettings"]["Networks"][self.network.name]["IPAddress"]

    def _sidecar_admin_port(self, library: str) -> int:
        """Where the host reaches a sidecar's admin API."""
        layout = self.deployment.layout
        if layout.host_network:
            return layout.sidecar_port(self.deployment.client_index(library))[1]
        return self.host_ports[self.deployment.sidecar_of(library).name][SIDECAR_ADMIN_PORT]

    def _target_port(self, compose_port: int) -> int:
        """Where the host reaches the target's proxy (PROXY_PORT) or admin API (ADMIN_PORT)."""
        layout = self.deployment.layout
        if layout.host_network:
            return layout.admin_port if compose_port == ADMIN_PORT else layout.proxy_port
        return self.host_ports[self.deployment.proxy_name][compose_port]

    def _ready_urls(self, service: Service) -> list[str]:
        if service.name == self.deployment.proxy_name:
            return [f"http://{HOST}:{self._target_port(ADMIN_PORT)}/ready",
                    f"http://{HOST}:{self._target_port(PROXY_PORT)}/status/200"]
        if service.role == REPLICA_ROLE:         # rbl-chain answers its control with the run's token only
            url = f"http://{HOST}:{self.host_ports[service.name][CHAIN_PORT]}/rbl/stats"
            return [urllib.request.Request(url, headers={TOKEN_HEADER: self.target_token})]
        if service.role == SERVICE_SIDECAR_ROLE:  # on the port its replica's container publishes
            return [f"http://{HOST}:{self.host_ports[service.network_of][SIDECAR_ADMIN_PORT]}/ready"]
        if service.role == "target":             # a replica behind the proxy
            port = replica_port(service)
            if not self.deployment.layout.host_network:
                port = self.host_ports[service.name][port]
            return [f"http://{HOST}:{port}/status/200"]
        if service.role == "sidecar":
            return [f"http://{HOST}:{self._sidecar_admin_port(service.library)}/ready"]
        return [f"http://{HOST}:{self.client_address(service.library)[1]}/health"]

    def _wait_ready(self, service: Service, container) -> None:
        deadline = time.monotonic() + self.options.ready_timeout
        pending = self._ready_urls(service)
        while pending:
            try:
                urllib.request.urlopen(pending[0], timeout=2).read()
                pending.pop(0)
                continue
            except OSError:
                pass
            container.reload()
            if container.status == "exited" or time.monotonic() > deadline:
                tail = container.logs(tail=20).decode(errors="replace").strip()
                why = "exited" if container.status == "exited" else f"not ready after {self.options.ready_timeout:.0f} s"
                waited = getattr(pending[0], "full_url", pending[0])
                raise EnvironmentMissing(f"container {container.name} ({service.name}) {why}; its last output:\n{tail}",
                                         hint=f"it was waiting for {waited}")
            time.sleep(0.2)

    # -- the executor's interface (runner/backend.py: Services) ---------------------------------
    def target_url(self, path: str, library: str | None = None) -> str:
        layout = self.deployment.layout
        if library is None:
            # no client asks (rbl run --dry-run times a request from the runner): where the host
            # reaches the proxy, which on the run's network is a published port, not `target`
            return f"http://{HOST}:{self._target_port(PROXY_PORT)}{path}"
        sidecar = self.deployment.sidecar_of(library)
        if sidecar is not None:                  # on the loopback of the namespace the client shares with it
            listen, _ = layout.sidecar_port(self.deployment.client_index(library))
            return f"http://127.0.0.1:{listen}{path}"
        if layout.host_network:
            return f"http://{HOST}:{layout.proxy_port}{path}"
        return f"http://{self.deployment.proxy_name}:{layout.proxy_port}{path}"   # its alias on the run's network

    def _client_service(self, library: str) -> Service:
        return next(s for s in self.deployment.services if s.library == library and s.role == "client")

    def client_address(self, library: str) -> tuple[str, int]:
        service = self._client_service(library)
        container_port = self.deployment.layout.client_port(self.deployment.client_index(library))
        if self.deployment.layout.host_network:
            return HOST, container_port
        # a mesh client's port is published by the sidecar, whose namespace it joined
        return HOST, self.host_ports[service.network_of or service.name][container_port]

    def entry_url(self, path: str, library: str) -> str:
        """The sidecar's listener on this machine: the namespace's own port with host networking,
        else the port the sidecar's container publishes on loopback."""
        layout = self.deployment.layout
        if layout.host_network:
            return f"http://{HOST}:{layout.sidecar_port(self.deployment.client_index(library))[0]}{path}"
        return f"http://{HOST}:{self.host_ports[self.deployment.sidecar_of(library).name][SIDECAR_PORT]}{path}"

    def configure_client(self, library: str, pattern: str, config: dict) -> None:
        if self.topology is not None:         # the policies where their hosts place them (topology_control.py)
            mesh = library in self.sidecars
            self.topology.configure(pattern if mesh else None, config)
            if mesh:
                self._ask_sidecar(library, lambda sidecar: sidecar.apply_resources(
                    *self.topology.entry_resources(sidecar, pattern)))
        elif library in self.sidecars:        # a library client's jobs carry its configuration
            self._ask_sidecar(library, lambda sidecar: sidecar.apply(pattern, config))

    def client_counters(self, library: str) -> dict[str, int] | None:
        return self._ask_sidecar(library, Sidecar.counters) if library in self.sidecars else None

    def client_queue(self, library: str) -> int | None:
        return self._ask_sidecar(library, Sidecar.active_requests) if library in self.sidecars else None

    def client_limit(self, library: str, instance: str) -> int | None:
        if library in self.sidecars:
            return self._ask_sidecar(library, Sidecar.concurrency_limit)
        return reported_limit(*self.client_address(library), instance)

    def hop_counters(self) -> dict | None:
        return self.topology.counters() if self.topology is not None else None

    def _ask_sidecar(self, library: str, ask):
        """A sidecar whose container stopped fails the round, as a client that stops does (the
        executor then restarts both); the runner asks its admin API between the checks that would
        find it gone (client_counters comes right after the round). A sidecar that answers and
        refuses a configuration stays an error of the run."""
        try:
            return ask(self.sidecars[library])
        except SidecarError as error:
            # a killed Envoy closes its sockets before the engine reports its container stopped
            deadline = time.monotonic() + SIDECAR_DEATH_GRACE_S
            while True:
                gone = [why for owner, why in self.lost_services() if owner == library]
                if gone:
                    raise RoundFailed(f"{gone[0]}: {error}") from error
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def restart_client(self, library: str) -> None:
        """A new client container; a mesh client's sidecar too, since the client lives in its
        namespace and may be what failed (as the local backend restarts both)."""
        client = self._client_service(library)
        replaced = [s for s in (client, self.deployment.sidecar_of(library)) if s is not None]
        for service in replaced:             # the client first: it is in the sidecar's namespace
            container = self.containers.pop(service.name, None)
            if container is not None:
                container.remove(force=True)
        for service in reversed(replaced):
            self._start(service, self.run_dir / "deployment")

    def lost_services(self) -> list[tuple[str | None, str]]:
        """(library or None for the target, why) for every container that is no longer running."""
        from docker.errors import DockerException
        libraries = {s.name: s.library for s in self.deployment.services}
        lost = []
        for name, container in self.containers.items():
            try:
                container.reload()
                status = container.status
            except DockerException as error:
                status = f"gone ({error})"
            if status != "running":
                lost.append((libraries.get(name), f"container {container.name} ({name}) is {status}"))
        return lost

    def target_probe(self) -> tuple[str, str] | None:
        """Where the host reaches the target through the proxy, and the token it must answer with
        (the target entrypoint serves rbl.dataplane.target_app when RBL_TARGET_TOKEN is set). A
        prebuilt target (--image target=REF) may not know the token: then only lost_services
        checks it, by container id and status."""
        if self.images.is_prebuilt(CHAIN_IMAGE if self.replica_containers else "target"):
            return None
        return f"http://{HOST}:{self._target_port(PROXY_PORT)}", self.target_token

    def pids(self) -> dict[str, str]:
        """The containers (name -> id), recorded in the manifest."""
        return {container.name: container.short_id for container in self.containers.values()}

    def client_versions(self) -> dict[str, str | None]:
        return {s.library: reported_version(*self.client_address(s.library))
                for s in self.deployment.services if s.role == "client"}
