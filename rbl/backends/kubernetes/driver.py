"""`rbl run --backend kubernetes`: a plan's shards as an Indexed Job on the user's cluster,
through the official `kubernetes` Python client (docs/backends.md, Running on a cluster).

0. A plan whose client services the runner image does not hold is refused before anything is
   created (rbl/targets/kubernetes/image.py: what rbl's image holds, or what --runner-clients says).
1. The manifests `rbl compile --target kubernetes` writes are written to OUT.shards/kubernetes/rbl.yaml
   and exactly those documents are created (a resume changes only the Job's completions, its
   parallelism and RBL_SHARD_LIST, the shards it re-runs). A plan with a topology gets its replicas'
   Deployments first, ready before the Job (topology.py; OUT.shards/kubernetes/topology-I.json).
2. One progress display over all shards, fed by the pods' own progress lines (their logs).
3. Results come back by exec: each pod, when its `rbl run` has finished, prints a marker and waits;
   the runner streams its run directory out (tar, base64 over the exec channel: no volume, registry
   or object store needed, and nothing leaves the pod before the run is complete), unpacks it into
   OUT.shards/shard-I/, then lets the pod exit. A pod that fails or is evicted is reported with its
   shard, and its log is kept in OUT.shards/pod-logs/.
4. Whatever the runner created is deleted at the end: on success, failure and Ctrl-C (by the
   rbl.dev/run label; the namespace when it is the run's own).
5. The shards are merged into OUT (merge.py). `--resume OUT` re-runs only the shards that did not
   come back finished.
"""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from ...targets.kubernetes.manifests import (COLLECTED_FILE, DONE_MARKER, MANIFEST_FILE, RESULTS_MOUNT, RUN_LABEL,
                                             ClusterOptions, check_image, plan_document, render_manifests, run_name)
from ...errors import EXIT_RUN_FAILED, EnvironmentMissing, UsageError
from .topology import start_topology

POLL_S = 2.0
STATE_FILE = "cluster.json"
_PROGRESS = re.compile(r"(\d+)/(\d+) rounds")
_DONE = re.compile(re.escape(DONE_MARKER) + r" (\d+)")
CLUSTER_ADVICE = ("point --kubeconfig (or KUBECONFIG) and --context at a cluster you can create namespaces, "
                  "configmaps, jobs, deployments (for a topology) and pods/exec in")


@dataclass
class Access:
    kubeconfig: str | None = None
    context: str | None = None


@dataclass
class ShardState:
    shard: int
    pod: str | None = None
    phase: str = "waiting"          # waiting, running, collected, failed
    done: int = 0
    total: int = 0
    detail: str = ""


@dataclass
class Cluster:
    core: object
    batch: object
    api: object
    created: list[tuple[str, str, str]] = field(default_factory=list)    # (kind, namespace, name)

    @property
    def apps(self):
        from kubernetes import client
        return client.AppsV1Api(self.api)


def work_dir(out: Path) -> Path:
    return out.with_name(out.name + ".shards")


def connect(access: Access) -> Cluster:
    try:
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException
    except ImportError:                                            # pragma: no cover - a dependency of rbl
        raise EnvironmentMissing("the kubernetes Python client is not installed", hint="pip install kubernetes")
    try:
        api = config.new_client_from_config(config_file=access.kubeconfig, context=access.context)
    except (ConfigException, OSError, TypeError, ValueError) as error:
        raise EnvironmentMissing(f"no Kubernetes cluster configured: {error}", hint=CLUSTER_ADVICE) from None
    core = client.CoreV1Api(api)
    try:
        client.VersionApi(api).get_code(_request_timeout=15)
    except Exception as error:       # any transport or API failure: the cluster is not reachable
        raise EnvironmentMissing(f"the Kubernetes API server does not answer: {_short(error)}",
                                 hint=CLUSTER_ADVICE) from None
    return Cluster(core, client.BatchV1Api(api), api)


def run_on_cluster(header: dict, scenario_lines, out: Path, options: ClusterOptions, access: Access,
                   console: Console) -> int:
    """A new run: manifests, objects, shards back, merged into `out`."""
    options.check(header["size"])
    work = work_dir(out)
    for path in (out, work):
        if path.exists():
            raise UsageError(f"{path} already exists", hint=f"choose another -o, or continue with --resume {out}")
    # before anything exists: a plan whose clients the runner image lacks, a too-large plan, a service
    # whose name is no object name
    check_image(header, options, lambda text: console.print(text, highlight=False, markup=False))
    if "topology" in header:
        from ...targets.istio import check_service_names
        from ...topology import topology_from_record
        check_service_names(topology_from_record(header["topology"]),
                            "--backend kubernetes names each replica's Deployment after it")
    plan_json = plan_document(header, scenario_lines)
    text = render_manifests(header, plan_json, options)
    cluster = connect(access)
    work.mkdir(parents=True)
    (work / "kubernetes").mkdir()
    (work / MANIFEST_FILE).write_text(text, encoding="utf-8")
    state = {"name": run_name(header, plan_json), "shards": options.shards, "parallelism": options.parallelism,
             "namespace": options.namespace, "out": str(out)}
    (work / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    return _run_shards(cluster, work, out, list(range(options.shards)), options.shards, options.parallelism, console)


def resume_on_cluster(out: Path, access: Access, console: Console) -> int:
    """Re-run the shards of `out` that did not come back finished, then merge."""
    work = work_dir(out) if not out.name.endswith(".shards") else out
    out = work.with_name(work.name[:-len(".shards")])
    try:
        state = json.loads((work / STATE_FILE).read_text(encoding="utf-8"))
        count = int(state["shards"])
    except (OSError, ValueError, KeyError, TypeError):
        raise UsageError(f"{work} is not the shards directory of a Kubernetes run (no readable {STATE_FILE})",
                         hint="give the -o of an earlier `rbl run --backend kubernetes`") from None
    missing = [k for k in range(count) if not _finished(work / f"shard-{k}")]
    if out.exists():
        raise UsageError(f"{out} already exists: the run was merged", hint="nothing to resume")
    if missing:
        console.print(f"resuming: shard{'s' if len(missing) != 1 else ''} {', '.join(map(str, missing))} of {count} "
                      f"to run again", highlight=False)
        for k in missing:
            shutil.rmtree(work / f"shard-{k}", ignore_errors=True)
        return _run_shards(connect(access), work, out, missing, count, state.get("parallelism"), console)   # merges
    return _merge(work, out, count, console)


class KubernetesBackend:
    """`rbl run --backend kubernetes`: whole runs elsewhere (runner/backend.py's WholeRunBackend),
    each shard a pod of a Job running the local backend, the shards merged into one run here."""

    name = "kubernetes"

    def __init__(self, options: ClusterOptions, access: Access):
        self.options = options
        self.access = access

    def run(self, header: dict, scenario_lines, out: Path, console: Console) -> int:
        return run_on_cluster(header, scenario_lines, out, self.options, self.access, console)

    def resume(self, out: Path, console: Console) -> int:
        return resume_on_cluster(out, self.access, console)


def _finished(shard_dir: Path) -> bool:
    try:
        manifest = json.loads((shard_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return manifest.get("status") == "finished"


def _documents(work: Path) -> list[dict]:
    import yaml
    return [d for d in yaml.safe_load_all((work / MANIFEST_FILE).read_text(encoding="utf-8")) if d]


def _run_shards(cluster: Cluster, work: Path, out: Path, shards: list[int], count: int, parallelism: int | None,
                console: Console) -> int:
    docs = _documents(work)
    job = next(d for d in docs if d["kind"] == "Job")
    name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
    if shards != list(range(count)):          # a resume: the same Job, for the missing shards only
        job["spec"]["completions"] = len(shards)
        job["spec"]["maxFailedIndexes"] = len(shards)
        job["spec"]["parallelism"] = min(parallelism or len(shards), len(shards))
        env = job["spec"]["template"]["spec"]["containers"][0]["env"]
        next(e for e in env if e["name"] == "RBL_SHARD_LIST")["value"] = ",".join(map(str, shards))
    states = {k: ShardState(k) for k in shards}
    (work / "pod-logs").mkdir(exist_ok=True)
    from ...runner.interrupts import sigterm_as_interrupt
    try:
        with sigterm_as_interrupt():           # SIGTERM cleans up as Ctrl-C does
            # the Job last: a topology's pods must be ready, and their addresses known, before a shard starts
            _create(cluster, [d for d in docs if d["kind"] != "Job"], name)
            start_topology(cluster, lambda objects: _create(cluster, objects, name), docs, shards, work,
                           lambda text: console.print(text, highlight=False, markup=False))
            _create(cluster, [d for d in docs if d["kind"] == "Job"], name)
            console.print(f"kubernetes: job {name} in namespace {namespace}: {len(shards)} shard"
                          f"{'s' if len(shards) != 1 else ''} of {count}", highlight=False)
            _watch(cluster, work, namespace, name, shards, states, console)
    finally:
        _delete(cluster, console)
    failed = [s for s in states.values() if s.phase != "collected"]
    if failed:
        for state in failed:
            console.print(f"shard {state.shard}/{count} failed: {state.detail or state.phase}"
                          f"{f' (pod {state.pod}; log in {work}/pod-logs/shard-{state.shard}.log)' if state.pod else ''}",
                          highlight=False, markup=False)
        console.print(f"the other shards' results are kept in {work}; run the failed ones again with "
                      f"`rbl run --backend kubernetes --resume {out}`", highlight=False, markup=False)
        return EXIT_RUN_FAILED
    unfinished = [k for k in shards if not _finished(work / f"shard-{k}")]
    if unfinished:
        console.print(f"shard{'s' if len(unfinished) != 1 else ''} {', '.join(map(str, unfinished))} came back with "
                      f"failed rounds (see their run directories in {work}); run them again with "
                      f"`rbl run --backend kubernetes --resume {out}`", highlight=False, markup=False)
        return EXIT_RUN_FAILED
    return _merge(work, out, count, console)


def _merge(work: Path, out: Path, count: int, console: Console) -> int:
    from ...store.merge import describe, merge
    result = merge([work / f"shard-{k}" for k in range(count)], out,
                   say=lambda text: console.print(text, highlight=False, markup=False))
    if result.out is not None:
        console.print(describe(result), highlight=False, markup=False)
    return result.code


# -- the API ------------------------------------------------------------------------------------
def _create(cluster: Cluster, docs: list[dict], name: str) -> None:
    from kubernetes.client.exceptions import ApiException
    for doc in docs:
        kind, meta = doc["kind"], doc["metadata"]
        try:
            if kind == "Namespace":
                cluster.core.create_namespace(doc)
            elif kind == "ConfigMap":
                cluster.core.create_namespaced_config_map(meta["namespace"], doc)
            elif kind == "Job":
                cluster.batch.create_namespaced_job(meta["namespace"], doc)
            elif kind == "Deployment":
                cluster.apps.create_namespaced_deployment(meta["namespace"], doc)
            else:                                                      # pragma: no cover - rbl writes these kinds
                raise UsageError(f"unexpected {kind} in the manifests")
        except ApiException as error:
            if error.status == 409:
                raise EnvironmentMissing(f"{kind} {meta['name']} already exists in the cluster: another run of this "
                                         f"plan, or one that was not cleaned up",
                                         hint=f"delete it (kubectl delete {kind.lower()} -l {RUN_LABEL}={name}"
                                              f"{' -A' if kind != 'Namespace' else ''}) or wait for that run") from None
            raise EnvironmentMissing(f"the cluster refused the {kind} {meta['name']}: {_api_reason(error)}",
                                     hint=CLUSTER_ADVICE) from None
        cluster.created.append((kind, meta.get("namespace", ""), meta["name"]))


def _delete(cluster: Cluster, console: Console) -> None:
    """Delete what this run created, newest first; a namespace of the run's own takes the rest
    with it. Never raises: the error that ended the run is the one the user must see."""
    from kubernetes.client import V1DeleteOptions
    options = V1DeleteOptions(propagation_policy="Background", grace_period_seconds=0)
    for kind, namespace, name in reversed(cluster.created):
        try:
            if kind == "Job":
                cluster.batch.delete_namespaced_job(name, namespace, body=options)
                cluster.core.delete_collection_namespaced_pod(namespace, label_selector=f"{RUN_LABEL}={name}",
                                                              grace_period_seconds=0)
            elif kind == "Deployment":       # with its ReplicaSet and pod
                cluster.apps.delete_namespaced_deployment(name, namespace, body=options)
            elif kind == "ConfigMap":
                cluster.core.delete_namespaced_config_map(name, namespace)
            elif kind == "Namespace":
                cluster.core.delete_namespace(name, body=options)
        except Exception as error:                  # keep deleting the rest
            if getattr(error, "status", None) != 404:
                console.print(f"warning: could not delete {kind} {name}: {_short(error)}", highlight=False,
                              markup=False)
    cluster.created.clear()


def _watch(cluster: Cluster, work: Path, namespace: str, name: str, shards: list[int],
           states: dict[int, ShardState], console: Console) -> None:
    display = _Display(console, len(shards))
    try:
        while any(s.phase not in ("collected", "failed") for s in states.values()):
            pods = cluster.core.list_namespaced_pod(namespace, label_selector=f"{RUN_LABEL}={name}").items
            for pod in pods:
                index = int(pod.metadata.annotations.get("batch.kubernetes.io/job-completion-index", -1))
                if not 0 <= index < len(shards):
                    continue
                state = states[shards[index]]
                if state.phase in ("collected", "failed") and state.pod == pod.metadata.name:
                    continue
                state.pod = pod.metadata.name
                try:
                    _observe(cluster, work, namespace, pod, state)
                except _ImageUnusable as unusable:
                    for other in states.values():
                        if other.phase not in ("collected", "failed"):
                            other.phase, other.detail = "failed", f"not started: {unusable}"
                    return
            _failed_indexes(cluster, namespace, name, shards, states)
            display.show(states.values())
            time.sleep(POLL_S)
    finally:
        display.close(states.values())


class _ImageUnusable(Exception):
    """The runner image cannot be pulled or started on the cluster."""


def _failed_indexes(cluster: Cluster, namespace: str, name: str, shards: list[int],
                    states: dict[int, ShardState]) -> None:
    """Indexes the Job gave up on (a pod deleted, evicted or failed, and gone before we saw it end)."""
    try:
        job = cluster.batch.read_namespaced_job(name, namespace)
    except Exception:
        return
    for part in filter(None, (job.status.failed_indexes or "").split(",")):
        low, _, high = part.partition("-")
        for index in range(int(low), int(high or low) + 1):
            state = states.get(shards[index]) if 0 <= index < len(shards) else None
            if state is not None and state.phase not in ("collected", "failed"):
                state.phase = "failed"
                state.detail = state.detail or "the Job counts this shard as failed (its pod was deleted or evicted)"


def _observe(cluster: Cluster, work: Path, namespace: str, pod, state: ShardState) -> None:
    phase = pod.status.phase
    waiting = _waiting_reason(pod)
    if phase == "Pending":
        state.phase = "waiting"
        if waiting in ("ErrImageNeverPull", "ImagePullBackOff", "ErrImagePull", "InvalidImageName",
                       "CreateContainerConfigError", "CreateContainerError"):
            state.phase, state.detail = "failed", f"{waiting}: {_waiting_message(pod)}"
            _save_log(cluster, work, namespace, pod, state)
            raise _ImageUnusable(state.detail)       # every shard uses the same image: none can start
        else:
            state.detail = _unscheduled(pod) or waiting or ""
        return
    if phase == "Running":
        state.phase = "running"
        log = _log(cluster, namespace, pod.metadata.name, tail=20)
        for line in reversed(log.splitlines()):
            progress = _PROGRESS.search(line)
            if progress:
                state.done, state.total = int(progress.group(1)), int(progress.group(2))
                break
        if _DONE.search(log):
            _collect(cluster, work, namespace, pod, state)
        return
    # Succeeded or Failed without the runner having collected: nothing can be copied any more
    state.phase = "failed"
    state.detail = _termination(pod) or f"the pod ended ({phase}) before its results were copied"
    _save_log(cluster, work, namespace, pod, state)


def _collect(cluster: Cluster, work: Path, namespace: str, pod, state: ShardState) -> None:
    """Copy the pod's run directory out, then let the pod finish."""
    shard_dir = f"shard-{state.shard}"
    encoded, code = _exec(cluster, namespace, pod.metadata.name,
                          f"tar -C {RESULTS_MOUNT} -czf - {shard_dir} | base64")
    if code != 0 or not encoded.strip():
        state.phase, state.detail = "failed", f"copying the results out of the pod failed (exit {code})"
        _save_log(cluster, work, namespace, pod, state)
        return
    destination = work / "incoming"
    shutil.rmtree(destination, ignore_errors=True)
    destination.mkdir()
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(encoded)), mode="r:gz") as archive:
        archive.extractall(destination, filter="data")      # no links out, no absolute paths, no devices
    if not (destination / shard_dir / "manifest.json").is_file():
        state.phase, state.detail = "failed", "the pod's results hold no run directory"
        return
    shutil.rmtree(work / shard_dir, ignore_errors=True)
    (destination / shard_dir).rename(work / shard_dir)
    destination.rmdir()
    _save_log(cluster, work, namespace, pod, state)
    _exec(cluster, namespace, pod.metadata.name, f"touch {RESULTS_MOUNT}/{COLLECTED_FILE}")
    state.phase = "collected"


def _exec(cluster: Cluster, namespace: str, pod: str, command: str) -> tuple[str, int | None]:
    from kubernetes.stream import stream
    response = stream(cluster.core.connect_get_namespaced_pod_exec, pod, namespace, container="shard",
                      command=["/bin/sh", "-c", command], stderr=True, stdin=False, stdout=True, tty=False,
                      _preload_content=False)
    chunks = []
    try:
        while response.is_open():
            response.update(timeout=1)
            if response.peek_stdout():
                chunks.append(response.read_stdout())
            if response.peek_stderr():
                response.read_stderr()
        chunks.append(response.read_stdout() if response.peek_stdout() else "")
    finally:
        response.close()
    return "".join(chunks), response.returncode


def _log(cluster: Cluster, namespace: str, pod: str, tail: int | None = None) -> str:
    try:
        return cluster.core.read_namespaced_pod_log(pod, namespace, container="shard", tail_lines=tail)
    except Exception:          # not started yet, or gone: nothing to read now
        return ""


def _save_log(cluster: Cluster, work: Path, namespace: str, pod, state: ShardState) -> None:
    text = _log(cluster, namespace, pod.metadata.name)
    (work / "pod-logs" / f"shard-{state.shard}.log").write_text(
        f"# pod {pod.metadata.name} on node {pod.spec.node_name}: {state.detail or state.phase}\n{text}",
        encoding="utf-8")


def _waiting_reason(pod) -> str | None:
    for status in pod.status.container_statuses or []:
        if status.state and status.state.waiting:
            return status.state.waiting.reason
    return None


def _waiting_message(pod) -> str:
    for status in pod.status.container_statuses or []:
        if status.state and status.state.waiting:
            return status.state.waiting.message or ""
    return ""


def _unscheduled(pod) -> str | None:
    for condition in pod.status.conditions or []:
        if condition.type == "PodScheduled" and condition.status == "False":
            return f"not scheduled: {condition.message}"
    return None


def _termination(pod) -> str | None:
    if pod.status.reason:                                   # Evicted, with the kubelet's message
        return f"{pod.status.reason}: {pod.status.message or ''}".strip()
    for status in pod.status.container_statuses or []:
        terminated = status.state.terminated if status.state else None
        if terminated:
            return f"container {terminated.reason or 'terminated'} with exit code {terminated.exit_code}"
    return None


def _api_reason(error) -> str:
    try:
        return json.loads(error.body).get("message") or str(error.reason)
    except (TypeError, ValueError, AttributeError):
        return str(getattr(error, "reason", error))


def _short(error: object, limit: int = 300) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[:limit] + "..."


class _Display:
    """One progress display over all shards: a line that rewrites itself on a terminal, plain
    lines at most every 10 s elsewhere."""

    def __init__(self, console: Console, shards: int):
        self.console, self.shards = console, shards
        self.started = time.monotonic()
        self.last_line = float("-inf")
        self.last_text = ""
        self.status = console.status("kubernetes: starting") if console.is_terminal else None
        if self.status:
            self.status.start()

    def _text(self, states) -> str:
        states = list(states)
        counts = {p: sum(1 for s in states if s.phase == p) for p in ("waiting", "running", "collected", "failed")}
        done, total = sum(s.done for s in states), sum(s.total for s in states)
        if any(s.phase == "collected" for s in states):
            done = sum(s.total if s.phase == "collected" else s.done for s in states)
        waiting = next((s.detail for s in states if s.phase == "waiting" and s.detail), "")
        return (f"[{int(time.monotonic() - self.started)} s] shards: {counts['collected']} done, {counts['running']} "
                f"running, {counts['waiting']} waiting, {counts['failed']} failed; rounds {done}/{total or '?'} "
                f"reported{f'; {waiting}' if waiting else ''}")

    def show(self, states) -> None:
        text = self._text(states)
        if self.status:
            self.status.update(text)
            return
        now = time.monotonic()
        if text != self.last_text and now - self.last_line >= 10:
            self.console.print(text, highlight=False, markup=False)
            self.last_line, self.last_text = now, text

    def close(self, states) -> None:
        if self.status:
            self.status.stop()
        self.console.print(self._text(states), highlight=False, markup=False)

