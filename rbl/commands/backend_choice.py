"""Which backend runs a plan for `rbl run`, and the options each backend takes: the rules that
refuse an option the chosen backend cannot honour, and the backend itself (BackendChoice.build)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:                          # imported when a run needs it: `rbl --help` stays fast
    from ..backends.local.backend import LocalOptions

BACKENDS = ("local", "docker", "kubernetes")


def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise UsageError(f"--backend must be local, docker or kubernetes, got {backend!r}")


def check_cluster_run(client_jar: list[str], dry_run: bool) -> None:
    """--backend kubernetes: the shards' pods cannot use files on this machine, and a dry run checks
    the services here."""
    if client_jar:
        raise UsageError("--client-jar, --client-dir and --client-bin name files on this machine, which the "
                         "shards' pods cannot see",
                         hint="build the client into a --runner-image and say so with --runner-clients")
    if dry_run:
        raise UsageError("--dry-run checks the services on this machine, not on the cluster",
                         hint="`rbl run SPEC --dry-run` checks them here; `rbl compile SPEC --target kubernetes "
                              "-o DIR` shows what the cluster would get")


def check_backend_options(backend: str, shards: int, image: list[str]) -> None:
    """--shards applies to --backend kubernetes, --image to --backend docker."""
    if backend != "kubernetes" and shards != 1:
        raise UsageError("--shards applies to --backend kubernetes", hint="to run one shard here, use --shard I/N")
    if backend != "docker" and image:
        raise UsageError("--image applies to --backend docker")


@dataclass(frozen=True)
class BackendChoice:
    """The backend `rbl run` chose and its options, each kind's own (only the chosen one's are set)."""

    name: str
    local: LocalOptions                  # the local backend's: target, proxy, client services
    network: str = "bridge"              # docker's
    images: tuple[str, ...] = ()
    cluster: object | None = None        # kubernetes': ClusterOptions, and the Access to the cluster
    access: object | None = None

    @property
    def runs_elsewhere(self) -> bool:
        """Whole runs go elsewhere (a cluster's pods) rather than services starting for this runner."""
        return self.name == "kubernetes"

    def check_plan(self, header: dict, spec: Path | None = None) -> None:
        """What a backend cannot run of a plan every backend otherwise runs. A refusal names the line of
        `spec` (an .rbl file) that asks for it."""
        if "topology" not in header and self.local.topology_pods is not None:
            raise UsageError("--topology-pods places a topology's replicas, and the plan has no topology")
        if "topology" in header and self.name == "docker" and self.network == "host":
            raise UsageError(f"{spec_location(spec, TOPOLOGY_LINE)}a topology runs each replica in a network namespace "
                             "of its own (its sidecar joins it), which --network host does not give",
                             hint="leave out --network host: the run's own bridge network is the default")

    def build(self):
        """The backend itself: one that starts a plan's services for this runner (runner/backend.py's
        Backend: processes here, or containers), or one that runs whole runs elsewhere (WholeRunBackend:
        the kubernetes backend, whose pods each run a local backend of their own)."""
        if self.name == "local":
            from ..backends.local.backend import LocalBackend
            return LocalBackend(self.local)
        if self.name == "docker":
            from ..backends.docker.driver import DockerBackend, DockerOptions
            return DockerBackend(DockerOptions(network=self.network, images=list(self.images)))
        from ..backends.kubernetes.driver import KubernetesBackend
        return KubernetesBackend(self.cluster, self.access)


TOPOLOGY_LINE = re.compile(r"^([ \t]*)topology\b", re.MULTILINE)


def spec_location(spec: Path | None, line: re.Pattern) -> str:
    """`FILE:LINE:COL: ` of the first line of an .rbl spec that `line` matches (a setting given with
    --set has none); empty when there is no such line."""
    if spec is None or spec.suffix != ".rbl":
        return ""
    try:
        text = spec.read_text(errors="replace")
    except OSError:
        return ""
    found = line.search(text)
    if found is None:
        return ""
    return f"{spec}:{text.count(chr(10), 0, found.start()) + 1}:{len(found.group(1)) + 1}: "


def choose_backend(backend: str, proxy: str, seed: int | None, threads: int, workers: int | None,
                   client_jar: list[str], network: str, image: list[str], shards: int, cluster_flags: tuple,
                   kubeconfig: str | None, context: str | None, dry_run: bool,
                   topology_pods: Path | None = None) -> BackendChoice:
    """`rbl run`'s backend flags as one BackendChoice, or a usage error for a flag the chosen
    backend cannot honour (checked before a run directory exists)."""
    from ..backends.local.backend import LocalOptions
    from ..backends.local.proxy import PROXY_KINDS
    if proxy not in PROXY_KINDS:          # (the local backend checks the rest, before a run directory exists)
        raise UsageError(f"--proxy must be one of {', '.join(PROXY_KINDS)}, got {proxy!r}")
    if topology_pods is not None and backend != "local":
        raise UsageError("--topology-pods is for a shard's pod on a cluster, which runs the local backend")
    local = LocalOptions(threads=threads, proxy=proxy, seed=seed, client_jars=client_jars(client_jar),
                         topology_pods=topology_pods)
    if workers is not None:
        local = replace(local, workers=workers)
    check_backend(backend)
    cluster = access = None
    if backend == "kubernetes":
        check_cluster_run(client_jar, dry_run)
        from ..backends.kubernetes.driver import Access
        from .cluster import cluster_options
        access = Access(kubeconfig, context)
        cluster = cluster_options(shards, *cluster_flags)
    check_backend_options(backend, shards, image)
    return BackendChoice(backend, local, network, tuple(image), cluster, access)


def client_jars(items: list[str]) -> dict[str, Path]:
    """--client-jar/--client-dir/--client-bin LIBRARY=PATH: the client services the local backend
    runs instead of building them."""
    jars = {}
    for item in items:
        library, sep, path = item.partition("=")
        if not sep or not library or not path:
            raise UsageError(f"--client-jar/--client-dir/--client-bin expects LIBRARY=PATH, got {item!r}",
                             "for example resilience4j=client.jar or gobreaker=./rbl-client-go")
        jars[library] = Path(path)
    return jars
