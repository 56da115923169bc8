"""A plan's topology on the cluster, before its shards start: for every shard, each replica's ConfigMap
and Deployment (rbl/targets/kubernetes/topology_pods.py), created and waited for until every pod is
ready, then one ConfigMap that tells each shard's runner its pods' addresses (the Job's pods mount
it). The objects are the run's, deleted with the rest at the end (driver.py).
"""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

from ...errors import EnvironmentMissing
from ...targets.kubernetes.manifests import MANAGED_BY, PLAN_KEY, pods_configmap, pods_file
from ...targets.kubernetes.topology_pods import (REPLICA_LABEL, SHARD_LABEL, TOPOLOGY_LABEL, pod_replicas,
                                                 pods_document, topology_objects)
from ...topology import topology_from_record

READY_TIMEOUT_S = 300.0
POLL_S = 1.0
# a container that cannot start in any of the pods: every replica uses the same image
UNSTARTABLE = ("ErrImageNeverPull", "ImagePullBackOff", "ErrImagePull", "InvalidImageName",
               "CreateContainerConfigError", "CreateContainerError", "CrashLoopBackOff")


def plan_of(docs: list[dict]) -> dict:
    """The plan the run's ConfigMap carries (its header and scenarios)."""
    configmap = next(d for d in docs if d["kind"] == "ConfigMap" and PLAN_KEY in d.get("data", {}))
    return json.loads(configmap["data"][PLAN_KEY])


def start_topology(cluster, create, docs: list[dict], shards: list[int], work: Path, say) -> None:
    """Each shard's topology pods, ready, and the ConfigMap of their addresses; `create(docs)` creates
    objects as the driver does (and records them for deletion). Nothing when the plan has no topology."""
    plan = plan_of(docs)
    if "topology" not in plan:
        return
    job = next(d for d in docs if d["kind"] == "Job")
    run, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
    container = job["spec"]["template"]["spec"]["containers"][0]
    token = secrets.token_hex(16)              # the replicas answer with it; the shards' runners check it
    replicas = pod_replicas(topology_from_record(plan["topology"]))
    for shard in shards:
        objects = topology_objects(plan, run, namespace, shard, token, container["image"],
                                   container.get("imagePullPolicy", "IfNotPresent"))
        (work / "kubernetes" / f"topology-{shard}.json").write_text(json.dumps(objects, indent=1) + "\n",
                                                                    encoding="utf-8")
        create(objects)
    say(f"kubernetes: topology: {len(replicas)} pod{'s' if len(replicas) != 1 else ''} per shard "
        f"(one per replica), waiting until they are ready")
    pods = _wait_ready(cluster, namespace, run, shards, len(replicas), say)
    data = {}
    for shard in shards:
        placed = []
        for replica in replicas:
            pod = pods[(str(shard), replica.label)]
            service = next(c for c in pod.spec.containers if c.name == "service")
            limit = ((service.resources.limits or {}) if service.resources else {}).get("cpu")
            placed.append((replica, pod.metadata.name, pod.status.pod_ip, limit))
        data[pods_file(shard)] = pods_document(token, placed)
    create([{"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": pods_configmap(run), "namespace": namespace,
                          "labels": {MANAGED_BY: "rbl", TOPOLOGY_LABEL: run}},
             "data": data}])


def _wait_ready(cluster, namespace: str, run: str, shards: list[int], per_shard: int, say) -> dict:
    """{(shard, replica label): its pod}, once every one is ready with an address."""
    wanted = {str(shard) for shard in shards}
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        pods = cluster.core.list_namespaced_pod(namespace, label_selector=f"{TOPOLOGY_LABEL}={run}").items
        ready = {}
        for pod in pods:
            labels = pod.metadata.labels or {}
            if labels.get(SHARD_LABEL) not in wanted or pod.metadata.deletion_timestamp is not None:
                continue
            problem = _unstartable(pod)
            if problem:
                raise EnvironmentMissing(f"the topology's pod {pod.metadata.name} cannot start: {problem}",
                                         hint="the replicas run the runner image (--runner-image): it must hold "
                                              "rbl-chain and Envoy, as rbl's own does")
            if pod.status.pod_ip and _is_ready(pod):
                ready[(labels[SHARD_LABEL], labels[REPLICA_LABEL])] = pod
        if len(ready) == per_shard * len(wanted):
            say(f"kubernetes: topology: {len(ready)} pods ready")
            return ready
        if time.monotonic() > deadline:
            raise EnvironmentMissing(f"the topology's pods were not ready within {READY_TIMEOUT_S:g} s "
                                     f"({len(ready)} of {per_shard * len(wanted)} ready)",
                                     hint=f"kubectl -n {namespace} describe pods -l {TOPOLOGY_LABEL}={run} says why "
                                          "(not schedulable: the services' CPU limits and the shards' --cpu must "
                                          "fit the nodes)")
        time.sleep(POLL_S)


def _is_ready(pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _unstartable(pod) -> str | None:
    for status in [*(pod.status.init_container_statuses or []), *(pod.status.container_statuses or [])]:
        waiting = status.state.waiting if status.state else None
        if waiting and waiting.reason in UNSTARTABLE:
            return f"container {status.name}: {waiting.reason}: {waiting.message or ''}".strip()
        terminated = status.state.terminated if status.state else None
        if terminated and terminated.exit_code not in (0, None) and status.name == "seed":
            return f"container seed exited {terminated.exit_code}: {terminated.message or terminated.reason}"
    return None
