"""`rbl run --backend kubernetes` where no cluster is needed to tell: bad options, an unreachable
cluster and a plan whose clients the runner image lacks are clear errors that create nothing. The
cluster itself: test_kubernetes_e2e.py."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from .conftest import EXAMPLES, run_rbl

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: gone
  cluster: {{server: "https://127.0.0.1:{port}", insecure-skip-tls-verify: true}}
users:
- name: nobody
  user: {{token: "none"}}
contexts:
- name: gone
  context: {{cluster: gone, user: nobody}}
current-context: gone
"""


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]         # closed again when the block ends: nothing listens


def test_an_unreachable_cluster_is_exit_4_and_creates_nothing(tmp_path):
    (tmp_path / "kubeconfig").write_text(KUBECONFIG.format(port=_closed_port()))
    done = run_rbl("run", str(EXAMPLES / "quickstart.rbl"), "--backend", "kubernetes", "--shards", "2",
                   "--kubeconfig", "kubeconfig", "-o", "out", cwd=tmp_path, timeout=120)
    assert done.returncode == 4, done.stderr
    assert "does not answer" in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kubeconfig"]


def test_a_missing_kubeconfig_and_context_are_exit_4(tmp_path):
    done = run_rbl("run", str(EXAMPLES / "quickstart.rbl"), "--backend", "kubernetes", "--kubeconfig",
                   "nowhere", "-o", "out", cwd=tmp_path, timeout=120)
    assert done.returncode == 4 and "kubeconfig" in done.stderr.lower()
    (tmp_path / "kubeconfig").write_text(KUBECONFIG.format(port=_closed_port()))
    done = run_rbl("run", str(EXAMPLES / "quickstart.rbl"), "--backend", "kubernetes", "--kubeconfig",
                   "kubeconfig", "--context", "elsewhere", "-o", "out", cwd=tmp_path, timeout=120)
    assert done.returncode == 4 and "elsewhere" in done.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.shards").exists()


def test_cluster_options_need_the_kubernetes_backend(tmp_path):
    done = run_rbl("run", str(EXAMPLES / "quickstart.rbl"), "--shards", "3", cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and "--shards applies to --backend kubernetes" in done.stderr
    done = run_rbl("run", str(EXAMPLES / "quickstart.rbl"), "--backend", "kubernetes", "--shard", "0/2",
                   cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and "--shard runs one shard here" in done.stderr
    done = run_rbl("run", str(EXAMPLES / "quickstart.rbl"), "--backend", "kubernetes", "--shards", "21",
                   cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and "the plan has 20 scenarios" in done.stderr


def test_resuming_something_that_is_not_a_cluster_run_is_a_usage_error(tmp_path: Path):
    (tmp_path / "out.shards").mkdir()
    done = run_rbl("run", "--resume", "out", "--backend", "kubernetes", cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and "not the shards directory of a Kubernetes run" in done.stderr


# -- the runner image's clients, checked before anything exists -----------------------------------
MIXED = """space mixed {
  users = 1
  successes = 2
  max_requests = 4
  client tenacity.baseline {}
  client resilience4j.baseline {}
  client gobreaker.baseline {}
}
"""


def _unreachable(tmp_path: Path) -> list[str]:
    """A kubeconfig whose cluster does not answer: a check made after connecting would be exit 4."""
    (tmp_path / "kubeconfig").write_text(KUBECONFIG.format(port=_closed_port()))
    return ["--backend", "kubernetes", "--shards", "2", "--kubeconfig", "kubeconfig", "-o", "out"]


def test_a_plan_whose_clients_the_runner_image_lacks_is_refused_before_the_cluster(tmp_path):
    (tmp_path / "mixed.rbl").write_text(MIXED)
    done = run_rbl("run", "mixed.rbl", *_unreachable(tmp_path), "--runner-image", "registry.example/runner:1",
                   "--runner-clients", "python,node", cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "the runner image registry.example/runner:1 holds the client services python, node" in done.stderr
    assert "resilience4j (resilience4j), gobreaker (go)" in done.stderr and "tenacity" not in done.stderr
    assert "help:" in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kubeconfig", "mixed.rbl"]
    # declared complete, the same plan gets as far as the cluster
    done = run_rbl("run", "mixed.rbl", *_unreachable(tmp_path), "--runner-image", "registry.example/runner:1",
                   "--runner-clients", "go,resilience4j,python", cwd=tmp_path, timeout=120)
    assert done.returncode == 4 and "does not answer" in done.stderr


def test_an_open_loop_plan_needs_a_runner_image_with_the_load_generator(tmp_path):
    (tmp_path / "open.rbl").write_text(OPEN_LOOP)
    done = run_rbl("run", "open.rbl", *_unreachable(tmp_path), "--runner-image", "registry.example/runner:1",
                   "--runner-clients", "python", cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "the runner image registry.example/runner:1 holds no load generator (rbl-load)" in done.stderr
    assert "add loadgen to --runner-clients" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kubeconfig", "open.rbl"]
    # rbl's own image holds it: the plan gets as far as the cluster
    done = run_rbl("run", "open.rbl", *_unreachable(tmp_path), cwd=tmp_path, timeout=120)
    assert done.returncode == 4 and "does not answer" in done.stderr, done.stderr
    done = run_rbl("run", "open.rbl", *_unreachable(tmp_path), "--runner-image", "registry.example/runner:1",
                   "--runner-clients", "python,loadgen", cwd=tmp_path, timeout=120)
    assert done.returncode == 4 and "does not answer" in done.stderr, done.stderr
    # a population of users is driven by the same generator
    (tmp_path / "users.rbl").write_text(OPEN_LOOP.replace("load = open\n  load.rps = 20", "load = users\n  load.users = 2"))
    done = run_rbl("run", "users.rbl", *_unreachable(tmp_path), cwd=tmp_path, timeout=120)
    assert done.returncode == 4 and "does not answer" in done.stderr, done.stderr


OPEN_LOOP = """space openloop {
  load = open
  load.rps = 20
  load.duration = 5s
  target = "/status/200"
  client tenacity.baseline {}
  client tenacity.retry { stop_after_attempt = 2 }
}
"""


def test_rbls_own_runner_image_holds_every_client_rbl_builds(tmp_path):
    (tmp_path / "mixed.rbl").write_text(MIXED)
    done = run_rbl("run", "mixed.rbl", *_unreachable(tmp_path), cwd=tmp_path, timeout=120)
    assert done.returncode == 4 and "does not answer" in done.stderr, done.stderr
    assert "warning" not in done.stderr
    # a client kind rbl ships no service for cannot run in any pod: refused, with the way out
    (tmp_path / "polly.rbl").write_text("space p {\n  users in [1, 2]\n  client polly.baseline {}\n}\n")
    done = run_rbl("run", "polly.rbl", *_unreachable(tmp_path), cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "rbl/runner:" in done.stderr and "polly (polly)" in done.stderr
    assert "rbl ships no polly client service" in done.stderr and "--backend local" in done.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.shards").exists()


def test_an_undeclared_runner_image_is_trusted_with_a_warning(tmp_path):
    (tmp_path / "mixed.rbl").write_text(MIXED)
    done = run_rbl("run", "mixed.rbl", *_unreachable(tmp_path), "--runner-image", "registry.example/runner:1",
                   cwd=tmp_path, timeout=120)
    assert done.returncode == 4, done.stderr
    assert "warning: rbl cannot see which client services registry.example/runner:1 holds" in done.stderr
    assert "--runner-clients" in done.stderr


@pytest.mark.parametrize("args, message", [
    (["--runner-clients", "python"], "--runner-clients describes a --runner-image"),
    (["--runner-image", "r:1", "--runner-clients", "python,dotnet"], "unknown client kind dotnet"),
    (["--runner-image", "r:1", "--runner-clients", ","], "empty"),
])
def test_bad_runner_clients_are_usage_errors(tmp_path, args, message):
    done = run_rbl("run", str(EXAMPLES / "quickstart.rbl"), *_unreachable(tmp_path), *args, cwd=tmp_path,
                   timeout=120)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (tmp_path / "out.shards").exists()


def test_options_that_mean_this_machine_are_refused_with_the_kubernetes_backend(tmp_path):
    jar = tmp_path / "my.jar"
    jar.write_bytes(b"PK")
    done = run_rbl("run", str(EXAMPLES / "quickstart.rbl"), "--backend", "kubernetes", "--client-jar",
                   f"resilience4j={jar}", "-o", "out", cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and "which the shards' pods cannot see" in done.stderr
    done = run_rbl("run", str(EXAMPLES / "quickstart.rbl"), "--backend", "kubernetes", "--dry-run", "-o", "out",
                   cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and "--dry-run checks the services on this machine" in done.stderr
    assert "Traceback" not in done.stderr and sorted(p.name for p in tmp_path.iterdir()) == ["my.jar"]


BAD_REFERENCES = {
    "": "it is empty",
    "rbl/runner :1": "white space",
    "x@@y": "does not read as",
    "http://registry.example/runner:1": "it is a URL",
    "Registry.example/Runner:1": "must be lower-case",
    "runner:": "does not read as",
    "runner:" + "t" * 129: "does not read as",
    "runner@sha256:abc": "does not read as",
    "r\u00e9gistry/runner": "no reference has",
    "runner:1\n": "white space",
}


@pytest.mark.parametrize("reference", list(BAD_REFERENCES), ids=repr)
def test_a_runner_image_that_is_no_image_reference_is_a_usage_error(tmp_path, reference):
    """A runtime refuses such a reference only on the node, in every pod: refused here, by run
    and compile alike, before anything exists."""
    done = run_rbl("run", str(EXAMPLES / "quickstart.rbl"), *_unreachable(tmp_path), "--runner-image", reference,
                   cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "is not a container image reference" in done.stderr and BAD_REFERENCES[reference] in done.stderr
    assert "[HOST[:PORT]/]NAME[:TAG][@DIGEST]" in done.stderr and "Traceback" not in done.stderr
    done = run_rbl("compile", str(EXAMPLES / "quickstart.rbl"), "--target", "kubernetes", "-o", "compiled",
                   "--runner-image", reference, cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and "is not a container image reference" in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kubeconfig"]


@pytest.mark.parametrize("reference", [
    "r:1", "rbl/runner:0.1.0", "registry.example/runner:1", "localhost:5000/rbl/runner:e2e", "[::1]:5000/a/b",
    "Registry.Example.com/team/runner", "a__b/c-d--e.f:TAG_1.2-x", "rbl/runner@sha256:" + "0" * 64,
    "ghcr.io/org/runner:1@sha256:" + "a" * 64, "ubuntu",
])
def test_image_references_of_every_form_are_taken(reference):
    from rbl.targets.kubernetes.image import reference_problem
    assert reference_problem(reference) is None


def test_the_runner_options_belong_to_the_kubernetes_target(tmp_path):
    done = run_rbl("compile", str(EXAMPLES / "quickstart.rbl"), "-o", "compiled", "--runner-image", "r:1",
                   cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and "--target kubernetes" in done.stderr, done.stderr
    assert not (tmp_path / "compiled").exists()
