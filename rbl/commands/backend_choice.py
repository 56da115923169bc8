"""Which backend runs a plan for `rbl run`, and the options each backend takes: the rules that
refuse an option the chosen backend cannot honour, and the services backend itself."""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError

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


def check_plan_backend(header: dict, backend: str) -> None:
    """Open-loop load runs on the local backend only."""
    if "load" in header and backend != "local":
        raise UsageError(f"open-loop load (`load = open`) runs on the local backend only; --backend {backend} "
                         "cannot run it yet", hint="leave out --backend: the local backend runs it")


def services_backend(backend: str, options, network: str, images: list[str]):
    """The backend that starts a plan's services for the runner: processes here or containers;
    None for the kubernetes backend, whose pods each run a local backend of their own."""
    if backend == "local":
        from ..backends.local.backend import LocalBackend
        return LocalBackend(options)
    if backend == "docker":
        from ..backends.docker.driver import DockerBackend, DockerOptions
        return DockerBackend(DockerOptions(network=network, images=images))
    return None


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
