"""`rbl compile --target kubernetes`: the manifests are valid Kubernetes 1.31 objects (checked
offline against the API's OpenAPI schemas with kubernetes-validate, strict: an unknown field is
an error), carry the plan the compiler made, and keep shards apart unless told otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from .conftest import EXAMPLES, run_rbl

kubernetes_validate = pytest.importorskip("kubernetes_validate")
KUBERNETES = "1.31.0"


def _compile(work: Path, *args: str, spec: Path = EXAMPLES / "quickstart.rbl", out: str = "k"):
    return run_rbl("compile", str(spec), "--target", "kubernetes", "-o", out, *args, cwd=work, timeout=120)


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
