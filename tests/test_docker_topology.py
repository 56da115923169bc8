"""A topology on the docker backend against a real Docker engine (marker `docker`, run by
scripts/docker-e2e.sh): each replica a container running rbl-chain under Docker's CPU limit, a
sidecar Envoy container in the network namespace of each calling replica, the fault proxy alone in
front of the entry; each policy enforced where its host places it (two_tier.py), and nothing left
behind."""

from __future__ import annotations

import subprocess

import pytest

from .test_docker_backend import POLYGLOT_BASE, docker_json
from .two_tier import (FAULT_AT_BACK, assert_each_limit_refuses_at_its_tier,
                       assert_each_service_s_cpu_is_its_container_s,
                       assert_the_back_s_own_faults_are_retried_in_the_front_s_sidecar, two_tier_run)

# rbl-chain builds with Go and runs on Debian; the target (the fault proxy, and the sidecars' Envoy)
# and the mesh client on Python: all from the base with this host's Go (no registry here)
IMAGES = ["--image", f"python={POLYGLOT_BASE}", "--image", f"golang={POLYGLOT_BASE}",
          "--image", f"debian={POLYGLOT_BASE}"]


@pytest.fixture(scope="module")
def engine() -> str:
    done = subprocess.run(["docker", "image", "inspect", POLYGLOT_BASE], capture_output=True, text=True)
    assert done.returncode == 0, f"no base image {POLYGLOT_BASE}: run scripts/docker-e2e.sh (it makes one)"
    return POLYGLOT_BASE


@pytest.mark.docker
def test_a_limit_at_tier_2_refuses_at_tier_2_only_in_containers(engine, tmp_path):
    out, rows, hops, printed = two_tier_run(tmp_path, "--backend", "docker", *IMAGES)
    assert "topology, entry front, one container per replica" in printed, printed
    assert "svc-back: 0.5 CPU enforced by Docker (NanoCpus 500000000)" in printed, printed
    assert "svc-front, with its sidecar: no CPU limit" in printed
    assert_each_limit_refuses_at_its_tier(rows, hops)
    assert_each_service_s_cpu_is_its_container_s(hops)
    # the services' logs are kept; their containers and the run's network are gone
    assert (out / "logs" / "svc-back.log").is_file() and (out / "logs" / "sidecar-svc-front.log").is_file()
    assert docker_json("ps", "-a", "--filter", "label=rbl.plan=two_tier") == []


@pytest.mark.docker
def test_a_fault_at_tier_2_is_injected_by_its_replica_containers(engine, tmp_path):
    _, rows, hops, printed = two_tier_run(tmp_path, "--backend", "docker", *IMAGES, spec=FAULT_AT_BACK)
    assert "svc-back-2: no CPU limit" in printed, printed                # two replica containers of back
    assert_the_back_s_own_faults_are_retried_in_the_front_s_sidecar(rows, hops)
