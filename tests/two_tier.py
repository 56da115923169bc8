"""2-tier topologies with a sidecar per calling service, judged the same way on every backend that runs
topologies (test_topology_run.py locally, test_docker_topology.py in containers):
- SPEC: a pool limit of 1 placed on the tier-2 service is enforced by the tier-1 service's sidecar
  alone (Envoy's UO: upstream overflow, in the calls of tier 2), and placed on the entry by the
  client's own sidecar alone;
- FAULT_AT_BACK: a fault injected by the tier-2 service itself, retried where the retry is placed."""

from __future__ import annotations

import json
from pathlib import Path

from rbl.store.hops import read_hops

from .conftest import run_rbl

SPEC = """space two_tier {
  users = 6
  successes = 15
  max_requests = 300
  topology {
    service front {
      work = none()
      calls back
    }
    service back {
      work = sleep(20ms)
      cpus = 0.5
    }
  }
  client istio.circuit_breaker {
    http2MaxRequests = 1
    host in [front, back]
  }
}
"""


def two_tier_run(work: Path, *backend: str, spec: str = SPEC) -> tuple[Path, list[dict], list[dict], str]:
    """The run's directory, its result rows, its hop records and what it printed."""
    (work / "two-tier.rbl").write_text(spec)
    done = run_rbl("run", "two-tier.rbl", "-o", "run", *backend, cwd=work, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    out = work / "run"
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return out, rows, list(read_hops(out)), done.stdout + done.stderr


def assert_each_service_s_cpu_is_its_container_s(hops: list[dict]) -> None:
    """In a container or pod of its own, a service's CPU time is its cgroup's, as the engine accounts it."""
    for record in hops:
        services = {s["service"]: s for s in record["services"]}
        assert {s["cpuAccounting"] for s in services.values()} == {"cgroup"}, services
        assert services["back"]["cpuSeconds"] > 0, services


def assert_each_limit_refuses_at_its_tier(rows: list[dict], hops: list[dict]) -> None:
    """host = back: the front's sidecar overflows in its calls of back, the client's sidecar refuses
    nothing (the failures come up the chain as the front's answers); host = front: the reverse."""
    assert len(hops) == 2 and all(record["oracleViolations"] == [] for record in hops), hops
    for host in ("front", "back"):
        mine = [r for r in rows if r["config"]["host"] == host]
        (record,) = [h for h in hops if h["scenarioIndex"] == mine[0]["scenarioIndex"]]
        (edge,) = record["edges"]
        assert (edge["caller"], edge["callee"]) == ("front", "back")
        refused_by_client = sum(r["circuitBrokenRequests"] for r in mine)
        print(f"host = {host}: the client's sidecar refused {refused_by_client}, "
              f"front's sidecar overflowed {edge['sidecarPoolOverflows']} of {edge['calls']} calls of back")
        if host == "back":
            assert edge["sidecarPoolOverflows"] > 0 and refused_by_client == 0
            services = {s["service"]: s for s in record["services"]}
            assert services["front"]["answeredFailed"] > 0        # the refusals went up the chain
        else:
            assert refused_by_client > 0 and edge["sidecarPoolOverflows"] == 0


# A fault at the tier-2 service itself (fault.at), its two replicas each injecting it
FAULT_AT_BACK = """space deep_fault {
  users = 4
  successes = 20
  max_requests = 400
  fault.rate = 50%
  fault.at = back
  topology {
    service front {
      work = none()
      calls back
    }
    service back {
      work = none()
      replicas = 2
    }
  }
  client istio.retry {
    attempts = 3
    retryOn = "5xx"
    host = back
  }
  client istio.baseline {}
}
"""


def assert_the_back_s_own_faults_are_retried_in_the_front_s_sidecar(rows: list[dict], hop_records) -> None:
    """The back's aborts (half its requests) are measured there; the retry placed on the back retries
    them in the front's sidecar; nothing aborts at the entry."""
    hops = {h["client"]: h for h in hop_records}
    for row in rows:
        assert 35 <= row["faultRateApplied"] <= 65, row["faultRateApplied"]    # 50% of the back's requests
        assert row["oracleViolations"] == []
    # the retry placed on the back retries the back's own aborts in the front's sidecar ...
    retried = hops["istio.retry"]["edges"][0]
    assert retried["sidecarRetries"] > 0 and retried["sidecarUpstreamRequests"] > retried["calls"]
    assert hops["istio.retry"]["services"][0]["answeredFailed"] < hops["istio.baseline"]["services"][0]["answeredFailed"]
    # ... and nothing aborts at the entry: the proxy in front of it injected nothing
    baseline = hops["istio.baseline"]
    assert baseline["edges"][0]["sidecarRetries"] == 0
    assert baseline["services"][0]["answeredFailed"] > 0
    assert all(r["circuitBrokenRequests"] == 0 for r in rows)
