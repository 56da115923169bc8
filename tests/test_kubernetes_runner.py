"""`rbl run --backend kubernetes` where no cluster is needed to tell: bad options and an
unreachable cluster are clear errors that create nothing. The cluster itself: test_kubernetes_e2e.py."""

from __future__ import annotations

import socket
from pathlib import Path

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
