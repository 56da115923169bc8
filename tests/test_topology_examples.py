"""The papers' call-chain results in shape, on real rbl-chain services under cgroup budgets and real
sidecar Envoys (small: one round, short rounds; budgets of 0.25-0.5 CPU fit 2 cores):
examples/boutique-cart.rbl (ICPE '22 Fig. 4: where the circuit breaker is),
examples/retry-storm.rbl (Fig. 7: a retry multiplied by a short queue deep in the chain) and
examples/noisy-neighbour.rbl (IC2E '23 Table V in shape: retrying elsewhere and ejecting a slow replica)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rbl.store.hops import read_hops

from .artifact_check import check_istio
from .conftest import REPO, run_rbl

SHORT = ("--rounds", "1", "--set", "load.duration=8s", "--set", "load.warmup=2s")


def run_example(root: Path, name: str, *overrides: str) -> tuple[list[dict], list[dict], str]:
    done = run_rbl("run", str(REPO / "examples" / name), "-o", str(root / "run"), *SHORT, *overrides, cwd=root,
                   timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in (root / "run" / "results.jsonl").read_text().splitlines()]
    return rows, list(read_hops(root / "run")), done.stdout + done.stderr


def other_cores(root: Path) -> float:
    """The cores other processes used while the rounds ran, as the runner measured (0: not measured)."""
    manifest = json.loads((root / "run" / "manifest.json").read_text())
    return (manifest["sessions"][-1].get("otherWork") or {}).get("otherCores", 0.0)


@pytest.fixture(scope="module")
def cart(tmp_path_factory):
    # at the paper's 120% a short round queues only a fifth of the capacity per second beyond what is
    # served: a pool of 20 fills late or not at all (seen at tier 1 and at tier 3, on a quiet machine
    # and a busy one), and a capacity measured 20% high leaves no overload. At 200% it fills within
    # the warm-up wherever it is placed; the shape the paper reports is the same
    root = tmp_path_factory.mktemp("cart")
    return (*run_example(root, "boutique-cart.rbl", "--set", "load.rate=200%"), other_cores(root))


@pytest.fixture(scope="module")
def storm(tmp_path_factory):
    # at the example's 100% a short round sits on the knife's edge: a clean-clone suite run here
    # calibrated the chain at 56.8 req/s (a 100 req/s step served 43 and 60), and then neither pool
    # met a queue at productcatalog (both carried 100%, no refusal). At 200% the short pool fills
    # within the warm-up, as the cart example's does
    return run_example(tmp_path_factory.mktemp("storm"), "retry-storm.rbl", "--set", "load.rate=200%")


def _placed(rows: list[dict], hops: list[dict], host: str) -> tuple[dict, dict]:
    (row,) = [r for r in rows if r["config"]["host"] == host]
    (record,) = [h for h in hops if h["scenarioId"] == row["scenarioId"]]
    return row, record


def test_breaking_at_tier_1_fails_fast_and_wastes_less_than_at_tier_3(cart):
    rows, hops, output, crowded_by = cart
    assert "NOT enforced" not in output, output            # the budgets are what makes the chain saturate
    tier1, tier1_hops = _placed(rows, hops, "frontend")
    tier3, tier3_hops = _placed(rows, hops, "productcatalog")
    # overloaded, both refuse; tier 1 at the client's sidecar, before any work is done
    assert tier1["circuitBrokenShare"] > 0 and tier1_hops["wastedCpuSeconds"] == 0
    assert all(e["sidecarPoolOverflows"] == 0 for e in tier1_hops["edges"])
    assert any(e["sidecarPoolOverflows"] > 0 for e in tier3_hops["edges"] if e["callee"] == "productcatalog")
    # less CPU goes to requests refused late, and the requests that succeed are answered sooner. One
    # round of each, one after the other: with a core or more of other work beside them (the runner
    # measures it and says so), their tails measure the neighbours as much as the placement
    assert tier1_hops["wastedCpuSeconds"] < tier3_hops["wastedCpuSeconds"]
    if crowded_by < 1.0:
        assert tier1["successP95Ms"] < tier3["successP95Ms"], (tier1["successP95Ms"], tier3["successP95Ms"])
    else:
        assert "other processes used" in output, output
    assert all(h["oracleViolations"] == [] for h in hops)


def test_a_short_queue_deep_in_the_chain_makes_the_retry_a_storm(storm):
    rows, hops, _ = storm
    by_pool = {r["config"]["circuit_breaker.http2MaxRequests"]: r for r in rows}
    records = {pool: next(h for h in hops if h["scenarioId"] == row["scenarioId"]) for pool, row in by_pool.items()}
    short, long = records[1], records[1024]
    overflows = lambda record: sum(e["sidecarPoolOverflows"] for e in record["edges"])  # noqa: E731
    # more circuit-broken requests with the short pool (at tier 3: the callers' sidecars refuse them) ...
    assert overflows(short) > 0 and overflows(long) == 0
    # ... and the refusals come back as failures of the whole request, which the retry in front of the
    # entry sends down the chain again: more entry requests per request the load sent
    assert by_pool[1]["sidecarRetries"] > 0 and by_pool[1024]["sidecarRetries"] == 0
    amplified = {pool: row["sidecarUpstreamRequests"] / (row["sidecarUpstreamRequests"] - row["sidecarRetries"])
                 for pool, row in by_pool.items()}
    assert amplified[1024] == 1.0 and amplified[1] > 1.0, amplified
    assert all(h["oracleViolations"] == [] for h in hops)


@pytest.fixture(scope="module")
def noisy(tmp_path_factory):
    root = tmp_path_factory.mktemp("noisy")
    return (*run_example(root, "noisy-neighbour.rbl"), other_cores(root))


def test_retrying_elsewhere_and_ejecting_the_noisy_replica_carries_more(noisy):
    rows, hops, output, crowded_by = noisy
    assert "productcatalog 3/3: 0.1 CPU" in output and "NOT enforced" not in output
    by_client = {r["client"]: r for r in rows}
    edge = {h["client"]: h["edges"][0] for h in hops}
    # the default retry waits for the noisy replica; requests there outlast the load's 100 ms
    assert by_client["istio_default"]["timedOutShare"] > 0
    assert edge["istio_default"]["sidecarEjections"] == 0 and edge["istio_default"]["sidecarRetries"] == 0
    # the short per-try timeout retries a slow try on another replica ...
    assert edge["retry_elsewhere"]["sidecarPerTryTimeouts"] > 0 and edge["retry_elsewhere"]["sidecarRetries"] > 0
    assert by_client["retry_elsewhere"]["successP95Ms"] < by_client["istio_default"]["successP95Ms"]
    if crowded_by < 1.0:
        # ... and outlier detection ejects the noisy replica after three timeouts in a row there. With a
        # core or more of other work beside the replicas, the healthy ones miss their quotas too: the
        # timeouts fall on every replica, between successes, and the noisy one is no longer the one
        # that keeps failing (a suite run beside two busy loops saw 25 per-try timeouts, no ejection)
        assert edge["retry_elsewhere"]["sidecarEjections"] > 0
        assert by_client["retry_elsewhere"]["carriedThroughput"] > by_client["istio_default"]["carriedThroughput"]
    else:
        assert "other processes used" in output, output
        assert by_client["retry_elsewhere"]["carriedThroughput"] >= by_client["istio_default"]["carriedThroughput"]
    assert all(h["oracleViolations"] == [] for h in hops)


@pytest.mark.parametrize("example", ["boutique-cart.rbl", "retry-storm.rbl", "noisy-neighbour.rbl"])
def test_the_examples_policies_pass_istios_validation(tmp_path, example):
    done = run_rbl("compile", str(REPO / "examples" / example), "--target", "istio", "-o", str(tmp_path / "out"),
                   cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    files = sorted((tmp_path / "out" / "istio").rglob("*.yaml"))
    assert files and check_istio(*files).returncode == 0
