"""`rbl compile --target kubernetes`: the manifests are valid Kubernetes 1.31 objects (checked
offline against the API's OpenAPI schemas with kubernetes-validate, strict: an unknown field is
an error), carry the plan the compiler made, and keep shards apart unless told otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rbl.targets.client_builds import BUILT_CLIENTS, cached_artifact, sources_digest

from .conftest import EXAMPLES, REPO, run_rbl

kubernetes_validate = pytest.importorskip("kubernetes_validate")
KUBERNETES = "1.31.0"


def _compile(work: Path, *args: str, spec: Path = EXAMPLES / "quickstart.rbl", out: str = "k"):
    return run_rbl("compile", str(spec), "--target", "kubernetes", "-o", out, *args, cwd=work,
                   timeout=900)     # the first compile on a machine builds the clients (Maven, npm, go)


def _documents(work: Path, out: str = "k") -> dict[str, dict]:
    docs = list(yaml.safe_load_all((work / out / "kubernetes" / "rbl.yaml").read_text()))
    return {d["kind"]: d for d in docs}


def test_the_manifests_are_valid_kubernetes_objects(tmp_path):
    done = _compile(tmp_path, "--shards", "3", "--parallelism", "2")
    assert done.returncode == 0, done.stderr
    docs = _documents(tmp_path)
    assert set(docs) == {"Namespace", "ConfigMap", "Job"}
    for doc in docs.values():
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)
    broken = json.loads(json.dumps(docs["Job"]))
    broken["spec"]["template"]["spec"]["containers"][0]["resources"]["limit"] = {}     # a typo
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES, strict=True)


def test_the_job_runs_one_shard_per_completion_on_the_plan_of_the_configmap(tmp_path):
    assert _compile(tmp_path, "--shards", "3", "--parallelism", "2", "--cpu", "1500m", "--memory", "1Gi").returncode == 0
    docs = _documents(tmp_path)
    job, configmap = docs["Job"], docs["ConfigMap"]
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 3, 2)
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    script = container["command"][2]
    assert 'rbl run /etc/rbl/plan.json --shard "$shard/$RBL_SHARDS"' in script and "JOB_COMPLETION_INDEX" in script
    assert {e["name"]: e["value"] for e in container["env"]}["RBL_SHARDS"] == "3"
    assert container["resources"]["requests"] == container["resources"]["limits"] == {"cpu": "1500m", "memory": "1Gi"}
    # the pods' plan is the compiler's plan: the same scenarios as `rbl compile -o -`
    plan = json.loads(configmap["data"]["plan.json"])
    streamed = json.loads(run_rbl("compile", str(EXAMPLES / "quickstart.rbl"), "-o", "-", cwd=tmp_path).stdout)
    assert plan["scenarios"] == streamed["scenarios"] and plan["size"] == 20
    # every object is labelled for clean-up and lives in the run's own namespace
    namespace = docs["Namespace"]["metadata"]["name"]
    for doc in docs.values():
        assert doc["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "rbl"
        assert doc["metadata"]["labels"]["rbl.dev/run"] == job["metadata"]["name"]
    assert job["metadata"]["namespace"] == configmap["metadata"]["namespace"] == namespace
    assert pod["volumes"][0]["configMap"]["name"] == configmap["metadata"]["name"]


def test_shards_avoid_each_others_nodes_unless_allowed(tmp_path):
    assert _compile(tmp_path, "--shards", "2").returncode == 0
    affinity = _documents(tmp_path)["Job"]["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    term = affinity["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"]["rbl.dev/run"] == _documents(tmp_path)["Job"]["metadata"]["name"]
    assert _compile(tmp_path, "--shards", "2", "--allow-shared-nodes", out="shared").returncode == 0
    assert "affinity" not in _documents(tmp_path, "shared")["Job"]["spec"]["template"]["spec"]


def test_a_named_namespace_is_used_not_created(tmp_path):
    assert _compile(tmp_path, "--namespace", "bench").returncode == 0
    docs = _documents(tmp_path)
    assert "Namespace" not in docs and docs["Job"]["metadata"]["namespace"] == "bench"


@pytest.mark.parametrize("args, message", [
    (["--shards", "21"], "the plan has 20 scenarios"),
    (["--namespace", "Not_Valid"], "not a valid namespace"),
    (["--cpu", "lots"], "not a Kubernetes quantity"),
    (["--image-pull-policy", "Sometimes"], "--image-pull-policy"),
    (["--target", "nomad"], "--target must be"),
])
def test_bad_cluster_options_are_usage_errors(tmp_path, args, message):
    done = _compile(tmp_path, *args)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "k" / "kubernetes").exists()


def test_a_hostile_plan_name_stays_data(tmp_path):
    spec = tmp_path / "hostile.rbl"
    spec.write_text((EXAMPLES / "quickstart.rbl").read_text().replace("space quickstart", "space Weird_Name__x"))
    assert _compile(tmp_path, spec=spec).returncode == 0
    for doc in _documents(tmp_path).values():
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)
        assert doc["metadata"]["name"].startswith("rbl-weird-name-x-")


def test_the_compile_directory_is_protected_as_for_compose(tmp_path):
    assert _compile(tmp_path).returncode == 0
    manifest = tmp_path / "k" / "kubernetes" / "rbl.yaml"
    manifest.write_text(manifest.read_text() + "# edited\n")
    again = _compile(tmp_path)
    assert again.returncode == 2 and "edited" in manifest.read_text()
    assert _compile(tmp_path, "--force").returncode == 0 and "# edited" not in manifest.read_text()


def test_the_runner_image_context_holds_every_client_where_the_pods_rbl_looks(tmp_path):
    done = _compile(tmp_path)
    assert done.returncode == 0, done.stderr
    context = tmp_path / "k" / "kubernetes" / "image"
    dockerfile = (context / "Dockerfile").read_text()
    assert 'LABEL dev.rbl.runner.clients="python,mesh,resilience4j,node,go,loadgen,chain"' in dockerfile
    assert "ARG BASE_IMAGE=" in dockerfile and "mvn" not in dockerfile and "npm ci" not in dockerfile
    # a topology's replicas run rbl-chain from the image at a fixed path
    assert f"RUN ln -s /opt/rbl-cache/rbl/clients/{cached_artifact('chain').name} /usr/local/bin/rbl-chain" \
        in dockerfile
    job = _documents(tmp_path)["Job"]
    assert job["metadata"]["annotations"]["rbl.dev/runner-clients"] == \
        "python,mesh,resilience4j,node,go,loadgen,chain"
    built = context / "client-cache" / "rbl" / "clients"
    held = [*BUILT_CLIENTS, "loadgen"]       # and the open-loop load generator
    assert sorted(p.name for p in built.iterdir()) == sorted(cached_artifact(kind).name for kind in [*held, "chain"])
    assert not (context / "clients" / "chain").exists()      # no sources: the pod's rbl does not look it up
    for kind in held:              # the image's sources have the digest its builds are named by
        assert cached_artifact(kind).name.startswith(f"{kind}-{sources_digest(context / 'clients' / kind, kind)}")
    # the check the image build ends with: every client is found through the image's cache ...
    kinds = ["python", *held]
    found = run_rbl_module(tmp_path, kinds, context / "client-cache")
    assert found.returncode == 0 and "holds the client services python, resilience4j, node, go, loadgen" \
        in found.stdout, found.stderr
    # ... and a build without them fails, naming each
    (tmp_path / "empty").mkdir()
    lost = run_rbl_module(tmp_path, kinds, tmp_path / "empty")
    assert lost.returncode == 1
    assert all(f"{kind}: no pre-built client" in lost.stderr for kind in held), lost.stderr


def run_rbl_module(work: Path, kinds: list[str], cache: Path):
    """The image build's last step, `python -m rbl.targets.kubernetes.image KIND...`, on this machine."""
    return subprocess.run([sys.executable, "-m", "rbl.targets.kubernetes.image", *kinds], cwd=work,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(cache)})


def test_a_plan_no_runner_image_can_run_is_not_compiled(tmp_path):
    (tmp_path / "polly.rbl").write_text("space p {\n  users = 1\n  client polly.baseline {}\n}\n")
    done = _compile(tmp_path, spec=tmp_path / "polly.rbl")
    assert done.returncode == 2 and "polly (polly)" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "k").exists()
    # another image, not described: compiled, with a warning, and no claim about its clients
    done = _compile(tmp_path, "--runner-image", "registry.example/runner:1")
    assert done.returncode == 0 and "rbl cannot see which client services" in done.stderr
    assert "annotations" not in _documents(tmp_path)["Job"]["metadata"]
