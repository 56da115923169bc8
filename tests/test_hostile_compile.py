"""`rbl compile` of a plan too large to write: `-o DIR` refuses it before anything is written and
names the streaming alternative, and `-o -` streams any plan from its first scenario on, in
constant memory (an axis of 10^9 values is never listed)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tracemalloc
from itertools import islice

import pytest

from rbl.compiler import plan
from rbl.compiler.expand import iter_scenario_lines, iter_scenarios
from rbl.compiler.pipeline import compile_source

from .conftest import REPO

# 10^18 scenarios; the client's axis and the fault rates have 10^9 values each
HUGE = """space huge {
  users in [1]
  fault.rate in 0%..100% step 0.0000001%
  client resilience4j.retry {
    maxAttempts in 1..1000000000
  }
}
"""


def _write(tmp_path, text: str = HUGE, name: str = "huge.rbl"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("args", [[], ["--format", "jsonl"], ["--format", "csv"], ["--target", "kubernetes"]],
                         ids=["json", "jsonl", "csv", "kubernetes"])
def test_a_plan_too_large_to_write_is_refused_before_anything_is_written(cli, tmp_path, args):
    spec = _write(tmp_path)
    code, out, err = cli("compile", spec, "-o", tmp_path / "out", *args)
    assert code == 2, err
    assert "the plan has about 10^18 scenarios" in err and "writes plans of up to 10,000,000 scenarios" in err
    assert f"rbl compile {spec} -o - --format jsonl" in err and "--users" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_a_previous_compile_is_left_as_it_was(cli, tmp_path):
    small = _write(tmp_path, "space small {\n  users in [1]\n  client tenacity.retry {}\n}\n", "small.rbl")
    code, _, err = cli("compile", small, "-o", tmp_path / "out")
    assert code == 0, err
    before = {p: p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()}
    code, _, err = cli("compile", _write(tmp_path), "-o", tmp_path / "out", "--force")
    assert code == 2 and "nothing was written" in err
    assert {p: p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()} == before


def test_the_limit_is_on_the_scenarios(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(plan, "MAX_WRITTEN_SCENARIOS", 100)
    spec = _write(tmp_path, "space s {\n  users in 1..10\n  client resilience4j.retry { maxAttempts in 1..10 }\n}\n")
    code, _, err = cli("compile", spec, "-o", tmp_path / "at")
    assert code == 0, err
    code, _, err = cli("compile", spec, "-o", tmp_path / "over", "--users", "1..11")
    assert code == 2 and "the plan has 110 scenarios" in err and not (tmp_path / "over").exists()


def test_a_plan_no_configmap_holds_is_refused_before_anything_is_written(cli, tmp_path):
    """The pods read the plan from one ConfigMap (1 MB): 10^4 scenarios never fit, and were
    written, and the directory claimed, before that was found."""
    spec = _write(tmp_path, "space k {\n  users in 1..100\n  client resilience4j.retry { maxAttempts in 1..100 }\n}\n")
    code, _, err = cli("compile", spec, "--target", "kubernetes", "-o", tmp_path / "out")
    assert code == 2 and "larger than a ConfigMap holds" in err and "10000 scenarios" in err, err
    assert not (tmp_path / "out").exists()


def test_streaming_a_huge_plan_starts_at_once():
    """`-o -` of 10^18 scenarios: the first ones come before any axis is listed (listing the
    client's 10^9 values first took gigabytes and never got to the first scenario)."""
    process = subprocess.Popen([sys.executable, "-m", "rbl", "compile", "-", "-o", "-", "--format", "jsonl"],
                               cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        process.stdin.write(HUGE.encode())
        process.stdin.close()
        lines = []
        while len(lines) < 3:
            ready, _, _ = select.select([process.stdout], [], [], 120)
            assert ready, "no scenario within two minutes"
            lines.append(process.stdout.readline())
    finally:
        process.kill()
        process.wait()
    scenarios = [json.loads(line) for line in lines]
    assert [s["index"] for s in scenarios] == [0, 1, 2]
    assert [s["config"]["maxAttempts"] for s in scenarios] == [1, 2, 3]


@pytest.mark.parametrize("expand", [iter_scenario_lines, iter_scenarios])
@pytest.mark.parametrize("long", ["client", "fault"])
def test_expansion_memory_does_not_grow_with_an_axis(expand, long):
    """The first scenarios of a space with an axis of 10^6 values, in far less memory than the
    axis would take listed (~70 MB of JSON fragments)."""
    text = HUGE.replace("1..1000000000", "1..1000000" if long == "client" else "[1, 2, 3]")
    if long == "client":
        text = text.replace("0%..100% step 0.0000001%", "[0%]")
    else:
        text = text.replace("step 0.0000001%", "step 0.0001%")
    space = compile_source(text).space
    tracemalloc.start()
    try:
        first = list(islice(expand(space), 5))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(first) == 5 and peak < 5_000_000


def test_long_axes_expand_as_short_ones_do(monkeypatch):
    """The fragments of a long axis, made value by value, give the same scenarios."""
    space = compile_source("space s {\n  users in [1, 2]\n  fault.rate in [0%, 50%]\n"
                           "  client resilience4j.retry {\n    maxAttempts in 1..5\n"
                           "    initialIntervalMillis in [10ms, 20ms]\n  }\n}\n").space
    listed = list(iter_scenario_lines(space))
    from rbl.compiler import expand
    monkeypatch.setattr(expand, "FRAGMENT_LIMIT", 1)
    assert list(iter_scenario_lines(space)) == listed and len(listed) == 2 * 2 * 5 * 2
