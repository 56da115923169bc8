"""Shared fixtures: text snapshots (one readable file per case), a CLI runner, and live services
(httpbin, the fault proxy: see live_services.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode
from typer.testing import CliRunner

from .live_services import httpbin, start_proxy  # noqa: F401  (fixtures for every test module)

# Fuzz tests draw the same examples on every run, so the suite passes or fails the same way in
# CI as here; HYPOTHESIS_PROFILE=explore draws new ones (and finds what the fixed ones miss).
settings.register_profile("repeatable", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", derandomize=False, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def has_topology(example: Path) -> bool:
    """A topology's example has no compose deployment (its services run on the local backend); its
    plan compiles with its Istio policies (`--target istio`)."""
    return "topology {" in example.read_text(encoding="utf-8")
SHARED = REPO.parent / "shared"
REFERENCE_JSON = SHARED / "reference" / "resiliencebench-json"


def as_from_a_shell() -> None:
    """A Popen preexec_fn for a command a test interrupts: SIGINT's default action, as a command typed
    in a shell gets. A job a shell starts in the background ignores SIGINT, its children inherit that,
    and Python then installs no KeyboardInterrupt handler: the test's Ctrl-C would be lost."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def drawn_svg(path: Path) -> int:
    """How many shapes of data a figure file rbl wrote holds (it must parse as SVG): what its panels
    draw inside their plot areas, not frames, ticks or grid lines; 0 for an empty drawing."""
    from xml.etree import ElementTree
    root = ElementTree.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
    return sum(len(group) for group in root.iter("{http://www.w3.org/2000/svg}g") if group.get("clip-path"))


def run_rbl(*args: str, cwd: Path, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m rbl ARGS` as a separate process (real signals, exit codes, stderr), on this checkout."""
    return subprocess.run([sys.executable, "-m", "rbl", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def run_spec(tmp_path: Path, name: str, spec: str, *args: str, path: str | None = None,
             cache: Path | None = None) -> subprocess.CompletedProcess:
    """`rbl run NAME -o out` on SPEC written to tmp_path, with PATH and the client cache optionally replaced."""
    env = {}
    if path is not None:
        env["PATH"] = path
    if cache is not None:
        env["XDG_CACHE_HOME"] = str(cache)
    (tmp_path / name).write_text(spec)
    return run_rbl("run", name, "-o", "out", *args, cwd=tmp_path, env=env)


class TextSnapshot(SingleFileSnapshotExtension):
    _write_mode = WriteMode.TEXT
    file_extension = "txt"


@pytest.fixture
def text_snapshot(snapshot):
    return snapshot.use_extension(TextSnapshot)


@pytest.fixture
def cli(monkeypatch):
    """Invoke the rbl CLI in-process with a fixed terminal, returning (exit code, stdout, stderr)."""
    from rbl.cli import app

    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "100")
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None):
        result = runner.invoke(app, [str(a) for a in args], input=input, catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    return invoke


def vu_row(scenario: dict, round_number: int, client: dict, counters: dict, observation: dict,
           started: str = "t0", ended: str = "t1", sidecar: dict | None = None, warmup: bool = False) -> dict:
    """One virtual user's row as the closed-loop driver writes it (for tests that build run files)."""
    from rbl.runner.closed_loop import user_row
    from rbl.runner.round import Counters, RoundSetup
    from rbl.plan_records import client_kind, load_of
    setup = RoundSetup(scenario, round_number, client, client_kind(client), load_of(scenario), "http://127.0.0.1:9/",
                       ("127.0.0.1", 9), "", "test", warmup)
    return user_row(setup, Counters(counters, sidecar), observation, started, ended)
