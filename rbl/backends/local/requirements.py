"""What a plan needs on this machine, checked before anything starts (exit 4 with advice)."""

from __future__ import annotations

import importlib.util
import shutil

from pathlib import Path

from ...errors import EnvironmentMissing
from ...plan_records import MESH_SERVICE
from ...clients.python.strategies import LIBRARIES as PYTHON_LIBRARIES
from ...targets.client_builds import RECIPES, needs_build
from ...targets.envoy_binary import INSTALL_ADVICE as ENVOY_ADVICE, envoy_binary

# Client services the local backend can start, by the catalogue's `client` setting, and the
# libraries each serves (its --library choices).
LOCAL_CLIENT_SERVICES = {
    "python": tuple(PYTHON_LIBRARIES),
    "resilience4j": ("resilience4j", "concurrency_limits"),   # the JVM service
    "node": ("cockatiel", "opossum"),
    "go": ("failsafe", "gobreaker", "backoff"),
    MESH_SERVICE: ("istio",),             # the Python client as a plain HTTP client, behind a sidecar Envoy
}

INSTALL_ADVICE = {
    "java": "install a JDK 17+ and Maven (Debian: `apt-get install -y openjdk-17-jdk maven`)",
    "dotnet": "install the .NET SDK (https://dotnet.microsoft.com/download)",
    "node": RECIPES["node"].advice,
    "go": RECIPES["go"].advice,
}
RUNTIME_COMMANDS = {"java": ("java",), "dotnet": ("dotnet",), "node": ("node",), "go": ()}


def shipped_clients() -> str:
    """The libraries rbl has client services for, for messages."""
    return ", ".join(library for libraries in LOCAL_CLIENT_SERVICES.values() for library in libraries)


def _commands_needed(client: dict, explicit: Path | None) -> tuple[str, ...]:
    kind = client["service"]
    commands = RUNTIME_COMMANDS.get(client["requires"], ())
    if kind in RECIPES:
        commands = (RECIPES[kind].runtime,) if RECIPES[kind].runtime else ()
        if needs_build(kind, explicit):
            commands += (RECIPES[kind].build_tool,)       # it has to be built first
    return tuple(dict.fromkeys(commands))


def _no_service(library: str, label: str, service: str) -> str:
    return (f"{library} ({label}): rbl has no client service for `{service}` yet (rbl ships client services "
            f"for {shipped_clients()}). To run these blocks, give a client service that speaks rbl client "
            f"protocol v1 (clients/protocol.py): `rbl run --client-bin {library}=PROGRAM` starts "
            f"PROGRAM --listen HOST:PORT --target HOST:PORT on this machine, and `--backend docker "
            f"--image client-{library}=IMAGE` runs a prebuilt image; or remove its client blocks to run the rest")


def missing_requirements(clients: list[dict], client_jars: dict[str, Path] | None = None) -> list[str]:
    """One line per problem with a client the plan uses; empty when the run can start."""
    problems: list[str] = []
    seen: set[str] = set()
    explicit = client_jars or {}
    for client in clients:
        library, service, requires = client["library"], client["service"], client["requires"]
        if library in seen:
            continue
        seen.add(library)
        if service not in LOCAL_CLIENT_SERVICES:
            if library not in explicit:
                problems.append(_no_service(library, client["label"], service))
            continue                      # the user's own client: it is theirs to run
        if service == MESH_SERVICE:
            if envoy_binary() is None:
                problems.append(f"{library} ({client['label']}) runs its policies in a sidecar Envoy, and none is "
                                f"installed: {ENVOY_ADVICE}")
            continue
        missing = [cmd for cmd in _commands_needed(client, explicit.get(library)) if shutil.which(cmd) is None]
        if missing:
            advice = RECIPES[service].advice if service in RECIPES else INSTALL_ADVICE.get(requires, "install " + requires)
            problems.append(f"{library} ({client['label']}) needs {', '.join(missing)}: {advice}")
        elif library not in LOCAL_CLIENT_SERVICES[service] and library not in explicit:
            problems.append(f"{library} ({client['label']}) has no implementation in rbl's `{service}` client "
                            f"service (it has {', '.join(LOCAL_CLIENT_SERVICES[service])})")
        elif service == "python" and importlib.util.find_spec(library) is None:
            problems.append(f"{library} ({client['label']}) is not installed: `python3 -m pip install {library}`")
    return problems


def check_requirements(clients: list[dict], client_jars: dict[str, Path] | None = None) -> None:
    problems = missing_requirements(clients, client_jars)
    if problems:
        raise EnvironmentMissing("this plan cannot run here:\n  - " + "\n  - ".join(problems),
                                 hint="nothing was started")
