"""The docker backend: the services of the compose file `rbl compile` writes (one model,
rbl/backends/deployment.py), built and run through the Docker SDK, driven by the same executor,
fault control and client protocol as the local backend.

Images are built from the run's own copy of the artifacts (RUN_DIR/deployment/) and tagged by a
hash of their build context, arguments and base image IDs, so an unchanged image is reused across
runs. Each run gets its own containers (and, on a bridge network, its own network), labelled rbl.run=ID, and
removes them when it ends, fails or is interrupted. Services bind loopback (host network) or live
in the run's network with only 127.0.0.1 ports published.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from ... import __version__
from ...dataplane.target_token import TOKEN_ENV
from ...errors import EnvironmentMissing, RblError, UsageError
from ...runner.fault_control import FaultControl
from ..deployment import ADMIN_PORT, PROXY_PORT, Layout, Service
from ..envoy_binary import ENVOY_WHEEL_VERSION
from ..net import HOST, free_port, reported_version
from .artifacts import plan_deployment, write_artifacts

NETWORKS = ("bridge", "host")
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

    def check(self, header: dict, console: Console) -> None:
        """A deployment for the plan (a bad --image fails here) and a reachable engine; the clients
        are built inside their images, so no local java or mvn is needed."""
        deployment, _ = plan_deployment(header, self.options.images)
        if deployment.warnings:
            raise EnvironmentMissing(deployment.warnings[0], hint="the docker backend runs only client services "
                                                                   "it can build or that you name with --image")
        connect()

    def session_settings(self) -> dict:
        return {"network": self.options.network}

    def start(self, header: dict, run_dir: Path, logs: Path) -> "DockerServices":
        return DockerServices(run_dir, logs, header, self.options)


class DockerServices:
    """One run's containers (and network), labelled rbl.run=ID, with their endpoints."""

    def __init__(self, run_dir: Path, logs: Path, header: dict, options: DockerOptions):
        self.run_dir, self.logs, self.header, self.options = run_dir, logs, header, options
        self.run_id = uuid.uuid4().hex[:10]
        self.target_token = secrets.token_hex(16)          # the target answers with it (target_app)
        layout = self._layout(options.network, header)
        self.deployment, self.images = plan_deployment(header, options.images, layout)
        self.proxy_kind = "envoy" if self.images.with_envoy else "builtin"
        # an Envoy copied from a user's image may be any release
        self.proxy_version = (ENVOY_WHEEL_VERSION if self.images.envoy_from_wheel else None) if self.images.with_envoy \
            else __version__
        self.engine = None
        self.network = None
        self.containers: dict[str, object] = {}            # service name -> container
        self.host_ports: dict[str, dict[int, int]] = {}     # service name -> container port -> host port
        self.tags: dict[str, str] = {}                      # dockerfile -> built tag
        self.fault: FaultControl | None = None

    @staticmethod
    def _layout(network: str, header: dict) -> Layout:
        if network == "bridge":
            return Layout()
        libraries = list(dict.fromkeys(c["library"] for c in header["clients"]))
        return Layout("host", HOST, free_port(), free_port(), free_port(), tuple(free_port() for _ in libraries))

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> "DockerServices":
        try:
            self.engine = connect()
            context = self.run_dir / "deployment"
            write_artifacts(self.header, context, self.deployment, self.images)
            self._build_images(context / "docker")
            if not self.deployment.layout.host_network:
                self.network = self.engine.networks.create(f"rbl-{self.run_id}", driver="bridge",
                                                           labels={"rbl.run": self.run_id})
            target, *clients = self.deployment.services
            self._start(target, context)
            self.fault = FaultControl(HOST, self._target_port(ADMIN_PORT))
            for service in clients:
                self._start(service, context)
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

    # -- images --------------------------------------------------------------------------------
    def _build_images(self, context: Path) -> None:
        digest = _tree_digest(context)
        for service in self.deployment.services:
            build = service.build
            if build is None or build.dockerfile in self.tags:
                continue
            # the bases' IDs too: a base rebuilt under the same tag (a new local base, a newer
            # pull) must not reuse an image built on the old one
            bases = sorted((arg, ref, self._image_id(ref)) for arg, ref in build.args.items())
            key = hashlib.sha256(f"{digest}|{build.dockerfile}|{bases}".encode()).hexdigest()
            tag = f"{service.image.rsplit(':', 1)[0]}:{key[:12]}"
            self.tags[build.dockerfile] = tag
            if not self._image_exists(tag):
                self._build(context, build.dockerfile, build.args, tag)

    def _image_id(self, ref: str) -> str:
        from docker.errors import ImageNotFound
        try:
            return self.engine.images.get(ref).id
        except ImageNotFound:          # the build pulls it
            return "not local"

    def _image_exists(self, tag: str) -> bool:
        from docker.errors import ImageNotFound
        try:
            self.engine.images.get(tag)
            return True
        except ImageNotFound:
            return False

    def _build(self, context: Path, dockerfile: str, args: dict, tag: str) -> None:
        log_path = self.logs / f"build-{dockerfile.removesuffix('.Dockerfile')}.log"
        step = "(before the first step)"
        with log_path.open("w", encoding="utf-8") as log:
            # host networking for the build: package downloads (PyPI, Maven Central) need it on
            # engines whose bridge network has no route out
            for chunk in self.engine.api.build(path=str(context), dockerfile=dockerfile, tag=tag, buildargs=args,
                                               network_mode="host", rm=True, forcerm=True, decode=True):
                text = chunk.get("stream", "")
                log.write(text)
                if text.startswith("Step "):
                    step = text.strip()
                if "error" in chunk:
                    log.write(chunk["error"] + "\n")
                    raise RblError(f"building {tag} failed at {step}: {chunk['error'].strip()}",
                                   hint=f"the whole build log is {log_path}", exit_code=4)

    # -- containers ----------------------------------------------------------------------------
    def _start(self, service: Service, context: Path) -> None:
        layout = self.deployment.layout
        image = self.tags[service.build.dockerfile] if service.build else service.image
        environment = dict(service.environment)
        if service.role == "target":         # not in the compose file: a token belongs to one run
            environment[TOKEN_ENV] = self.target_token
        kwargs = dict(image=image, command=list(service.command) or None, environment=environment,
                      init=True, name=f"rbl-{self.run_id}-{service.name}", detach=True,
                      labels={"rbl.run": self.run_id, "rbl.role": service.role, "rbl.plan": self.header["name"],
                              **({"rbl.library": service.library} if service.library else {})})
        if service.volumes:
            kwargs["volumes"] = {str((context / source).resolve()): {"bind": target, "mode": "ro"}
                                 for source, target in service.volumes}
        if layout.host_network:
            kwargs["network_mode"] = "host"
        else:
            ports = {container: free_port() for _, container in service.ports}
            self.host_ports[service.name] = ports
            kwargs["ports"] = {f"{container}/tcp": (HOST, host) for container, host in ports.items()}
        container = self.engine.containers.create(**kwargs)
        self.containers[service.name] = container
        if self.network is not None:
            self.network.connect(container, aliases=[service.name])
        container.start()
        self._wait_ready(service, container)

    def _target_port(self, compose_port: int) -> int:
        """Where the host reaches the target's proxy (PROXY_PORT) or admin API (ADMIN_PORT)."""
        layout = self.deployment.layout
        if layout.host_network:
            return layout.admin_port if compose_port == ADMIN_PORT else layout.proxy_port
        return self.host_ports["target"][compose_port]

    def _ready_urls(self, service: Service) -> list[str]:
        if service.role == "target":
            return [f"http://{HOST}:{self._target_port(ADMIN_PORT)}/ready",
                    f"http://{HOST}:{self._target_port(PROXY_PORT)}/status/200"]
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
                raise EnvironmentMissing(f"container {container.name} ({service.name}) {why}; its last output:\n{tail}",
                                         hint=f"it was waiting for {pending[0]}")
            time.sleep(0.2)

    # -- the executor's interface (runner/backend.py: Services) ---------------------------------
    def target_url(self, path: str, library: str | None = None) -> str:
        layout = self.deployment.layout
        if layout.host_network:
            return f"http://{HOST}:{layout.proxy_port}{path}"
        return f"http://target:{layout.proxy_port}{path}"         # the target's alias on the run's network

    def _client_service(self, library: str) -> Service:
        return next(s for s in self.deployment.services if s.library == library)

    def client_address(self, library: str) -> tuple[str, int]:
        service = self._client_service(library)
        index = [s.library for s in self.deployment.services if s.role == "client"].index(library)
        container_port = self.deployment.layout.client_port(index)
        if self.deployment.layout.host_network:
            return HOST, container_port
        return HOST, self.host_ports[service.name][container_port]

    def configure_client(self, library: str, pattern: str, config: dict) -> None:
        pass                                  # library clients only: their jobs carry the configuration

    def client_counters(self, library: str) -> dict[str, int] | None:
        return None

    def restart_client(self, library: str) -> None:
        service = self._client_service(library)
        container = self.containers.pop(service.name)
        container.remove(force=True)
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
        if self.images.is_prebuilt("target"):
            return None
        return f"http://{HOST}:{self._target_port(PROXY_PORT)}", self.target_token

    def pids(self) -> dict[str, str]:
        """The containers (name -> id), recorded in the manifest."""
        return {container.name: container.short_id for container in self.containers.values()}

    def client_versions(self) -> dict[str, str | None]:
        return {s.library: reported_version(*self.client_address(s.library))
                for s in self.deployment.services if s.role == "client"}


def _tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()

