"""`rbl compile --target kubernetes`: the manifests that run a plan's shards on a cluster
(docs/backends.md, Running on a cluster), and the runner image's build context.

Three objects in kubernetes/rbl.yaml, each labelled app.kubernetes.io/managed-by=rbl and
rbl.dev/run=NAME so that whoever created them can find and delete them all:
  - a Namespace of the run's own (unless the user names an existing one);
  - a ConfigMap holding the plan (plan.json with its scenarios inline);
  - an Indexed Job: completions = shards, parallelism from the command line; pod I runs
    `rbl run plan.json --shard I/N` on the embedded default inside the pod (target, proxy and
    clients on the pod's own loopback, exactly as locally), then waits until the runner has
    copied its run directory out (or a timeout), and exits with rbl's exit code.
Isolation: requests equal limits (Guaranteed QoS: the CPU the shard measures with is its own),
and a required pod anti-affinity on the node (no two shards share a node) unless the user allows
it. `rbl run --backend kubernetes` applies exactly these documents (rbl/backends/kubernetes/driver.py).
The runner image (kubernetes/image/, image.py) holds every client service rbl builds;
the Job's annotation rbl.dev/runner-clients says which, and a plan needing others is refused.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from ... import __version__
from ...errors import UsageError
from .image import CLIENT_LABEL, CLIENTS_ANNOTATION, RUNNER_CLIENTS, check_image_reference, check_runner_image
from ...yaml_text import comment_text, yaml_quote

MANIFEST_FILE = "kubernetes/rbl.yaml"
IMAGE_CONTEXT = "kubernetes/image"              # the runner image's build context
MANAGED_BY = "app.kubernetes.io/managed-by"
RUN_LABEL = "rbl.dev/run"
PLAN_KEY = "plan.json"
PLAN_MOUNT = "/etc/rbl"
RESULTS_MOUNT = "/results"
DONE_MARKER = "rbl-shard: finished with exit code"     # the pod's last line before it waits
COLLECTED_FILE = "collected"                              # the runner's signal that it has the results
CONFIGMAP_LIMIT = 1_000_000                               # bytes: the API server refuses larger objects
# a plan with a topology: its pods' addresses, a ConfigMap the runner creates once they are ready
# (topology_pods.py), mounted into every shard's pod
PODS_MOUNT = "/etc/rbl-topology"
_QUANTITY = re.compile(r"[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def pods_file(shard: int | str) -> str:
    return f"topology-pods-{shard}.json"


def pods_configmap(run: str) -> str:
    return f"{run}-topology"


def runner_image() -> str:
    return f"rbl/runner:{__version__}"


@dataclass
class ClusterOptions:
    shards: int = 1
    parallelism: int | None = None          # default: all shards at once
    namespace: str | None = None            # default: one of the run's own, created and deleted
    create_namespace: bool = True
    cpu: str = "1"
    memory: str = "2Gi"
    spread: bool = True                     # required anti-affinity: no two shards on one node
    image: str = ""
    # the client kinds the image holds: rbl's own image all of them; a user's what --runner-clients
    # says, or None (not known: not checked)
    runner_clients: tuple[str, ...] | None = RUNNER_CLIENTS
    pull_policy: str = "IfNotPresent"
    collect_timeout_s: int = 3600           # how long a finished pod waits for the runner

    def check(self, size: int) -> None:
        if not 1 <= self.shards <= size:
            raise UsageError(f"--shards {self.shards}: the plan has {size} scenarios",
                             hint=f"use 1 to {size} shards (a shard runs whole scenarios)")
        if self.parallelism is not None and not 1 <= self.parallelism:
            raise UsageError("--parallelism must be at least 1")
        for name, value in (("--cpu", self.cpu), ("--memory", self.memory)):
            if not _QUANTITY.fullmatch(value or ""):
                raise UsageError(f"{name} {value!r} is not a Kubernetes quantity",
                                 hint="for example --cpu 2 or --cpu 1500m, --memory 2Gi")
        if self.namespace is not None and not _DNS_LABEL.fullmatch(self.namespace):
            raise UsageError(f"--namespace {self.namespace!r} is not a valid namespace name",
                             hint="lower-case letters, digits and '-', at most 63 characters")
        if self.image:                      # "" is rbl's own image
            check_image_reference(self.image)
        if self.pull_policy not in ("Always", "IfNotPresent", "Never"):
            raise UsageError(f"--image-pull-policy must be Always, IfNotPresent or Never, got {self.pull_policy!r}")


def run_name(header: dict, plan_json: str) -> str:
    """rbl-NAME-DIGEST: a valid DNS label, the same for the same plan (the Job's and namespace's name)."""
    stem = re.sub(r"[^a-z0-9-]+", "-", str(header.get("name", "run")).lower()).strip("-")[:40].strip("-") or "run"
    digest = hashlib.sha256(plan_json.encode("utf-8")).hexdigest()[:8]
    return f"rbl-{stem}-{digest}"


def plan_document(header: dict, scenario_lines) -> str:
    """plan.json with its scenarios inline, as the pods read it from the ConfigMap."""
    head = {k: v for k, v in header.items() if k != "scenarios_file"}
    body = json.dumps(head, separators=(",", ":"), ensure_ascii=False)[:-1]
    return body + ',"scenarios":[' + ",".join(scenario_lines) + "]}"


def shard_script(options: ClusterOptions, topology: bool = False) -> str:
    """The pod's command: run its shard (against its topology's pods, which the runner placed before
    the Job), say so, keep the results until the runner has them."""
    pods = f' --topology-pods "{PODS_MOUNT}/{pods_file("$shard")}"' if topology else ""
    return (
        'set -u\n'
        'shard="${RBL_SHARD_LIST:+$(echo "$RBL_SHARD_LIST" | cut -d, -f$((JOB_COMPLETION_INDEX + 1)))}"\n'
        'shard="${shard:-$JOB_COMPLETION_INDEX}"\n'
        f'python3 -m rbl run {PLAN_MOUNT}/{PLAN_KEY} --shard "$shard/$RBL_SHARDS" -o "{RESULTS_MOUNT}/shard-$shard"{pods} '
        '$RBL_RUN_ARGS\n'      # --proxy auto: Envoy where the image has it (rbl's runner image does)
        'code=$?\n'
        f'echo "$shard" > {RESULTS_MOUNT}/shard\n'
        f'echo "{DONE_MARKER} $code (shard $shard/$RBL_SHARDS)"\n'
        'waited=0\n'
        f'while [ ! -e {RESULTS_MOUNT}/{COLLECTED_FILE} ] && [ "$waited" -lt "$RBL_COLLECT_TIMEOUT" ]; do '
        'sleep 1; waited=$((waited + 1)); done\n'
        'exit "$code"\n')


def render_manifests(header: dict, plan_json: str, options: ClusterOptions) -> str:
    """The YAML stream (Namespace, ConfigMap, Job). Every value from the plan goes through
    yaml_quote; the plan itself is one JSON string."""
    if len(plan_json.encode("utf-8")) > CONFIGMAP_LIMIT:
        raise UsageError(f"the plan is {len(plan_json.encode()) // 1000} kB, more than a ConfigMap holds "
                         f"({CONFIGMAP_LIMIT // 1000} kB)",
                         hint="split the spec into smaller ones (fewer scenarios per plan)")
    name = run_name(header, plan_json)
    namespace = options.namespace or name
    image = options.image or runner_image()
    labels = f"{{{MANAGED_BY}: rbl, {RUN_LABEL}: {name}}}"
    q = yaml_quote
    out = [f"# rbl {__version__}: {comment_text(header.get('name'))}, {header['size']} scenarios in "
           f"{options.shards} shards. Apply with `rbl run --backend kubernetes` (it also brings the results",
           "# back and removes these objects), or with kubectl: see docs/backends.md, Running on a cluster."]
    if options.create_namespace:
        out += ["apiVersion: v1", "kind: Namespace", "metadata:", f"  name: {namespace}",
                f"  labels: {labels}", "---"]
    out += ["apiVersion: v1", "kind: ConfigMap", "metadata:", f"  name: {name}-plan", f"  namespace: {namespace}",
            f"  labels: {labels}", "data:", f"  {PLAN_KEY}: {q(plan_json)}", "---"]
    parallelism = min(options.parallelism or options.shards, options.shards)
    affinity = []
    if options.spread:
        affinity = ["      affinity:", "        podAntiAffinity:",
                    "          requiredDuringSchedulingIgnoredDuringExecution:",
                    f"          - labelSelector: {{matchLabels: {{{RUN_LABEL}: {name}}}}}",
                    "            topologyKey: kubernetes.io/hostname"]
    resources = f"{{cpu: {q(options.cpu)}, memory: {q(options.memory)}}}"
    annotations = []
    if options.runner_clients is not None:       # what the image holds, for whoever applies this
        annotations = [f"  annotations: {{{CLIENTS_ANNOTATION}: {q(','.join(options.runner_clients))}}}"]
    topology_mount = []
    if "topology" in header:
        topology_mount = [f"        - {{name: topology, mountPath: {PODS_MOUNT}, readOnly: true}}",
                          f"      - {{name: topology, configMap: {{name: {pods_configmap(name)}}}}}"]
    out += ["apiVersion: batch/v1", "kind: Job", "metadata:", f"  name: {name}", f"  namespace: {namespace}",
            f"  labels: {labels}", *annotations, "spec:", "  completionMode: Indexed", f"  completions: {options.shards}",
            f"  parallelism: {parallelism}",
            "  backoffLimitPerIndex: 0         # a failed shard is reported, not retried: rerun it with --resume",
            f"  maxFailedIndexes: {options.shards}",
            "  template:", "    metadata:", f"      labels: {labels}", "    spec:",
            "      restartPolicy: Never", "      enableServiceLinks: false",
            "      automountServiceAccountToken: false",
            "      terminationGracePeriodSeconds: 30", *affinity,
            "      containers:", "      - name: shard", f"        image: {q(image)}",
            f"        imagePullPolicy: {options.pull_policy}",
            f"        command: [\"/bin/sh\", \"-c\", {q(shard_script(options, 'topology' in header))}]",
            "        env:", f"        - {{name: RBL_SHARDS, value: {q(options.shards)}}}",
            "        - {name: RBL_SHARD_LIST, value: \"\"}",
            "        - {name: RBL_RUN_ARGS, value: \"\"}",
            f"        - {{name: RBL_COLLECT_TIMEOUT, value: {q(options.collect_timeout_s)}}}",
            "        resources:", f"          requests: {resources}", f"          limits: {resources}",
            "        volumeMounts:", f"        - {{name: plan, mountPath: {PLAN_MOUNT}, readOnly: true}}",
            f"        - {{name: results, mountPath: {RESULTS_MOUNT}}}", *topology_mount[:1],
            "      volumes:", f"      - {{name: plan, configMap: {{name: {name}-plan}}}}",
            "      - {name: results, emptyDir: {}}", *topology_mount[1:]]
    return "\n".join(out) + "\n"


def runner_dockerfile() -> str:
    from ...templating import render
    from ..client_builds import BUILT_CLIENTS, cached_artifact
    from ..envoy_binary import ENVOY_REQUIREMENT
    from .image import CACHE_DIR, LINKED_TOOLS, SOURCES_DIR
    linked = {path: cached_artifact(kind).name for kind, path in LINKED_TOOLS.items()}
    return render("kubernetes/runner.Dockerfile", clients=RUNNER_CLIENTS, built=BUILT_CLIENTS, label=CLIENT_LABEL,
                  sources=SOURCES_DIR, cache=CACHE_DIR, envoy_requirement=ENVOY_REQUIREMENT, linked=linked)


def check_image(header: dict, options: ClusterOptions, say) -> None:
    """The plan's clients against what the runner image holds (image.check_runner_image)."""
    check_runner_image(header, options.image or runner_image(), options.runner_clients, say)


def write_kubernetes(header: dict, scenario_lines, out_dir, options: ClusterOptions, say=lambda _: None) -> list:
    """kubernetes/rbl.yaml and the runner image's build context (kubernetes/image/), through
    output_dir.write_file like every compiled file (never written through a link); the clients
    are built here first when the user's cache lacks them (image.write_image_context)."""
    from ...templating import render
    from ..output_dir import write_file
    from ..packaging import copy_rbl_package, runtime_requirements
    from .image import write_image_context
    options.check(header["size"])
    plan_json = plan_document(header, scenario_lines)
    texts = {MANIFEST_FILE: render_manifests(header, plan_json, options),
             IMAGE_CONTEXT + "/Dockerfile": runner_dockerfile(),
             IMAGE_CONTEXT + "/rbl/pyproject.toml": render("docker/rbl-pyproject.toml",
                                                           requirements=runtime_requirements())}
    written = [write_file(out_dir, name, text.encode("utf-8")) for name, text in texts.items()]
    package = out_dir / IMAGE_CONTEXT / "rbl" / "rbl"
    copy_rbl_package(package)
    written.extend(p for p in sorted(package.rglob("*")) if p.is_file())
    written += write_image_context(out_dir / IMAGE_CONTEXT, say)
    return written


def compile_kubernetes(space, header: dict, out_dir, fmt: str, force: bool, options: ClusterOptions, say) -> list:
    """`rbl compile --target kubernetes -o DIR`: the plan, the manifests, the image context, with
    the same directory safety as the compose target (CompileDirectory)."""
    from ...compiler.expand import iter_scenario_lines
    from ...compiler.plan import write_plan
    from ..output_dir import CompileDirectory
    options.check(header["size"])
    check_image(header, options, say)            # before anything is written or built
    directory = CompileDirectory(out_dir, force)
    directory.claim()
    files = write_plan(space, out_dir, fmt)
    files += write_kubernetes(header, iter_scenario_lines(space), out_dir, options, say)
    directory.finish(files, header["source"]["path"])
    if directory.previous:
        say(f"note: replaced the previous compile of {directory.previous_spec or 'a spec'} in {out_dir}")
    say(f"wrote {out_dir}: {MANIFEST_FILE} ({header['size']} scenarios in {options.shards} "
        f"shard{'s' if options.shards != 1 else ''}) and the runner "
        f"image's build context {IMAGE_CONTEXT}/ with every client service (docker build -t "
        f"{options.image or runner_image()} {out_dir}/{IMAGE_CONTEXT}; a base with Python, Java and Node.js: "
        f"--build-arg BASE_IMAGE=...)")
    return files
