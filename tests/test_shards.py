"""Shards and `rbl merge`: the assignment (pure logic), then real local runs of a small plan split
into shards and merged back, compared with an unsharded run of the same plan."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from rbl.compiler.expand import iter_scenario_lines
from rbl.compiler.pipeline import compile_bytes
from rbl.compiler.plan import plan_header
from rbl.errors import UsageError
from rbl.store.shards import Shard, assign, parse_shard, plan_digest, scenario_seconds

from .conftest import REPO, run_rbl

SPEC = """
space shards {
  rounds = 2
  users in [1, 2]
  successes = 3
  max_requests = 12
  target = "/bytes/64"
  fault.kind = abort
  fault.status = 503
  fault.rate in [0%, 100%]

  client tenacity.baseline {}
  client tenacity.retry {
    stop_after_attempt = 2
    wait = fixed
    wait_fixed in [1ms, 2ms]
  }
}
"""
SIZE = 2 * 2 * 3          # faults x users x (1 + 2)
# what a row must say the same in every run of the plan, wherever it ran
STABLE = ("users", "round", "lib", "strategy", "faultPercentage", "faultType", "faultStatus", "config",
          "scenarioIndex", "client", "share", "warmup")


def _plan(spec: str = SPEC):
    space = compile_bytes(spec.encode(), "shards.rbl").space
    return plan_header(space), [json.loads(line) for line in iter_scenario_lines(space)]


# -- pure logic ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["3", "1/0", "3/3", "-1/3", "a/b", "1/3/4", "", "0/100000"])
def test_a_bad_shard_is_a_usage_error(text):
    with pytest.raises(UsageError) as error:
        parse_shard(text)
    assert "--shard" in error.value.message


def test_shards_are_parsed_from_zero():
    assert parse_shard("0/3") == Shard(0, 3) and parse_shard(" 2 / 3 ") == Shard(2, 3)


@pytest.mark.parametrize("count", [1, 2, 3, 5, 12])
def test_every_scenario_is_in_exactly_one_shard_and_each_shard_has_work(count):
    header, scenarios = _plan()
    shard_of, loads = assign(scenarios, count, header["rounds"])
    assert len(shard_of) == SIZE and set(shard_of) == set(range(count))
    assert sum(loads) == pytest.approx(sum(scenario_seconds(s, header["rounds"]) for s in scenarios))


def test_the_assignment_balances_estimated_durations():
    header, scenarios = _plan()
    shard_of, loads = assign(scenarios, 3, header["rounds"])
    heaviest = max(scenario_seconds(s, header["rounds"]) for s in scenarios)
    # longest-first greedy: no shard exceeds the lightest by more than one scenario
    assert max(loads) - min(loads) <= heaviest + 1e-9
    # and it is not a round-robin by index: the 100% fault scenarios (slow) are spread out
    slow = [k for s, k in zip(scenarios, shard_of) if s["fault"]["rate"] == 100]
    assert len(set(slow)) == 3


def test_the_assignment_does_not_depend_on_the_machine(monkeypatch):
    header, scenarios = _plan()
    here = assign(scenarios, 3, header["rounds"])[0]
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert assign(scenarios, 3, header["rounds"])[0] == here


def test_the_plan_digest_ignores_where_the_spec_was_and_sees_any_change():
    header, scenarios = _plan()
    moved = {**header, "source": {**header["source"], "path": "elsewhere/shards.rbl"}}
    assert plan_digest(header, scenarios) == plan_digest(moved, scenarios)
    other_header, other = _plan(SPEC.replace("max_requests = 12", "max_requests = 13"))
    assert plan_digest(other_header, other) != plan_digest(header, scenarios)


# -- real runs ----------------------------------------------------------------------------------
def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line]


def _keys(rows: list[dict]) -> Counter:
    return Counter((r["scenarioId"], r["round"], r["userId"]) for r in rows)


def _rbl(work: Path, *args: str) -> subprocess.CompletedProcess:
    return run_rbl(*args, cwd=work, timeout=240)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One unsharded run and the shards of 3, 2 and 1 of the same plan (real services)."""
    work = tmp_path_factory.mktemp("shards")
    (work / "shards.rbl").write_text(SPEC)
    made = {}
    for name, shard in [("whole", None), *[(f"s{i}of{n}", f"{i}/{n}") for n in (3, 2, 1) for i in range(n)]]:
        done = _rbl(work, "run", "shards.rbl", "-o", name, "--proxy", "builtin",
                    *(["--shard", shard] if shard else []))
        assert done.returncode == 0, done.stderr
        made[name] = work / name
    return work, made


def test_three_merged_shards_have_exactly_the_rows_of_an_unsharded_run(runs):
    work, made = runs
    done = _rbl(work, "merge", "s0of3", "s1of3", "s2of3", "-o", "merged3")
    assert done.returncode == 0, done.stderr
    whole, merged = _rows(made["whole"]), _rows(work / "merged3")
    assert _keys(merged) == _keys(whole) and len(merged) == SIZE // 2 * 3 * 2   # (1 + 2 users) x ... x 2 rounds
    assert max(_keys(merged).values()) == 1
    by_key = {(r["scenarioId"], r["round"], r["userId"]): r for r in whole}
    for row in merged:
        expected = by_key[(row["scenarioId"], row["round"], row["userId"])]
        assert set(row) == set(expected)
        assert {k: row[k] for k in STABLE} == {k: expected[k] for k in STABLE}
        # the invariants of the plan hold in both: a 0% fault needs exactly `successes` requests,
        # a 100% fault ends at max_requests
        for r in (row, expected):
            assert r["totalRequests"] == (3 if r["faultPercentage"] == 0 else 12)
    # each shard ran only its own scenarios, and they were disjoint
    shard_ids = [{r["scenarioId"] for r in _rows(made[f"s{i}of3"])} for i in range(3)]
    assert all(shard_ids) and sum(map(len, shard_ids)) == len(set().union(*shard_ids)) == SIZE
    manifest = json.loads((work / "merged3" / "manifest.json").read_text())
    assert [s["shard"] for s in manifest["shards"]] == ["0/3", "1/3", "2/3"]
    assert all(s["host"]["hostname"] and s["sessions"][0]["ended_at"] for s in manifest["shards"])
    csv_lines = (work / "merged3" / "results.csv").read_text().splitlines()
    assert len(csv_lines) == len(merged) + 1
    report = _rbl(work, "report", "merged3")
    assert report.returncode == 0, report.stderr
    assert (work / "merged3" / "report" / "report.html").is_file()


def test_shards_of_one_two_and_three_give_the_same_merged_rows(runs):
    work, made = runs
    for n in (1, 2, 3):
        done = _rbl(work, "merge", *[f"s{i}of{n}" for i in range(n)], "-o", f"m{n}")
        assert done.returncode == 0, done.stderr
    keys = [_keys(_rows(work / f"m{n}")) for n in (1, 2, 3)]
    assert keys[0] == keys[1] == keys[2] == _keys(_rows(made["whole"]))


def test_a_missing_shard_is_reported_with_its_scenarios(runs):
    work, made = runs
    done = _rbl(work, "merge", "s0of3", "s2of3", "-o", "gap")
    assert done.returncode == 3
    missing = {r["scenarioId"] for r in _rows(made["s1of3"])}
    assert "shards not given: 1/3" in done.stderr
    for scenario_id in missing:
        assert scenario_id in done.stderr
    assert f"{len(missing)} gaps:" in done.stderr and "--shard 1/3" in done.stderr
    assert not (work / "gap").exists()
    # --allow-gaps writes what there is, and still says so with exit 3
    partial = _rbl(work, "merge", "s0of3", "s2of3", "-o", "gap", "--allow-gaps")
    assert partial.returncode == 3 and (work / "gap" / "results.csv").is_file()
    assert not {r["scenarioId"] for r in _rows(work / "gap")} & missing


def test_an_overlap_and_another_plan_are_refused(runs):
    work, made = runs
    overlap = _rbl(work, "merge", "s0of3", "s1of3", "s2of3", "s0of2", "-o", "over")
    assert overlap.returncode == 3 and "overlap" in overlap.stderr and not (work / "over").exists()
    (work / "other.rbl").write_text(SPEC.replace("max_requests = 12", "max_requests = 11"))
    other = _rbl(work, "run", "other.rbl", "-o", "other", "--proxy", "builtin", "--shard", "1/3")
    assert other.returncode == 0, other.stderr
    mixed = _rbl(work, "merge", "s0of3", "other", "s2of3", "-o", "mixed")
    assert mixed.returncode == 2 and "another plan" in mixed.stderr and not (work / "mixed").exists()


def test_a_killed_shard_resumes_alone(runs, tmp_path):
    work, made = runs
    (tmp_path / "shards.rbl").write_text(SPEC.replace("rounds = 2", "rounds = 6"))
    process = subprocess.Popen([sys.executable, "-m", "rbl", "run", "shards.rbl", "-o", "k1", "--shard", "1/3",
                                "--proxy", "builtin"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    results = tmp_path / "k1" / "results.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (results.exists() and results.read_text().count("\n") >= 2):
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)         # no chance to clean up: a crashed machine
    process.wait(30)
    before = _keys(_rows(tmp_path / "k1"))
    assert before, "the shard was killed before its first round"
    resumed = _rbl(tmp_path, "run", "--resume", "k1")
    assert resumed.returncode == 0, resumed.stderr
    after = _rows(tmp_path / "k1")
    manifest = json.loads((tmp_path / "k1" / "manifest.json").read_text())
    assert manifest["shard"]["index"] == 1 and manifest["shard"]["count"] == 3
    # only shard 1's scenarios ran, every round once, and the first session's rows were kept
    assert {r["scenarioId"] for r in after} == set(_shard_ids(tmp_path / "k1", 1, 3))
    assert max(_keys(after).values()) == 1 and before <= _keys(after)
    assert len(after) == sum(s["users"] for s in _scenarios(tmp_path / "k1") if s["id"] in _shard_ids(
        tmp_path / "k1", 1, 3)) * 6


def _scenarios(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "scenarios.jsonl").read_text().splitlines() if line]


def _shard_ids(run_dir: Path, index: int, count: int) -> set[str]:
    scenarios = _scenarios(run_dir)
    shard_of, _ = assign(scenarios, count, json.loads((run_dir / "plan.json").read_text())["rounds"])
    return {s["id"] for s, k in zip(scenarios, shard_of) if k == index}


def test_merge_reads_real_shards_as_untrusted_input_and_changes_none(runs, tmp_path):
    """Real shards, one with its logs linked to /proc/self and a round whose rows repeat a user: the
    link is not followed, the round is a gap named by file and line, and the shards stay as they were."""
    import shutil
    work, made = runs
    copies = [Path(shutil.copytree(made[f"s{i}of2"], tmp_path / f"s{i}of2")) for i in range(2)]
    shutil.rmtree(copies[0] / "logs")
    (copies[0] / "logs").symlink_to("/proc/self")
    rows = (copies[1] / "results.jsonl").read_text().splitlines()
    at = next(n for n, line in enumerate(rows) if json.loads(line)["users"] == 2 and json.loads(line)["userId"] == 1)
    first = json.loads(rows[at])
    repeated = next(n for n, line in enumerate(rows, 1) if (json.loads(line)["scenarioId"], json.loads(line)["round"],
                                                           json.loads(line)["userId"]) ==
                    (first["scenarioId"], first["round"], 2))
    rows[repeated - 1] = rows[at]            # the round has user 1 twice, and user 2 not at all
    (copies[1] / "results.jsonl").write_text("\n".join(rows) + "\n")
    before = {p: p.read_bytes() for copy in copies for p in copy.rglob("*") if p.is_file() and not p.is_symlink()}
    done = _rbl(tmp_path, "merge", "s0of2", "s1of2", "-o", "m")
    assert done.returncode == 3, done.stderr
    assert (f"s1of2/results.jsonl: line {max(repeated, at + 1)} repeats user 1 of round {first['round']} of scenario "
            f"{first['scenarioId']} (line {min(repeated, at + 1)})") in done.stderr
    assert "1 gap:" in done.stderr and "rbl run --resume s1of2" in done.stderr and not (tmp_path / "m").exists()
    assert {p: p.read_bytes() for p in before} == before
    assert (copies[0] / "logs").is_symlink()
    # with --allow-gaps: everything but that round, and no link in the merged directory
    done = _rbl(tmp_path, "merge", "s0of2", "s1of2", "-o", "m", "--allow-gaps")
    assert done.returncode == 3 and "s0of2/logs is a symbolic link; not copied" in done.stderr
    assert not (tmp_path / "m" / "logs" / "shard-0-of-2").exists()
    assert (tmp_path / "m" / "logs" / "shard-1-of-2").is_dir()
    assert not [p for p in (tmp_path / "m").rglob("*") if p.is_symlink()]
    assert _keys(_rows(tmp_path / "m")) == _keys(_rows(made["whole"])) - Counter(
        {(first["scenarioId"], first["round"], r["userId"]): 1 for r in _rows(made["whole"])
         if (r["scenarioId"], r["round"]) == (first["scenarioId"], first["round"])})


def test_the_cluster_estimate_is_the_shards_own_split_started_in_index_order():
    from rbl.store.shards import cluster_estimate, select
    header, scenarios = _plan()
    rounds = header["rounds"]
    per_shard = [select(Shard(i, 3), header, lambda: scenarios, rounds).record["estimated_seconds"] for i in range(3)]
    total = sum(per_shard)                                                      # the records round to 0.1 s
    split = cluster_estimate(scenarios, SIZE, 3, None, rounds)
    assert split.exact and split.parallelism == 3
    assert split.longest_share == pytest.approx(max(per_shard) / total, abs=0.01)
    assert split.wall_share == pytest.approx(split.longest_share)               # all at once: the longest
    one_at_a_time = cluster_estimate(scenarios, SIZE, 3, 1, rounds)
    assert one_at_a_time.wall_share == pytest.approx(1.0)                       # one slot: every shard in turn
    two_slots = cluster_estimate(scenarios, SIZE, 3, 2, rounds)                 # shard 2 waits for the first free
    first, second, third = per_shard
    assert two_slots.wall_share == pytest.approx(max(first, second, min(first, second) + third) / total, abs=0.01)
    assert split.wall_share < two_slots.wall_share <= one_at_a_time.wall_share


def test_rbl_plan_estimates_a_split_run(tmp_path):
    (tmp_path / "shards.rbl").write_text(SPEC)
    alone = json.loads(run_rbl("plan", "shards.rbl", "--json", cwd=tmp_path).stdout)
    done = run_rbl("plan", "shards.rbl", "--json", "--shards", "3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    cluster = json.loads(done.stdout)["cluster"]
    assert (cluster["shards"], cluster["parallelism"], cluster["exact"]) == (3, 3, True)
    assert 0.3 <= cluster["longest_shard_share"] < 0.5                          # about a third each
    assert cluster["estimated_seconds"] < alone["estimated_seconds"]
    text = run_rbl("plan", "shards.rbl", "--shards", "3", "--parallelism", "1", cwd=tmp_path).stdout
    assert "cluster = 3 shards, 1 at a time: about" in text and "`rbl merge` come on top" in text
    refused = run_rbl("plan", "shards.rbl", "--parallelism", "2", cwd=tmp_path)
    assert refused.returncode == 2 and "add --shards N" in refused.stderr
    assert cluster["runnable"] is True and "an estimate only" not in text


def test_the_cluster_estimate_says_what_each_pod_adds_before_its_rounds(tmp_path):
    from .conftest import REPO
    for example, note, runnable in (
            ("overload-pool.rbl", "each pod measures its target's capacity first", True),
            ("httpmon-scenario.rbl", None, True),
            ("retry-storm.rbl", "each shard's topology is 3 pods of its own (one per replica)", True)):
        done = run_rbl("plan", str(REPO / "examples" / example), "--shards", "2", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "cluster = 2 shards" in done.stdout, (example, done.stdout)
        if note:
            assert note in done.stdout, (example, done.stdout)
        assert ("an estimate only" in done.stdout) is not runnable, (example, done.stdout)
        cluster = json.loads(run_rbl("plan", str(REPO / "examples" / example), "--shards", "2", "--json",
                                     cwd=tmp_path).stdout)["cluster"]
        assert cluster["runnable"] is runnable


def test_a_plan_too_large_to_assign_here_is_estimated_as_an_even_split_without_listing_it():
    from rbl.store.shards import cluster_estimate

    def never():
        raise AssertionError("listed")
        yield
    split = cluster_estimate(never(), 10 ** 12, 4, 2, 3)
    assert not split.exact and (split.longest_share, split.wall_share) == (0.25, 0.5)
