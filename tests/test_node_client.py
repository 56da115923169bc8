"""The Node.js client (clients/node: cockatiel, opossum) in `rbl run`: built with `npm ci` on first use
and cached by a hash of its sources, exit 4 with advice when node or npm is missing, a built
directory given with --client-dir, and the original tool's cockatiel specs imported and run on it.
(Its protocol and semantics are checked by tests/conformance.)"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from rbl.targets import client_builds

from .conftest import EXAMPLES, run_rbl, run_spec
from .test_resilience4j_client import bin_with

SPACE = """
space node {
  rounds = 1
  users = 2
  successes = 3
  max_requests = 12
  fault.kind = abort
  fault.status = 503
  fault.rate = 100%
  client cockatiel.retry {
    maxAttempts = 2
    backoff = CONSTANT
    initialDelay = 1ms
  }
  client opossum.circuit_breaker {
    volumeThreshold = 2
    resetTimeout = 20ms
  }
}
"""


def run_node(tmp_path: Path, *args: str, path: str | None = None, cache: Path | None = None):
    return run_spec(tmp_path, "node.rbl", SPACE, *args, path=path, cache=cache)


@pytest.fixture(scope="module")
def built_client() -> Path:
    return client_builds.client_artifact("node")


def csv_rows(run_dir: Path) -> list[dict]:
    with (run_dir / "results.csv").open() as f:
        return list(csv.DictReader(f))


def test_missing_node_exits_4_with_advice_before_anything_starts(tmp_path):
    done = run_node(tmp_path, path=bin_with(tmp_path))
    assert done.returncode == 4, done.stderr
    assert "needs node" in done.stderr and "Node.js 20" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_missing_npm_exits_4_when_the_client_must_be_built(tmp_path):
    done = run_node(tmp_path, path=bin_with(tmp_path, "node"), cache=tmp_path / "empty-cache")
    assert done.returncode == 4, done.stderr
    assert "npm" in done.stderr and "Node.js" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_built_directory_given_with_client_dir_needs_no_npm(tmp_path, built_client):
    done = run_node(tmp_path, "--client-dir", f"cockatiel={built_client}", "--client-dir", f"opossum={built_client}",
                    path=bin_with(tmp_path, "node"), cache=tmp_path / "empty-cache")
    assert done.returncode == 0, done.stderr
    found = csv_rows(tmp_path / "out")
    retry = [r for r in found if r["lib"] == "cockatiel"]
    breaker = [r for r in found if r["lib"] == "opossum"]
    # under a 100% abort: 3 requests per retried call (maxAttempts counts retries); the breaker
    # opens after 2 calls, then rejects calls without a request, with one probe per 20 ms
    assert retry and all(r["totalRequests"] == "12" and r["totalCalls"] == "4" for r in retry)
    assert breaker and all(r["totalRequests"] == "12" and int(r["totalCalls"]) > 12 for r in breaker)


def test_a_directory_that_is_not_a_built_client_is_a_usage_error(tmp_path):
    done = run_node(tmp_path, "--client-dir", f"cockatiel={tmp_path}")
    assert done.returncode == 2 and "not a built Node.js client" in done.stderr, done.stderr


def test_the_build_is_cached_by_a_hash_of_the_sources(tmp_path, built_client):
    assert (built_client / "node_modules" / "cockatiel" / "package.json").is_file()
    assert client_builds.client_artifact("node") == built_client          # no second build
    with client_builds.client_sources("node") as root:
        copy = tmp_path / "copy"
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns("node_modules"))
        assert client_builds.sources_digest(copy, "node") == client_builds.sources_digest(root, "node")
    main = copy / "src" / "main.js"
    main.write_text(main.read_text() + "\n// changed\n")
    assert client_builds.sources_digest(copy, "node") != client_builds.sources_digest(root, "node")
    (copy / "node_modules").mkdir()
    (copy / "node_modules" / "x.js").write_text("installed, not a source")
    main.write_text(main.read_text().replace("\n// changed\n", ""))
    assert client_builds.sources_digest(copy, "node") == client_builds.sources_digest(root, "node")
    assert built_client.name == f"node-{client_builds.sources_digest(root, 'node')}"


def test_the_original_tools_cockatiel_spec_imports_and_runs(tmp_path, built_client):
    done = run_rbl("import", EXAMPLES / "resiliencebench" / "cockatiel.json", "-o", "ck.rbl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    spec = (tmp_path / "ck.rbl").read_text()
    assert "generator = DECORRELATED_JITTER" in spec and "maxAttempts = 3" in spec
    done = run_rbl("run", "ck.rbl", "-o", "out", "--seed", "5", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = csv_rows(tmp_path / "out")
    assert len(found) == 2 * 4 * 2                          # fault rates x configurations x users
    assert {r["lib"] for r in found} == {"cockatiel"}
    faulted_retries = [r for r in found if r["strategy"] == "retry" and r["faultPercentage"] == "50"]
    # the imported retry really retries (the original client's never did): at most 4 requests per call
    assert any(int(r["totalRequests"]) > int(r["totalCalls"]) for r in faulted_retries)
    assert all(int(r["totalRequests"]) <= 4 * int(r["totalCalls"]) for r in faulted_retries)
