"""A run directory read as untrusted input by `rbl report`, `rbl diff`, `rbl merge` and `rbl run
--resume` (rbl/store/run_reader.py): links, FIFOs and oversized files, numbers beyond bounds,
repeated rows and keys, damaged shard metadata. Each case goes through the real CLI on a run
directory built directly (rows as the executor writes them); exit codes are asserted, and so is
that the inputs are left as they were."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from rbl.store.results import RunDirectory
from rbl.store.run_order import rounds_per_scenario
from rbl.store.shards import Shard, select

from .conftest import vu_row

# the plan of test_run_hostile.py: 2 fault rates x 3 rounds of 2 users
from .test_run_hostile import HEADER, LINES, SCENARIOS

FAST = ("--resamples", "100")              # the report's statistics are not what these tests check


def round_rows(scenario: dict, round_number: int) -> list[dict]:
    """The rows of one round, as the executor writes them."""
    return [vu_row(scenario, round_number, HEADER["clients"][0], {},
                          {"vu": vu, "total_us": 1000 + 10 * vu + round_number, "stopped_by": "successes",
                           "version": "1", "calls": [{"ok": True, "requests": [[0, 500, 200]]}]}, "t0", "t1")
            for vu in (1, 2)]


def make_run(path: Path, scenarios: list[dict] = SCENARIOS, manifest: dict | None = None) -> Path:
    """A finished run directory: every round of `scenarios`."""
    run = RunDirectory.create(path, HEADER, LINES, manifest or {"versions": {"tenacity": "1"}, "sessions": []})
    for scenario in scenarios:
        for round_number in (1, 2, 3):
            run.append_round(round_rows(scenario, round_number))
    run.close()
    return path


def make_shards(work: Path, count: int = 2) -> list[Path]:
    """The `count` shards of the plan, each finished, with the manifest `rbl run --shard` writes."""
    made = []
    for index in range(count):
        chosen = select(Shard(index, count), HEADER, lambda: iter(SCENARIOS), rounds_per_scenario(HEADER))
        manifest = {"versions": {"tenacity": "1"}, "sessions": [], "host": {"hostname": f"host{index}"},
                    "shard": chosen.record}
        made.append(make_run(work / f"S{index}", [s for s in SCENARIOS if s["id"] in chosen.ids], manifest))
    return made


def snapshot(directory: Path) -> dict[str, str]:
    """Every entry beneath `directory` (links not followed) and what it holds."""
    found = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = Path(root) / name
            relative = str(path.relative_to(directory))
            if path.is_symlink():
                found[relative] = "-> " + os.readlink(path)
            elif path.is_file():
                found[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
            elif path.is_dir():
                found[relative] = "dir"
            else:
                found[relative] = "special"
    return found


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def set_line(path: Path, number: int, content: bytes) -> None:
    """Replace line `number` (from 1) of a JSON Lines file."""
    found = lines(path)
    found[number - 1] = content
    path.write_bytes(b"\n".join(found) + b"\n")


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def traceback_free(out: str, err: str) -> str:
    """The output, checked for a traceback, with the console's line wrapping undone."""
    text = out + err
    assert "Traceback" not in text and "internal error" not in text, text
    return " ".join(text.split())

# -- defect 1 and its siblings: nothing read through a link or from a FIFO ----------------------------
def test_merge_copies_nothing_a_shards_logs_link_points_at(cli, work):
    s0, s1 = make_shards(work)
    (s0 / "logs").rmdir()
    (s0 / "logs").symlink_to("/proc/self")
    code, out, err = cli("merge", "S0", "S1", "-o", "M")
    text = traceback_free(out, err)
    assert code == 0, text
    assert "S0/logs is a symbolic link; not copied" in text
    assert not (work / "M" / "logs" / "shard-0-of-2").exists()
    assert (work / "M" / "logs" / "shard-1-of-2").is_dir()


def test_merge_copies_only_real_files_from_a_shards_logs(cli, work):
    s0, s1 = make_shards(work)
    secret = work / "secret.txt"
    secret.write_text("not a log")
    (s0 / "logs" / "client.log").write_text("a real log\n")
    (s0 / "logs" / "nested").mkdir()
    (s0 / "logs" / "nested" / "proxy.log").write_text("nested log\n")
    (s0 / "logs" / "stolen.log").symlink_to(secret)
    (s0 / "logs" / "proc").symlink_to("/proc/self")
    os.mkfifo(s0 / "logs" / "pipe")
    before = snapshot(s0)
    code, out, err = cli("merge", "S0", "S1", "-o", "M")
    text = traceback_free(out, err)
    assert code == 0, text
    copied = work / "M" / "logs" / "shard-0-of-2"
    assert snapshot(copied) == {"client.log": snapshot(s0 / "logs")["client.log"], "nested": "dir",
                                "nested/proxy.log": snapshot(s0 / "logs")["nested/proxy.log"]}
    assert "3 entries of S0/logs not copied" in text
    for name in ("stolen.log: is a symbolic link", "proc: is a symbolic link", "pipe: is a FIFO"):
        assert name in text
    assert snapshot(s0) == before


MEMBERS = ["results.jsonl", "plan.json", "scenarios.jsonl", "manifest.json", "failures.jsonl"]


@pytest.mark.parametrize("member", MEMBERS)
@pytest.mark.parametrize("command", ["merge", "report", "diff", "resume"])
def test_a_file_linked_to_dev_zero_is_refused_not_read(cli, work, command, member):
    """Before: merge read /dev/zero until killed. Now: every command refuses the link, at once."""
    s0, s1 = make_shards(work)
    target = s0 / member
    target.unlink(missing_ok=True)
    target.symlink_to("/dev/zero")
    args = {"merge": ("merge", "S0", "S1", "-o", "M"), "report": ("report", "S0", *FAST),
            "diff": ("diff", "S1", "S0", *FAST), "resume": ("run", "--resume", "S0")}[command]
    code, out, err = cli(*args)
    text = traceback_free(out, err)
    assert code == 2, text
    if command == "report" and member in ("plan.json", "results.jsonl"):
        assert "S0 is not an rbl run directory" in text        # build_report's first check, which follows nothing
    else:
        assert f"S0/{member} is a symbolic link" in text
    assert not (work / "M").exists() and not (s0 / "report").exists()


@pytest.mark.parametrize("command", ["merge", "report", "resume"])
def test_a_link_to_a_valid_file_outside_is_refused_too(cli, work, command):
    s0, s1 = make_shards(work)
    (s0 / "results.jsonl").rename(work / "elsewhere.jsonl")
    (s0 / "results.jsonl").symlink_to(work / "elsewhere.jsonl")
    args = {"merge": ("merge", "S0", "S1", "-o", "M"), "report": ("report", "S0", *FAST),
            "resume": ("run", "--resume", "S0")}[command]
    code, out, err = cli(*args)
    assert code == 2 and "S0/results.jsonl is a symbolic link" in traceback_free(out, err)


@pytest.mark.parametrize("member", ["results.jsonl", "scenarios.jsonl", "manifest.json"])
def test_a_fifo_in_place_of_a_file_is_refused_without_waiting_for_a_writer(cli, work, member):
    s0, s1 = make_shards(work)
    (s0 / member).unlink()
    os.mkfifo(s0 / member)
    code, out, err = cli("merge", "S0", "S1", "-o", "M")
    assert code == 2 and f"S0/{member} is a FIFO, not a file" in traceback_free(out, err)


def test_an_oversized_plan_is_refused_before_it_is_read(cli, work):
    run = make_run(work / "R")
    with (run / "plan.json").open("r+b") as plan:
        plan.truncate(65 << 20)              # sparse: large, yet cheap to make
    code, out, err = cli("report", "R", *FAST)
    assert code == 2 and "R/plan.json is larger than 64 MB" in traceback_free(out, err)


def test_a_line_longer_than_the_bound_is_left_out_with_its_line_number(cli, work):
    run = make_run(work / "R")
    with (run / "results.jsonl").open("ab") as results:
        results.write(b'{"x": "' + b"y" * (2 << 20) + b'"}\n' + lines(run / "results.jsonl")[0] + b"\n")
    code, out, err = cli("report", "R", *FAST)
    text = traceback_free(out, err)
    assert code == 0, text
    assert "R/results.jsonl:13: longer than 1 MB" in text
    # the line after it is read as the line after it: a repeat of line 1
    assert "line 14 repeats user 1 of round 1" in text

# -- defect 3 and its siblings: numbers, NaN, nesting, encoding ------------------------------------------
HUGE = b"1" * 5000


@pytest.mark.parametrize("command", ["merge", "report", "diff", "resume"])
def test_a_huge_integer_in_the_plan_is_a_located_error(cli, work, command):
    s0, s1 = make_shards(work)
    plan = (s0 / "plan.json").read_bytes()
    (s0 / "plan.json").write_bytes(plan.replace(b'"rounds": 3', b'"rounds": ' + HUGE))
    args = {"merge": ("merge", "S0", "S1", "-o", "M"), "report": ("report", "S0", *FAST),
            "diff": ("diff", "S1", "S0", *FAST), "resume": ("run", "--resume", "S0")}[command]
    code, out, err = cli(*args)
    text = traceback_free(out, err)
    assert code == 2, text
    assert "plan.json is not readable JSON" in text and "beyond 64 bits" in text


@pytest.mark.parametrize("command", ["merge", "report", "resume"])
def test_a_huge_integer_in_the_scenarios_is_a_located_error(cli, work, command):
    s0, s1 = make_shards(work)
    set_line(s0 / "scenarios.jsonl", 2, lines(s0 / "scenarios.jsonl")[1].replace(b'"users":2', b'"users":' + HUGE))
    args = {"merge": ("merge", "S0", "S1", "-o", "M"), "report": ("report", "S0", *FAST),
            "resume": ("run", "--resume", "S0")}[command]
    code, out, err = cli(*args)
    text = traceback_free(out, err)
    assert code == 2 and "scenarios.jsonl line 2 is not JSON rbl reads" in text and "beyond 64 bits" in text


BAD_ROWS = {
    "a 5000-digit integer": (lambda row: row.replace(b'"proxyRequests":0', b'"proxyRequests":' + HUGE),
                             "beyond 64 bits"),
    "NaN": (lambda row: row.replace(b'"totalExecutionTime":', b'"totalExecutionTime":NaN,"x":'),
            "NaN is not a JSON number"),
    "Infinity": (lambda row: row.replace(b'"throughput":', b'"throughput":-Infinity,"x":'),
                 "-Infinity is not a JSON number"),
    "1e999": (lambda row: row.replace(b'"throughput":', b'"throughput":1e999,"x":'), "beyond a float's range"),
    "a metric of 1e300": (lambda row: row.replace(b'"throughput":', b'"throughput":1e300,"x":'),
                          "its throughput is not a number up to 1e+15"),
    "a key twice": (lambda row: row.replace(b'"userId":1', b'"userId":1,"userId":2'),
                    'the key "userId" appears twice'),
    "deep nesting": (lambda row: b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "invalid UTF-8": (lambda row: row.replace(b'"t0"', b'"t\xff"'), "not UTF-8"),
    "a lone surrogate": (lambda row: row.replace(b'"t0"', b'"\\ud800"'), "lone surrogate"),
}


@pytest.mark.parametrize("kind", BAD_ROWS)
def test_a_bad_row_is_left_out_of_the_report_with_its_file_and_line(cli, work, kind):
    run = make_run(work / "R")
    change, expected = BAD_ROWS[kind]
    set_line(run / "results.jsonl", 3, change(lines(run / "results.jsonl")[2]))
    before = snapshot(run)
    code, out, err = cli("report", "R", *FAST, "-o", "out")
    text = traceback_free(out, err)
    assert code == 0, text
    assert "1 line of R/results.jsonl is not a row of this plan" in text and "R/results.jsonl:3:" in text
    assert expected in text
    assert snapshot(run) == before


@pytest.mark.parametrize("kind", ["a 5000-digit integer", "NaN", "a lone surrogate", "a key twice"])
def test_a_bad_row_in_a_shard_is_a_gap_of_the_merge_not_a_crash(cli, work, kind):
    s0, s1 = make_shards(work)
    change, expected = BAD_ROWS[kind]
    set_line(s0 / "results.jsonl", 1, change(lines(s0 / "results.jsonl")[0]))
    before = snapshot(s0)
    code, out, err = cli("merge", "S0", "S1", "-o", "M")
    text = traceback_free(out, err)
    assert code == 3, text
    assert "S0/results.jsonl:1:" in text and expected in text and "1 gap:" in text and "rbl run --resume S0" in text
    assert not (work / "M").exists() and snapshot(s0) == before
    code, out, err = cli("merge", "S0", "S1", "-o", "M", "--allow-gaps")
    assert code == 3 and len(lines(work / "M" / "results.jsonl")) == 6 * 2 - 2


def test_resume_drops_a_huge_integer_row_and_redoes_its_round(work):
    """--resume's repair reads through the same reader (the round is then run again)."""
    run = make_run(work / "R")
    set_line(run / "results.jsonl", 3, BAD_ROWS["a 5000-digit integer"][0](lines(run / "results.jsonl")[2]))
    resumed = RunDirectory.resume(run)
    resumed.close()
    assert any(w.startswith("results.jsonl line 3:") and "beyond 64 bits" in w for w in resumed.warnings)
    assert (SCENARIOS[0]["id"], 2) not in resumed.completed and len(resumed.completed) == 5


@pytest.mark.parametrize("content, expected", [
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"rbl_plan": 1, "rbl_plan": 1}', 'the key "rbl_plan" appears twice'),
    (b"\xef\xbb\xbf{}", "not JSON"),
])
def test_a_damaged_plan_is_named_by_every_command(cli, work, content, expected):
    run = make_run(work / "R")
    (run / "plan.json").write_bytes(content)
    for args in (("report", "R", *FAST), ("diff", "R", "R", *FAST), ("merge", "R", "-o", "M"),
                 ("run", "--resume", "R")):
        code, out, err = cli(*args)
        text = traceback_free(out, err)
        assert code == 2 and "plan.json" in text and expected in text, (args, text)


def test_control_characters_in_a_plans_labels_are_refused(cli, work):
    """The plan of a run directory is checked as `rbl run` checks a plan file: its labels reach the terminal."""
    run = make_run(work / "R")
    plan = json.loads((run / "plan.json").read_text())
    plan["name"] = "h\x1b]0;owned\x07"
    (run / "plan.json").write_text(json.dumps(plan))
    code, out, err = cli("report", "R", *FAST)
    text = traceback_free(out, err)
    assert code == 2 and "plan.json is not a plan" in text and "control character" in text


def test_a_scenario_file_that_does_not_match_the_plan_is_refused(cli, work):
    run = make_run(work / "R")
    (run / "scenarios.jsonl").write_text(LINES[0] + "\n")          # one scenario of the plan's two
    code, out, err = cli("report", "R", *FAST)
    assert code == 2 and "scenarios.jsonl holds 1 scenarios, but the plan's size is 2" in traceback_free(out, err)

# -- defect 4: repeated rows are reported, never counted twice --------------------------------------------
def test_merge_refuses_a_round_whose_rows_repeat_a_user(cli, work):
    """Before: a round of users [1, 1] passed as complete (a duplicate key, a user missing), exit 0."""
    s0, s1 = make_shards(work)
    first, second = lines(s0 / "results.jsonl")[:2]
    set_line(s0 / "results.jsonl", 2, first)
    code, out, err = cli("merge", "S0", "S1", "-o", "M")
    text = traceback_free(out, err)
    assert code == 3, text
    scenario = json.loads(first)["scenarioId"]
    assert f"S0/results.jsonl: line 2 repeats user 1 of round 1 of scenario {scenario} (line 1)" in text
    assert "1 gap:" in text and "rbl run --resume S0" in text and not (work / "M").exists()
    code, out, err = cli("merge", "S0", "S1", "-o", "M", "--allow-gaps")
    keys = [(r["scenarioId"], r["round"], r["userId"]) for r in map(json.loads, lines(work / "M" / "results.jsonl"))]
    assert code == 3 and len(keys) == len(set(keys)) == 6 * 2 - 2


def test_report_and_diff_leave_out_a_round_with_a_repeated_row_and_say_where(cli, work):
    """Before: the repeated row was counted twice (n grew) without a word."""
    clean = make_run(work / "clean")
    run = make_run(work / "R")
    with (run / "results.jsonl").open("ab") as results:
        results.write(lines(run / "results.jsonl")[0] + b"\n")
    code, out, err = cli("report", "R", *FAST)
    text = traceback_free(out, err)
    assert code == 0, text
    assert "R/results.jsonl: line 13 repeats user 1 of round 1" in text and "(line 1)" in text
    assert "the round is left out" in text
    code, _, _ = cli("report", "clean", *FAST)
    assert code == 0
    cells = {c["scenarioId"]: c for c in json.loads((run / "report" / "cells.json").read_text())}
    whole = {c["scenarioId"]: c for c in json.loads((clean / "report" / "cells.json").read_text())}
    first = SCENARIOS[0]["id"]
    assert cells[first]["successTimePerRequest.n"] == whole[first]["successTimePerRequest.n"] - 2   # one round fewer
    assert cells[first]["rounds"] == 2
    code, out, err = cli("diff", "clean", "R", *FAST, "--format", "json")
    text = traceback_free(out, err)
    assert code == 0 and "line 13 repeats user 1 of round 1" in text
    first_cell = [c for c in json.loads(out)["cells"] if c["faultRate"] == SCENARIOS[0]["fault"]["rate"]]
    assert first_cell and all((c["nA"], c["nB"]) == (6, 4) for c in first_cell)


def test_a_round_failed_in_two_sessions_is_listed_once(cli, work):
    run = make_run(work / "R", SCENARIOS[:1])
    failure = {"scenarioId": SCENARIOS[1]["id"], "scenarioIndex": 1, "client": "tenacity.baseline", "round": 2,
               "reason": "client died"}
    unhashable = {**failure, "round": [1]}           # once a TypeError: a list as a key of the cell's rounds
    (run / "failures.jsonl").write_text((json.dumps(failure) + "\n") * 2 + json.dumps(unhashable) + "\n")
    code, out, err = cli("report", "R", *FAST)
    assert code == 0, traceback_free(out, err)
    cells = {c["scenarioId"]: c for c in json.loads((run / "report" / "cells.json").read_text())}
    assert cells[SCENARIOS[1]["id"]]["status"] == "failed rounds: 2"

# -- defect 5: damaged shard metadata ------------------------------------------------------------------------
@pytest.mark.parametrize("change, expected", [
    ({"host": "evil"}, "`host` is not an object"),
    ({"host": [1]}, "`host` is not an object"),
    ({"host": {"hostname": "a\x1b[2Jb"}}, "`host` is not an object"),
    ({"oracleViolations": [1]}, "`oracleViolations` is not an object of counts"),
    ({"shard": "0/2"}, "`shard` is not an object"),
    ({"shard": {"index": 3, "count": 2}}, "`shard` is not an object with 0 <= index < count"),
    ({"versions": [1]}, "`versions` is not an object"),
    ({"sessions": 5}, "`sessions` is not a list of objects"),
    ({"shards": 5}, "`shards` is not a list of objects"),
])
def test_merge_names_damaged_shard_metadata_and_leaves_it_as_it_was(cli, work, change, expected):
    s0, s1 = make_shards(work)
    manifest = json.loads((s1 / "manifest.json").read_text())
    (s1 / "manifest.json").write_text(json.dumps({**manifest, **change}))
    before = snapshot(s1)
    code, out, err = cli("merge", "S0", "S1", "-o", "M")
    text = traceback_free(out, err)
    assert code == 2, text
    assert "S1/manifest.json is damaged" in text and expected in text
    assert snapshot(s1) == before and not (work / "M").exists()       # not renamed to manifest.json.damaged


@pytest.mark.parametrize("damage, expected", [
    (lambda path: path.unlink(), "S1 is damaged: results.jsonl is missing"),
    (lambda path: (path.unlink(), path.mkdir()), "S1/results.jsonl is a directory, not a file"),
])
def test_merge_names_a_missing_or_replaced_results_file(cli, work, damage, expected):
    s0, s1 = make_shards(work)
    damage(s1 / "results.jsonl")
    code, out, err = cli("merge", "S0", "S1", "-o", "M")
    assert code == 2 and expected in traceback_free(out, err)


def test_a_merge_changes_none_of_its_shards(cli, work):
    s0, s1 = make_shards(work)
    (s1 / "logs" / "client.log").write_text("log\n")
    before = [snapshot(s0), snapshot(s1)]
    code, out, err = cli("merge", "S0", "S1", "-o", "M")
    text = traceback_free(out, err)
    assert code == 0 and "merged 2 shards (host0, host1) into M: 12 rows" in text
    assert [snapshot(s0), snapshot(s1)] == before


@pytest.mark.parametrize("manifest", [b'{"versions": {}, "shards": 5}', b'{"versions": {}, "host": [1]}',
                                      b"[" * 100_000 + b"]" * 100_000, b'{"versions": {}, "a": 1, "a": 2}'])
def test_report_and_diff_leave_out_a_damaged_manifest(cli, work, manifest):
    run = make_run(work / "R")
    (run / "manifest.json").write_bytes(manifest)
    for args in (("report", "R", *FAST), ("diff", "R", "R", *FAST)):
        code, out, err = cli(*args)
        assert code == 0, traceback_free(out, err)
    assert (run / "manifest.json").read_bytes() == manifest


@pytest.mark.parametrize("change", [{"host": [1]}, {"shard": {"index": 3, "count": 2}}, {"oracleViolations": [1]}])
def test_resume_refuses_a_shard_whose_manifest_is_damaged(cli, work, change):
    """A damaged manifest is set aside when a run resumes, but a shard's is the only record of its
    shard: setting it aside would resume the shard as the whole plan."""
    s0, s1 = make_shards(work)
    manifest = json.loads((s0 / "manifest.json").read_text())
    (s0 / "manifest.json").write_text(json.dumps({**manifest, **change}))
    before = snapshot(s0)
    code, out, err = cli("run", "--resume", "S0")
    text = traceback_free(out, err)
    assert code == 2 and "S0/manifest.json is damaged" in text and "which shard S0 runs" in text
    assert snapshot(s0) == {**before, "run.lock": snapshot(s0)["run.lock"]}      # the lock names its holder
