"""What a plan needs on this machine, checked before anything starts (exit 4 with advice)."""

from __future__ import annotations

import importlib.util
import shutil

from pathlib import Path

from ..errors import EnvironmentMissing
from ..services.python_strategies import LIBRARIES as PYTHON_LIBRARIES
from .client_builds import BUILT_CLIENTS, needs_build

# Client services the local backend can start today, by the catalogue's `client` setting.
LOCAL_CLIENT_SERVICES = ("python", "resilience4j")

INSTALL_ADVICE = {
    "java": "install a JDK 17+ and Maven (Debian: `apt-get install -y openjdk-17-jdk maven`)",
    "dotnet": "install the .NET SDK (https://dotnet.microsoft.com/download)",
    "node": "install Node.js 20+ and npm (Debian: `apt-get install -y nodejs npm`)",
}
RUNTIME_COMMANDS = {"java": ("java",), "dotnet": ("dotnet",), "node": ("node", "npm")}


def _commands_needed(client: dict, client_jars: dict[str, Path]) -> tuple[str, ...]:
    commands = RUNTIME_COMMANDS.get(client["requires"], ())
    kind = client["service"]
    if kind in BUILT_CLIENTS and needs_build(kind, client_jars.get(client["library"])):
        commands += ("mvn",)                      # its jar has to be built first
    return commands


def missing_requirements(clients: list[dict], client_jars: dict[str, Path] | None = None) -> list[str]:
    """One line per problem with a client the plan uses; empty when the run can start."""
    problems: list[str] = []
    seen: set[str] = set()
    for client in clients:
        library, service, requires = client["library"], client["service"], client["requires"]
        if library in seen:
            continue
        seen.add(library)
        missing = [cmd for cmd in _commands_needed(client, client_jars or {}) if shutil.which(cmd) is None]
        if missing:
            problems.append(f"{library} ({client['label']}) needs {', '.join(missing)}: "
                            f"{INSTALL_ADVICE.get(requires, 'install ' + requires)}")
        elif service not in LOCAL_CLIENT_SERVICES:
            problems.append(f"{library} ({client['label']}) needs the `{service}` client service, which the "
                            f"local backend of this rbl version cannot start yet; remove its client blocks "
                            f"to run the rest")
        elif service == "python" and library not in PYTHON_LIBRARIES:
            problems.append(f"{library} ({client['label']}) has no implementation in rbl's Python client "
                            f"service (it has {', '.join(PYTHON_LIBRARIES)})")
        elif service == "python" and importlib.util.find_spec(library) is None:
            problems.append(f"{library} ({client['label']}) is not installed: `python3 -m pip install {library}`")
    return problems


def check_requirements(clients: list[dict], client_jars: dict[str, Path] | None = None) -> None:
    problems = missing_requirements(clients, client_jars)
    if problems:
        raise EnvironmentMissing("this plan cannot run here:\n  - " + "\n  - ".join(problems),
                                 hint="nothing was started")
