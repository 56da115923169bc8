"""The local backend, the embedded default: httpbin under gunicorn, the fault proxy and the client
services as processes on this machine.

LocalBackend checks the machine (the Python libraries, the toolchains of the clients it builds)
and builds what needs building before anything starts. LocalServices is one run's services, used
as a context manager: services start as soon as what they depend on is known (the target and the
proxy at once, since the proxy needs only the target's port; the clients, side by side, once the
proxy has its port), each health-checked with a timeout, and all stop at once on success,
failure or Ctrl-C.
"""

from __future__ import annotations

import math
import os
import random
import re
import secrets
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

from rich.console import Console

from ...clients.protocol import max_jobs_arguments
from ...compiler.plan import axis_largest
from ...dataplane.target_settings import DROP_ABANDONED_ENV, target_environment
from ...dataplane.target_token import TOKEN_ENV
from ...errors import EnvironmentMissing
from ...libraries.istio import release_of
from ...plan_records import MESH_SERVICE, OPEN_LOOP_CONNECTIONS, is_open_loop
from ...store.run_layout import TOPOLOGY
from ...topology import topology_from_record
from ...runner.fault_control import FaultControl
from ...runner.backend import Prepared, RoundFailed
from ...runner.liveness import ServicesLost, process_problem
from ...runner.notices import BuildNotice
from ...targets.client_builds import BUILT_CLIENTS, RECIPES, client_artifact, client_command, client_jar
from ...targets.envoy_binary import INSTALL_ADVICE as ENVOY_ADVICE, envoy_binary, envoy_version
from ..net import HOST, free_port, reported_limit, reported_version
from ...mesh.sidecar import Sidecar, SidecarError
from ...mesh.sidecar_config import SidecarAddresses
from .cpu_budget import CpuBudget, budget_name, create_budget
from ..topology_control import TopologyFaults
from .topology import TopologyServices
from ..pod_topology import PodTopology, read_pods_document
from .processes import Service, ServiceNotReady, stop_all
from .proxy import ProxyChoice, choose_proxy
from .requirements import check_requirements

READY_TIMEOUT = 30.0
DEATH_GRACE_S = 1.0               # how long a service whose admin API broke off may take to be seen exited


@dataclass(frozen=True)
class LocalOptions:
    # gunicorn workers serving httpbin: one per core (more only adds contention with the proxy
    # and the clients on the same machine; see bench/proxy_overhead.py) ...
    workers: int = field(default_factory=lambda: os.cpu_count() or 2)
    threads: int = 16                # ... each with this many threads (gthread: keep-alive, and
                                     # 150 virtual users are not queued behind 4 sync workers)
    proxy: str = "auto"              # auto: real Envoy when it is installed, else rbl's proxy (proxy.py)
    seed: int | None = None          # the built-in proxy's fault decision seed [default: random, recorded]
    client_jars: Mapping[str, Path] = field(default_factory=dict)   # library -> the user's --client-jar/-dir/-bin
    # a shard's pod on a cluster: the topology's replicas run in pods of their own, where this file says
    topology_pods: Path | None = None


class LocalBackend:
    """Processes on this machine (the runner's children, so other work can be measured)."""

    name = "local"
    samples_other_work = True

    def __init__(self, options: LocalOptions | None = None):
        options = options or LocalOptions()
        # a bad --proxy, or --seed with --proxy envoy, before a run directory exists
        self.proxy = choose_proxy(options.proxy, seeded=options.seed is not None)
        if options.seed is None and self.proxy.kind == "builtin":   # random, but recorded: repeatable
            options = replace(options, seed=random.randrange(2**32))
        self.options = options
        self.pods: dict | None = None        # the topology's pods (options.topology_pods), once check read them

    def check(self, header: dict, console: Console) -> Prepared:
        """The plan's libraries and toolchains, then the clients built (or found in the cache) and,
        for an open-loop plan, the load generator."""
        if self.proxy.note:
            console.print(self.proxy.note, highlight=False, markup=False)
        check_requirements(header["clients"], self.options.client_jars)
        artifacts = dict(self.options.client_jars)
        for client in header["clients"]:
            library, kind = client["library"], client["service"]
            if kind in BUILT_CLIENTS:
                with BuildNotice(console) as notice:     # a first build takes a while: say it is alive
                    artifacts[library] = client_jar(kind, self.options.client_jars.get(library), say=notice.say)
        loadgen = chain = None
        if is_open_loop(header):
            with BuildNotice(console) as notice:
                loadgen = client_artifact("loadgen", say=notice.say)
        if "topology" in header and self.options.topology_pods is not None:
            # the pods' file, read and checked against the plan before a run directory exists
            self.pods = read_pods_document(self.options.topology_pods)
            PodTopology(topology_from_record(header["topology"]), self.pods)
        elif "topology" in header:
            if envoy_binary() is None:
                raise EnvironmentMissing("a topology's services make their calls through sidecar Envoys, and none "
                                         "is installed", hint=ENVOY_ADVICE)
            with BuildNotice(console) as notice:
                chain = client_artifact("chain", say=notice.say)
        return Prepared(client_artifacts=artifacts, loadgen=loadgen, chain=chain)

    def session_settings(self) -> dict:
        seed = {"proxy_seed": self.options.seed} if self.proxy.kind == "builtin" else {}
        return {**seed, "target_workers": self.options.workers, "target_threads": self.options.threads}

    def start(self, header: dict, run_dir: Path, logs: Path, prepared: Prepared) -> "LocalServices":
        libraries = {c["library"]: c["service"] for c in header["clients"]}
        # open-loop load: a client may hold as many calls at once as the load generator opens
        users = OPEN_LOOP_CONNECTIONS if is_open_loop(header) else axis_largest(header["users"])
        services = LocalServices(logs, libraries, replace(self.options, client_jars=prepared.client_artifacts), users,
                                 self.proxy, header.get("target"), release_of(header))
        if "topology" in header and self.options.topology_pods is not None:
            services.topology = PodTopology(topology_from_record(header["topology"]), self.pods, release_of(header))
            services.target_token = services.topology.token      # what the replicas answer with
        elif "topology" in header:
            services.topology = TopologyServices(topology_from_record(header["topology"]), run_dir / TOPOLOGY,
                                                 services.target_token, prepared.chain, envoy_binary(), services._start,
                                                 release_of(header))
        return services


class LocalServices:
    """One run's processes: target, proxy and clients, with their endpoints."""

    def __init__(self, logs: Path, libraries: dict[str, str], options: LocalOptions, max_users: int = 0,
                 proxy: ProxyChoice | None = None, target: dict | None = None, istio_release: str | None = None):
        self.logs = logs
        self.libraries = libraries           # library -> its client service kind (the catalogue's `client`)
        self.options = options
        self.max_users = max_users           # the plan's largest user count: each client serves that many jobs at once
        self.proxy = proxy or choose_proxy(options.proxy, seeded=options.seed is not None)
        self.proxy_kind, self.proxy_version = self.proxy.kind, self.proxy.version
        self.services: list[Service] = []
        self.clients: dict[str, tuple[Service, int]] = {}
        self.sidecars: dict[str, tuple[Service, Sidecar]] = {}     # a mesh client's library -> its sidecar
        self.target_port = 0
        self.target = target or {}                   # the plan's target: path, cpus, replicas, noisy_cpus
        self.istio_release = istio_release          # whose defaults the sidecars follow (None: today's)
        self.budgets: list[CpuBudget] = []           # the target replicas' CPU budgets
        self.target_services: list[Service] = []     # the target's replicas, in order
        self.target_ports: list[int] = []
        self.target_description = ""                 # what runs as the target, and which budget is enforced
        self.proxy_port = 0
        self.admin_port = 0
        self.fault: FaultControl | None = None
        self._lock = threading.Lock()                # services start from several threads
        self._stopping = False
        self._starters: ThreadPoolExecutor | None = None
        # the target answers with it (target_app.py), so the runner can tell it from an impostor
        self.target_token = secrets.token_hex(16)
        # a topology's services, in the target's place: started here, or running in pods of their own
        self.topology: TopologyServices | PodTopology | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> "LocalServices":
        self._stopping = False
        # Services are started from these threads, which must live as long as the services do:
        # the parent-death signal (processes.py) fires when the *thread* that forked a child exits.
        jobs = self.topology.start_jobs() if self.topology is not None else []
        self._starters = ThreadPoolExecutor(max_workers=1 + max(1, len(self.libraries)) + len(jobs),
                                            thread_name_prefix="rbl-start")
        try:
            if self.topology is not None:            # the topology's entry service in the target's place
                upstreams = self.topology.entry_addresses
                targets = [self._starters.submit(job, argument) for job, argument in jobs]
            else:
                ports = [free_port() for _ in range(self.target.get("replicas", 1))]
                upstreams = [(HOST, port) for port in ports]
                targets = [self._starters.submit(self._start_targets, ports)]
            self._start_proxy(upstreams)             # needs the targets' addresses, not the targets
            clients = [self._starters.submit(self.start_client, library) for library in self.libraries]
            for started in [*targets, *clients]:
                started.result()
            if self.topology is not None:
                self.target_description = self.topology.description()
                self.fault = TopologyFaults(self.fault, self.topology)      # the proxy's, or a service's own
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        with self._lock:
            self._stopping = True                    # a service still starting in a thread is not started
            services = list(reversed(self.services))
        stop_all(services)
        for budget in self.budgets:
            budget.remove()
        self.budgets.clear()
        if self.topology is not None:
            self.topology.remove_budgets()
        self.services.clear()
        self.target_services.clear()
        self.clients.clear()
        self.sidecars.clear()
        if self._starters is not None:
            self._starters.shutdown(wait=True)       # its threads end at once: their services are gone
            self._starters = None

    def _start(self, name: str, argv: list[str], log: str, env: dict | None = None,
               stop_signal: int = signal.SIGTERM) -> Service:
        with self._lock:
            if self._stopping:
                raise ServiceNotReady(f"the {name} was not started: the services are stopping")
            service = Service(name, argv, self.logs / _file_name(log), env, stop_signal)
            self.services.append(service)
        return service

    # -- services ----------------------------------------------------------------------------
    def _start_targets(self, ports: list[int]) -> None:
        """The target's replicas, each under its CPU budget when the plan gives one."""
        self.target_ports = ports
        budgets = [self.target.get("cpus")] * len(ports)
        if "noisy_cpus" in self.target:
            budgets[-1] = self.target["noisy_cpus"]
        described = []
        for replica, (port, cpus) in enumerate(zip(ports, budgets)):
            described.append(self._start_target(replica, port, cpus))
        self.target_port = ports[0]
        self.target_description = "; ".join(described)

    def _start_target(self, replica: int, port: int, cpus: float | None) -> str:
        workers = self.options.workers if cpus is None else max(1, math.ceil(cpus))
        argv = [sys.executable, "-m", "gunicorn", "--bind", f"{HOST}:{port}",
                "--workers", str(workers), "--worker-class", "gthread",
                "--threads", str(self.options.threads), "--graceful-timeout", "2", "rbl.dataplane.target_app:app"]
        budget = why = None
        if cpus is not None:
            budget, why = create_budget(budget_name(self.target_token, replica), cpus)
            if budget is not None:
                self.budgets.append(budget)
                argv = budget.wrap(argv)
        name = "target (httpbin under gunicorn)" if replica == 0 else f"target replica {replica + 1}"
        # SIGKILL: the target keeps nothing worth a shutdown, and gunicorn's own (graceful, or the
        # quick SIGQUIT) took 0.3-0.6 s, the longest of every service's stop
        # the plan alone says how the target serves: no setting of it is inherited from the runner's shell
        inherited = {key: value for key, value in os.environ.items() if key != DROP_ABANDONED_ENV}
        service = self._start(name, argv, "target.log" if replica == 0 else f"target-{replica + 1}.log",
                              env={**inherited, TOKEN_ENV: self.target_token, **target_environment(self.target)},
                              stop_signal=signal.SIGKILL)
        self.target_services.append(service)
        service.wait_http(f"http://{HOST}:{port}/status/200", READY_TIMEOUT)
        what = f"replica {replica + 1}: {workers} worker{'s' if workers != 1 else ''}"
        if cpus is None:
            return what + ", no CPU budget"
        if budget is None:
            return what + f", {cpus:g} CPU NOT enforced: {why}"
        return what + f", {budget.describe()}"

    def use_target(self, target: dict) -> None:
        """A scenario's point of a varying target. The path is the round's own; a new CPU budget
        restarts the replicas on their ports, so the proxy's upstreams stay as they are."""
        changed = target.get("cpus") != self.target.get("cpus")
        self.target = {**self.target, **target}
        if not changed or self.topology is not None:
            return
        with self._lock:
            stopping, self.target_services = self.target_services, []
            self.services = [service for service in self.services if service not in stopping]
        stop_all(stopping, grace=0.0)        # SIGKILL, as at the end of a run: the target keeps nothing
        for budget in self.budgets:
            budget.remove()
        self.budgets.clear()
        # from a starter thread: a child's parent-death signal follows the thread that forked it
        try:
            self._starters.submit(self._start_targets, self.target_ports).result()
        except ServiceNotReady as error:          # no later round could run on this point: the run stops
            raise ServicesLost(f"the target did not come back with {target.get('cpus')} CPU: {error}") from error

    def _start_proxy(self, upstreams: list[tuple[str, int]]) -> None:
        """The fault proxy in front of the target's replicas (or the topology's entry), at `upstreams`."""
        if self.proxy_kind == "envoy":
            self._start_envoy(upstreams)
        else:
            argv = [sys.executable, "-m", "rbl.dataplane.fault_proxy",
                    "--upstream", ",".join(f"{host}:{port}" for host, port in upstreams)]
            if self.options.seed is not None:
                argv += ["--seed", str(self.options.seed)]
            service = self._start("fault proxy (rbl)", argv, "proxy.log")
            data, admin = service.read_announcement("listening", READY_TIMEOUT)
            self.proxy_port, self.admin_port = int(data), int(admin)
            service.wait_http(f"http://{HOST}:{self.admin_port}/ready", READY_TIMEOUT)
        self.fault = FaultControl(HOST, self.admin_port)

    def _start_envoy(self, upstreams: list[tuple[str, int]]) -> None:
        from ...targets.envoy import EnvoyAddresses, write_envoy_config
        self.proxy_port, self.admin_port = free_port(), free_port()
        (host, port), *more = upstreams
        addresses = EnvoyAddresses(listen_port=self.proxy_port, admin_port=self.admin_port, upstream_host=host,
                                   upstream_port=port, bind_host=HOST, more_upstreams=tuple(more))
        config = write_envoy_config(self.logs.parent / "envoy" / "envoy.yaml", addresses)
        service = self._start("fault proxy (Envoy)", [str(self.proxy.binary), "-c", str(config), "--base-id-path",
                                                      str(self.logs / "envoy.base-id"), "--use-dynamic-base-id",
                                                      "--log-level", "warning"], "proxy.log")
        service.wait_http(f"http://{HOST}:{self.admin_port}/ready", READY_TIMEOUT)

    def _start_sidecar(self, library: str) -> int:
        """A mesh client's sidecar Envoy in front of the fault proxy; returns its listening port."""
        binary = envoy_binary()
        if binary is None:
            raise EnvironmentMissing(f"{library} needs a sidecar Envoy, and none is installed", hint=ENVOY_ADVICE)
        addresses = SidecarAddresses(free_port(), free_port(), HOST, self.proxy_port, HOST)
        sidecar = Sidecar(self.logs.parent / "envoy" / f"sidecar-{_file_name(library)}", addresses,
                          self.istio_release)
        bootstrap = sidecar.write_initial()
        # one worker: Envoy's connection pools are per worker, so with more a connection limit of 1
        # opened one connection per worker (limits on requests are global either way)
        service = self._start(f"{library} sidecar (Envoy)", [str(binary), "-c", str(bootstrap), "--use-dynamic-base-id",
                                                               "--concurrency", "1", "--log-level", "warning"],
                              f"sidecar-{library}.log")
        service.wait_http(f"http://{HOST}:{addresses.admin_port}/ready", READY_TIMEOUT)
        self.sidecars[library] = (service, sidecar)
        return addresses.listen_port

    def start_client(self, library: str) -> None:
        kind = self.libraries[library]
        given = self.options.client_jars.get(library)     # built, or the user's --client-jar/-dir/-bin
        target_port = self.proxy_port
        if kind == MESH_SERVICE:
            # a plain HTTP client whose every request goes through its sidecar, which holds the policies
            target_port = self._start_sidecar(library)
            argv = [sys.executable, "-m", "rbl.clients.python.service", "--library", library,
                    "--version", envoy_version(envoy_binary()) or "unknown"]
        elif kind == "python":
            argv = [sys.executable, "-m", "rbl.clients.python.service", "--library", library]
        elif kind in RECIPES and given is not None:
            argv = client_command(kind, given) + ["--library", library]   # one service, several libraries
        elif given is not None:
            argv = [str(given)]           # a client service of a kind rbl does not ship, given with --client-bin
        else:
            raise EnvironmentMissing(f"the local backend cannot start a `{kind}` client service")
        # --target: the only address the client may send requests to, the fault proxy's data port
        argv += ["--listen", f"{HOST}:0", "--target", f"{HOST}:{target_port}"]
        argv += max_jobs_arguments(self.max_users)     # above the service's default cap
        service = self._start(f"{library} client service", argv, f"client-{library}.log")
        (port,) = service.read_announcement("listening", READY_TIMEOUT)
        service.wait_http(f"http://{HOST}:{port}/health", READY_TIMEOUT)
        self.clients[library] = (service, int(port))

    def restart_client(self, library: str) -> None:
        """After a client died or hung: stop what is left of it and start a fresh one."""
        service, _ = self.clients.pop(library)
        replaced = [service]
        if library in self.sidecars:                 # its sidecar may be what failed: a fresh one too
            replaced.append(self.sidecars.pop(library)[0])
        for stopped in replaced:
            stopped.stop(grace=1.0)
            self.services.remove(stopped)
        self.start_client(library)

    def configure_client(self, library: str, pattern: str, config: dict) -> None:
        if self.topology is not None:
            self._configure_topology(library, pattern, config)
        elif library in self.sidecars:
            self._ask_sidecar(library, lambda sidecar: sidecar.apply(pattern, config))

    def _configure_topology(self, library: str, pattern: str, config: dict) -> None:
        """The configuration's policies where their hosts place them: the services' sidecars, and for
        a mesh client its own sidecar, which calls the entry service (through the fault proxy)."""
        mesh = library in self.sidecars
        self.topology.configure(pattern if mesh else None, config)
        if mesh:
            self._ask_sidecar(library, lambda sidecar: sidecar.apply_resources(
                *self.topology.entry_resources(sidecar, pattern)))

    def client_counters(self, library: str) -> dict[str, int] | None:
        return self._ask_sidecar(library, Sidecar.counters) if library in self.sidecars else None

    def client_queue(self, library: str) -> int | None:
        return self._ask_sidecar(library, Sidecar.active_requests) if library in self.sidecars else None

    def client_limit(self, library: str, instance: str) -> int | None:
        if library in self.sidecars:
            return self._ask_sidecar(library, Sidecar.concurrency_limit)
        return reported_limit(HOST, self.clients[library][1], instance)

    def hop_counters(self) -> dict | None:
        return self.topology.counters() if self.topology is not None else None

    def _ask_sidecar(self, library: str, ask):
        """A sidecar that died fails the round, as a client that dies does (the executor then
        restarts both); a sidecar that answers and refuses a configuration stays an error of the run."""
        service, sidecar = self.sidecars[library]
        try:
            return ask(sidecar)
        except SidecarError as error:
            # a killed Envoy closes its sockets before it exits: give it a moment to be seen gone
            try:
                service.process.wait(timeout=DEATH_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
            problem = process_problem(service.process)
            if problem:
                raise RoundFailed(f"the {service.name} {problem}: {error}; see its log: {service.log_path}") from error
            raise

    def lost_services(self) -> list[tuple[str | None, str]]:
        """(library or None for the target and proxy, why) for every service that is no longer ours."""
        libraries = {id(service): library for library, (service, _) in [*self.clients.items(), *self.sidecars.items()]}
        return [(libraries.get(id(service)), f"the {service.name} {problem}; see its log: {service.log_path}")
                for service in self.services if (problem := process_problem(service.process))]

    def target_probe(self) -> tuple[str, str] | None:
        """Where a request through the proxy reaches the target, and the token it must answer with."""
        return f"http://{HOST}:{self.proxy_port}", self.target_token

    def pids(self) -> dict[str, int]:
        """The running services' process ids (recorded in the manifest, for whoever needs to look)."""
        return {service.name: service.process.pid for service in self.services}

    def client_versions(self) -> dict[str, str | None]:
        """The library versions the client services report on /health."""
        return {library: reported_version(HOST, port) for library, (_, port) in self.clients.items()}

    # -- addresses ---------------------------------------------------------------------------
    def target_url(self, path: str, library: str | None = None) -> str:
        if library in self.sidecars:
            return f"http://{HOST}:{self.sidecars[library][1].addresses.listen_port}{path}"
        return f"http://{HOST}:{self.proxy_port}{path}"

    def client_address(self, library: str) -> tuple[str, int]:
        return HOST, self.clients[library][1]

    def entry_url(self, path: str, library: str) -> str:
        return self.target_url(path, library)     # the sidecar listens on this machine's loopback


def _file_name(name: str) -> str:
    """A library's name comes from the plan: keep a file named after it inside its directory."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".")
