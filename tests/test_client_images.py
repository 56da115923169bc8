"""The Node.js and Go client images without a Docker engine: what client-node.Dockerfile and
client-go.Dockerfile run works on the build context `rbl compile` writes alone, and the service
then answers the compose file's own healthcheck command. (tests/test_docker_backend.py builds and
runs images where an engine is available.)"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from rbl.backends.net import free_port

from .conftest import REPO


@pytest.fixture(scope="module")
def polyglot_context(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("compiled") / "out"
    done = subprocess.run(["python3", "-m", "rbl", "compile", "examples/polyglot.rbl", "-o", str(out)], cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return out / "docker", yaml.safe_load((out / "docker-compose.yaml").read_text())


def run_steps(dockerfile: Path, sources: Path, context: Path) -> None:
    """The build stage's RUN lines, run in the copied sources (WORKDIR of that stage)."""
    for line in dockerfile.read_text().splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            assert (context / line.split()[1]).exists(), line
        if line.startswith("RUN "):
            command = line[4:].replace("/out/", f"{sources}/out/")
            done = subprocess.run(command, shell=True, cwd=sources, capture_output=True, text=True)
            assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"


def serve_and_check(argv: list[str], service: dict) -> None:
    """Starts the service as the compose file says (on loopback) and runs its healthcheck."""
    port = free_port()
    command = [re.sub(r"^0\.0\.0\.0:\d+$", f"127.0.0.1:{port}", a).replace("target:9211", "127.0.0.1:9")
               for a in service["command"]]
    process = subprocess.Popen(argv + command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().split() == ["listening", str(port)]
        check = [a.replace(":8080/", f":{port}/") for a in service["healthcheck"]["test"][1:]]
        assert subprocess.run(check, capture_output=True, timeout=30).returncode == 0, shlex.join(check)
        down = [a.replace(f":{port}/", f":{free_port()}/") for a in check]
        assert subprocess.run(down, capture_output=True, timeout=30).returncode != 0, "a healthcheck that cannot fail"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_node_image_steps_build_and_its_healthcheck_passes(polyglot_context):
    context, compose = polyglot_context
    sources = context / "clients" / "node"
    assert not (sources / "node_modules").exists()          # the context carries sources, not an install
    run_steps(context / "client-node.Dockerfile", sources, context)
    assert (sources / "node_modules" / "cockatiel").is_dir()
    service = compose["services"]["client-cockatiel"]
    assert service["build"]["dockerfile"] == "client-node.Dockerfile" and "NODE_IMAGE" in service["build"]["args"]
    serve_and_check(["node", str(sources / "src" / "main.js")], service)


def test_the_go_image_steps_build_and_its_healthcheck_passes(polyglot_context):
    context, compose = polyglot_context
    sources = context / "clients" / "go"
    run_steps(context / "client-go.Dockerfile", sources, context)
    binary = sources / "out" / "rbl-client-go"
    assert binary.is_file()
    for library in ("failsafe", "gobreaker"):
        service = compose["services"][f"client-{library}"]
        assert service["build"]["args"].keys() == {"GOLANG_IMAGE", "DEBIAN_IMAGE"}
        # the healthcheck names the binary where the image puts it: run ours in its place
        service = {**service, "healthcheck": {"test": [a.replace("/opt/rbl/rbl-client-go", str(binary))
                                                       for a in service["healthcheck"]["test"]]}}
        serve_and_check([str(binary)], service)
