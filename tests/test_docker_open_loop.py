"""Open-loop load on the docker backend against a real Docker engine (marker `docker`, run by
scripts/docker-e2e.sh): the load generator on this machine calling the containers' published ports,
the target under Docker's CPU limit, a library client through POST /call and a mesh client through
its sidecar Envoy container; the same per-request records, classes, figures and calibration as the
local backend, and the same ordering of the pool limits as a local run of the same spec."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow.compute as pc
import pytest

from rbl.plan_records import load_of
from rbl.runner.load_schedule import send_offsets
from rbl.store.requests import read_requests

from .conftest import drawn_svg, run_rbl
from .pool_rounds import assert_the_paper_s_order, order_by_tail, pool_run
from .test_docker_backend import BASE, IMAGES, docker_json
from .test_open_loop_run import SPIKES, _scenarios


@pytest.fixture(scope="module")
def engine() -> str:
    """The local base image scripts/docker-e2e.sh makes (no registry is reachable here)."""
    done = subprocess.run(["docker", "image", "inspect", BASE], capture_output=True, text=True)
    assert done.returncode == 0, f"no base image {BASE}: run scripts/docker-e2e.sh (it makes one)"
    return BASE


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


@pytest.mark.docker
def test_spikes_reach_a_library_client_and_a_sidecar_container_on_the_run_s_network(engine, tmp_path):
    """The bridge network: nothing but published loopback ports between the generator and the
    containers (the sidecar's listener among them)."""
    (tmp_path / "spikes.rbl").write_text(SPIKES)
    done = run_rbl("run", "spikes.rbl", "-o", "out", "--report", "--backend", "docker", "--network", "bridge",
                   *IMAGES, cwd=tmp_path, timeout=900, env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stdout + done.stderr
    run = tmp_path / "out"
    rows = _rows(run)
    requests = read_requests(run)
    for scenario_id, scenario in _scenarios(run).items():       # every scheduled request, once, on time
        mine = requests.filter(pc.equal(requests["scenario"], scenario_id))
        row = next(r for r in rows if r["scenarioId"] == scenario_id)
        expected = list(send_offsets(load_of(scenario), row["capacityRps"], seed=f"{scenario_id}/1"))
        assert sorted(mine["seq"].to_pylist()) == list(range(len(expected)))
        assert row["oracleViolations"] == [], row["oracleViolations"]
    tenacity = next(r for r in rows if r["lib"] == "tenacity")
    istio = next(r for r in rows if r["lib"] == "istio")
    assert tenacity["successShare"] > 0.3 and tenacity["proxyRequests"] > 0
    # the sidecar container's pool of 4 refuses in the spikes, and passes on what it lets through
    assert istio["circuitBrokenShare"] > 0 and istio["sidecarUpstreamRequests"] == istio["proxyRequests"]
    assert tenacity["successP99Ms"] > 3 * istio["successP99Ms"]
    # calibrated in the containers, and stored apart from the local backend's measurement
    assert "calibrating first" in done.stderr
    stored = json.loads((tmp_path / "cache" / "rbl" / "capacity.json").read_text())
    assert [json.loads(key)["target"].get("backend") for key in stored] == ["docker"]
    assert "0.25 CPU enforced by Docker (NanoCpus 250000000)" in done.stderr
    report = run / "report"
    for name in ("overload-classes", "overload-cdf", "overload-percentiles"):
        assert drawn_svg(report / f"{name}.svg") >= 3
    assert not docker_json("ps", "-a", "--filter", "label=rbl.plan=spikes")
    assert not [n for n in docker_json("network", "ls") if n["Name"].startswith("rbl-")]


@pytest.mark.docker
def test_the_pool_limits_order_in_containers_as_on_this_machine(engine, tmp_path):
    """ICPE '22 Fig. 6 at small scale on the docker backend (host network), then the same spec on
    the local backend: the paper's ordering in both, and the same ordering of the three limits."""
    (tmp_path / "docker").mkdir()
    (tmp_path / "local").mkdir()
    in_docker = pool_run(tmp_path / "docker", "--backend", "docker", "--network", "host", *IMAGES)
    assert "enforced by Docker" in in_docker[1]["_stderr"]
    on_host = pool_run(tmp_path / "local")
    print(f"\ntail order, docker: {order_by_tail(in_docker)}, local: {order_by_tail(on_host)}")
    for rounds in (in_docker, on_host):
        print({limit: (round(r["circuitBrokenShare"], 3), r["successP99Ms"]) for limit, r in rounds.items()})
        assert_the_paper_s_order(rounds)
    assert order_by_tail(in_docker) == order_by_tail(on_host) == [1, 20, 1024]
    assert not docker_json("ps", "-a", "--filter", "label=rbl.plan=overload_pool")


@pytest.mark.docker
def test_calibrate_measures_in_containers_and_a_docker_run_finds_it(engine, tmp_path):
    """`rbl calibrate --backend docker` measures through the containers (stored under docker, apart
    from the local key), --show prints it, and a docker run uses it without measuring again."""
    spec = tmp_path / "spikes.rbl"
    spec.write_text(SPIKES)
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = run_rbl("calibrate", "spikes.rbl", "--backend", "docker", *IMAGES, cwd=tmp_path, timeout=600, env=cache)
    assert done.returncode == 0, done.stdout + done.stderr
    capacity = float(done.stdout)
    assert capacity > 0 and "0.25 CPU enforced by Docker" in done.stderr, done.stderr
    stored = json.loads((tmp_path / "cache" / "rbl" / "capacity.json").read_text())
    assert [json.loads(key)["target"].get("backend") for key in stored] == ["docker"]
    assert "otherWork" not in next(iter(stored.values()))         # the containers are not this process tree's
    shown = run_rbl("calibrate", "spikes.rbl", "--backend", "docker", "--show", *IMAGES, cwd=tmp_path, env=cache)
    assert shown.returncode == 0 and f"{capacity:g}" in shown.stdout, shown.stdout + shown.stderr
    local = run_rbl("calibrate", "spikes.rbl", "--show", cwd=tmp_path, env=cache)       # another key
    assert local.returncode != 0 and "no capacity of this target is stored" in local.stderr
    run = run_rbl("run", "spikes.rbl", "-o", "out", "--backend", "docker", *IMAGES, "--set", "load.duration = 4s",
                  "--set", "load.warmup = 1s", cwd=tmp_path, timeout=600, env=cache)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "calibrating first" not in run.stderr and f"target capacity: {capacity:g} req/s" in run.stderr
    assert not docker_json("ps", "-a", "--filter", "label=rbl.plan=spikes")
