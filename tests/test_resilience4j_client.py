"""The Resilience4j client in `rbl run`: built on first use and cached by a hash of its sources,
a real JVM run end to end, and exit 4 with advice when Java or Maven is missing. (Its protocol and
semantics are checked by tests/conformance.)"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from rbl.targets import client_builds

from .conftest import run_spec
from .test_run import rows

SPACE = """
space r4j {
  rounds = 1
  users in [2, 4]
  successes = 3
  max_requests = 9
  target = "/bytes/64"
  fault.kind = abort
  fault.status = 503
  fault.rate in [0%, 100%]
  client resilience4j.baseline {}
  client resilience4j.retry {
    maxAttempts = 3
    waitDuration = 1ms
  }
}
"""


def run_r4j(tmp_path: Path, *args: str, path: str | None = None, cache: Path | None = None):
    return run_spec(tmp_path, "r4j.rbl", SPACE, *args, path=path, cache=cache)


def bin_with(tmp_path: Path, *commands: str) -> str:
    """A PATH holding only python and the given commands."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python3").symlink_to(sys.executable)
    for command in commands:
        (bin_dir / command).symlink_to(shutil.which(command))
    return str(bin_dir)


@pytest.fixture(scope="module")
def built_jar() -> Path:
    return client_builds.client_jar("resilience4j")


def test_a_real_jvm_run_gives_the_invariants(tmp_path, built_jar):
    done = run_r4j(tmp_path)
    assert done.returncode == 0, done.stderr
    found = rows(tmp_path / "out")
    assert len(found) == 2 * 2 * (2 + 4)                     # faults x clients x users
    for row in found:
        assert row["lib"] == "resilience4j"
        if row["faultPercentage"] == 0:
            assert row["successfulCalls"] == 3 and row["totalRequests"] == 3
        elif row["strategy"] == "retry":
            assert row["totalRequests"] == 9 and row["totalCalls"] == 3    # 3 attempts per failed call
        else:
            assert row["totalRequests"] == 9 and row["totalCalls"] == 9
    manifest = (tmp_path / "out" / "manifest.json").read_text()
    assert '"resilience4j": "2.' in manifest


def test_missing_java_exits_4_with_advice_before_anything_starts(tmp_path):
    done = run_r4j(tmp_path, path=bin_with(tmp_path))
    assert done.returncode == 4, done.stderr
    assert "needs java" in done.stderr and "JDK 17" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_missing_maven_exits_4_when_the_client_must_be_built(tmp_path):
    done = run_r4j(tmp_path, path=bin_with(tmp_path, "java"), cache=tmp_path / "empty-cache")
    assert done.returncode == 4, done.stderr
    assert "mvn" in done.stderr and "Maven" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_jar_the_user_points_to_needs_no_maven(tmp_path, built_jar):
    done = run_r4j(tmp_path, "--client-jar", f"resilience4j={built_jar}", path=bin_with(tmp_path, "java"),
                   cache=tmp_path / "empty-cache")
    assert done.returncode == 0, done.stderr
    assert len(rows(tmp_path / "out")) == 24


def test_the_build_is_cached_by_a_hash_of_the_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    said: list[str] = []
    jar = client_builds.client_jar("resilience4j", say=said.append)
    assert jar.is_file() and jar.parent == tmp_path / "cache" / "rbl" / "clients" and len(said) == 1
    built_at = jar.stat().st_mtime_ns
    assert client_builds.client_jar("resilience4j", say=said.append) == jar
    assert len(said) == 1 and jar.stat().st_mtime_ns == built_at           # no second build
    # a changed source gives another cache key, so the next run rebuilds
    with client_builds.client_sources("resilience4j") as root:
        copy = tmp_path / "copy"
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns("target"))
        assert client_builds.sources_digest(copy) == client_builds.sources_digest(root)
    main = copy / "src" / "main" / "java" / "dev" / "rbl" / "client" / "Main.java"
    main.write_text(main.read_text() + "\n// changed\n")
    assert client_builds.sources_digest(copy) != client_builds.sources_digest(root)
    assert jar.name == f"resilience4j-{client_builds.sources_digest(root)}.jar"
