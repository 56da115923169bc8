"""The target under the plan's resources in the docker deployment (target.cpus, target.replicas,
target.noisy_cpus): each replica is a container of its own running httpbin only (`target`,
`target-2`, ...), under Docker's CPU limit (compose `cpus`, the engine's NanoCpus: a CFS quota on
the container's cgroup), and the fault proxy moves to a `proxy` container in front of them that
balances round robin over all (Envoy: one lb_endpoint per replica; rbl's proxy: `--upstream
a,b,...`, one per client connection in turn), as the local backend does with processes.

The proxy gets a container of its own so that no replica shares its budget with the proxy's
filtering. A plan without resources keeps the single target container (proxy and httpbin).

This module takes and returns the deployment's Service records without importing their module
(rbl/targets/compose/deployment.py imports this one); the driver's part (the limit each container got,
what the run prints) is at the end.
"""

from __future__ import annotations

import math
import urllib.request
from dataclasses import replace

from ...dataplane.target_settings import target_environment

PROXY_ROLE = "proxy"
PROXY_SERVICE = "proxy"
DEFAULT_WORKERS = 2          # httpbin's gunicorn workers without a budget (target-entrypoint.sh)
ENDPOINT_STATS_FILE = "proxy-endpoints.txt"


def has_resources(target: dict) -> bool:
    return "cpus" in target or "noisy_cpus" in target or target.get("replicas", 1) > 1


def replica_budgets(target: dict) -> list[float | None]:
    """Each replica's CPU budget: target.cpus, the last one target.noisy_cpus (a noisy neighbour)."""
    budgets = [target.get("cpus")] * target.get("replicas", 1)
    if "noisy_cpus" in target:
        budgets[-1] = target["noisy_cpus"]
    return budgets


def replica_name(index: int) -> str:
    return "target" if index == 0 else f"target-{index + 1}"


def workers_for(cpus: float | None) -> int:
    """As the local backend: one worker per core of the budget (more would only queue on the quota)."""
    return DEFAULT_WORKERS if cpus is None else max(1, math.ceil(cpus))


def replica_upstreams(layout, count: int) -> list[tuple[str, int]]:
    """The replicas' httpbin addresses as the proxy reaches them: by name on the compose network,
    on the loopback with their own ports on the host network."""
    return [("127.0.0.1" if layout.host_network else replica_name(index), layout.replica_port(index))
            for index in range(count)]


def split_target(target, layout, resources: dict) -> list:
    """The single target Service as replicas (first) and the proxy in front of them (last). The
    image is built once, for `target`; the others use it (`pull_policy: never`, as a sidecar does)."""
    shared = dict(build=None, pull_policy="never" if target.build else None)
    replicas = []
    for index, cpus in enumerate(replica_budgets(resources)):
        port = layout.replica_port(index)
        check = f"import urllib.request as u; u.urlopen('http://127.0.0.1:{port}/status/200', timeout=2)"
        replicas.append(replace(
            target, **({} if index == 0 else shared), name=replica_name(index), ports=(), volumes=(), cpus=cpus,
            healthcheck=("CMD", "python", "-c", check),
            environment={"RBL_TARGET_ROLE": "httpbin", "BIND_HOST": layout.bind_host, "HTTPBIN_PORT": str(port),
                         "HTTPBIN_WORKERS": str(workers_for(cpus)), **target_environment(resources)}))
    upstreams = ",".join(f"{host}:{port}" for host, port in replica_upstreams(layout, len(replicas)))
    proxy = replace(target, **shared, name=PROXY_SERVICE, role=PROXY_ROLE,
                    environment={**target.environment, "RBL_TARGET_ROLE": "proxy", "UPSTREAMS": upstreams},
                    depends_on=tuple(replica.name for replica in replicas))
    return [*replicas, proxy]


def replica_port(service) -> int | None:
    """httpbin's port inside a replica container (None for any other service)."""
    if service.environment.get("RBL_TARGET_ROLE") != "httpbin":
        return None
    return int(service.environment["HTTPBIN_PORT"])


# -- the driver's part ---------------------------------------------------------------------------
def nano_cpus(cpus: float) -> int:
    return round(cpus * 1e9)


def describe_targets(deployment, containers: dict, proxy_kind: str) -> str:
    """What runs as the target and which CPU limit the engine holds each container to (read back
    from the containers, not from the plan): `services.target_description`."""
    replicas = [s for s in deployment.services if s.role == "target"]
    if not any(s.role == PROXY_ROLE for s in deployment.services):
        return (f"one container `{replicas[0].name}`: httpbin ({DEFAULT_WORKERS} workers) and the fault proxy, "
                "no CPU limit")
    parts = []
    for service in replicas:
        container = containers[service.name]
        container.reload()
        limit = container.attrs["HostConfig"].get("NanoCpus") or 0
        workers = int(service.environment["HTTPBIN_WORKERS"])
        what = f"{service.name}: {workers} worker{'s' if workers != 1 else ''}"
        parts.append(what + (f", {limit / 1e9:g} CPU enforced by Docker (NanoCpus {limit})" if limit
                             else ", no CPU limit"))
    balancer = "Envoy" if proxy_kind == "envoy" else "rbl's proxy"
    return (f"{len(replicas)} replica container{'s' if len(replicas) != 1 else ''} ({'; '.join(parts)}), "
            f"balanced round robin by {balancer} in container `{PROXY_SERVICE}`")


def save_endpoint_stats(admin_url: str, path) -> None:
    """Envoy's per-endpoint counters (admin /clusters: rq_total, rq_success, ... of each replica)
    kept beside the logs before the proxy container goes; rbl's proxy has none, which is said."""
    try:
        with urllib.request.urlopen(f"{admin_url}/clusters", timeout=3) as answer:
            text = answer.read().decode(errors="replace")
    except OSError as error:
        text = f"the proxy's per-endpoint counters could not be read: {error}\n"
    path.write_text(text, encoding="utf-8")
