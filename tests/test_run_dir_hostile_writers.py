"""What rbl writes into or beside a run directory refuses a link (or a FIFO, or a hard-linked file)
planted there, as `rbl compile -o` does: `rbl report` (RUN/report), `rbl diff` (B/diff-vs-A) and
`rbl run --resume` (the lock, results, manifest, ballast, services' logs). Run directories are
built directly, and one real run checks the same on what `rbl run` writes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rbl.store.own_entries import check_own_entries
from rbl.store.results import RESUME_WRITES, RESUME_WRITES_BENEATH

from .conftest import run_rbl
from .test_run_dir_hostile import FAST, make_run, make_shards, snapshot, traceback_free

PRECIOUS = "precious\n"


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def victim(work) -> Path:
    """A file outside every run directory that nothing may change."""
    path = work / "victim"
    path.mkdir()
    (path / "report.html").write_text(PRECIOUS)
    (path / "diff.csv").write_text(PRECIOUS)
    (path / "file").write_text(PRECIOUS)
    return path


def untouched(victim: Path) -> bool:
    return all(p.read_text() == PRECIOUS for p in victim.iterdir()) and len(list(victim.iterdir())) == 3


def no_staging_left(directory: Path) -> bool:
    return not any(p.name.startswith(".rbl-staging-") for p in directory.iterdir()) if directory.is_dir() else True


# -- rbl report ------------------------------------------------------------------------------------------
def test_report_refuses_a_report_directory_linked_elsewhere(cli, work, victim):
    """Before: `ln -s VICTIM RUN/report; rbl report RUN` overwrote VICTIM/report.html."""
    run = make_run(work / "R")
    (run / "report").symlink_to(victim)
    code, out, err = cli("report", "R", *FAST)
    text = traceback_free(out, err)
    assert code == 2, text
    assert "R/report is a symbolic link (rbl would write through it)" in text and "-o" in text
    assert untouched(victim)


@pytest.mark.parametrize("name", ["report.html", "cells.csv", "successTimePerRequest.svg", "noise.json"])
def test_report_refuses_a_link_planted_where_one_of_its_files_goes(cli, work, victim, name):
    run = make_run(work / "R")
    (run / "report").mkdir()
    (run / "report" / name).symlink_to(victim / "report.html")
    code, out, err = cli("report", "R", *FAST)
    text = traceback_free(out, err)
    assert code == 2, text
    assert f"R/report/{name} is a symbolic link" in text
    assert untouched(victim)
    assert [p.name for p in (run / "report").iterdir()] == [name]      # nothing moved in, no staging left


def test_report_refuses_a_fifo_where_a_file_goes_and_a_file_where_its_directory_goes(cli, work):
    run = make_run(work / "R")
    (run / "report").mkdir()
    os.mkfifo(run / "report" / "cells.json")
    code, out, err = cli("report", "R", *FAST)
    assert code == 2 and "R/report/cells.json is not a regular file" in traceback_free(out, err)
    other = make_run(work / "R2")
    (other / "report").write_text(PRECIOUS)
    code, out, err = cli("report", "R2", *FAST)
    assert code == 2 and "R2/report exists and is not a directory" in traceback_free(out, err)
    assert (other / "report").read_text() == PRECIOUS


def test_a_report_directory_the_user_names_may_be_a_link(cli, work):
    run = make_run(work / "R")
    (work / "real").mkdir()
    (work / "named").symlink_to(work / "real")
    code, out, err = cli("report", "R", *FAST, "-o", "named")
    assert code == 0, traceback_free(out, err)
    assert (work / "real" / "report.html").is_file() and no_staging_left(work / "real")
    # and a second report replaces the first one's files (regular files: replaced whole)
    code, out, err = cli("report", "R", *FAST, "-o", "named")
    assert code == 0 and no_staging_left(work / "real")
    assert not (run / "report").exists()


# -- rbl diff --------------------------------------------------------------------------------------------
def test_diff_refuses_its_default_directory_linked_elsewhere(cli, work, victim):
    make_run(work / "A")
    b = make_run(work / "B")
    (b / "diff-vs-A").symlink_to(victim)
    code, out, err = cli("diff", "A", "B", *FAST)
    text = traceback_free(out, err)
    assert code == 2 and "B/diff-vs-A is a symbolic link (rbl would write through it)" in text
    assert untouched(victim)


def test_diff_refuses_a_link_planted_where_one_of_its_files_goes(cli, work, victim):
    make_run(work / "A")
    b = make_run(work / "B")
    (b / "diff-vs-A").mkdir()
    (b / "diff-vs-A" / "diff.csv").symlink_to(victim / "diff.csv")
    code, out, err = cli("diff", "A", "B", *FAST)
    text = traceback_free(out, err)
    assert code == 2 and "B/diff-vs-A/diff.csv is a symbolic link" in text
    assert untouched(victim) and [p.name for p in (b / "diff-vs-A").iterdir()] == ["diff.csv"]


def test_a_diff_directory_the_user_names_may_be_a_link(cli, work):
    make_run(work / "A")
    make_run(work / "B")
    (work / "real").mkdir()
    (work / "named").symlink_to(work / "real")
    code, out, err = cli("diff", "A", "B", *FAST, "-o", "named")
    assert code == 0, traceback_free(out, err)
    assert sorted(p.name for p in (work / "real").iterdir()) == ["diff.csv", "diff.json", "diff.svg"]


# -- rbl run --resume ------------------------------------------------------------------------------------
def _plant_link(run: Path, name: str, victim: Path) -> None:
    path = run / name
    if path.is_file():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(victim / "file")


@pytest.mark.parametrize("name", ["run.lock", ".rbl-ballast", "results.jsonl", "failures.jsonl", "manifest.json",
                                  "results.csv", "results.csv.tmp", "manifest.json.tmp", "logs/tenacity.log",
                                  "logs/deeper/x.log", "envoy/envoy.yaml", "requests/s1/round-1.parquet",
                                  "requests/s1/round-2.work/schedule.txt", "requests/s1/round-2.work/requests.csv",
                                  "calibration/schedule.txt"])
def test_resume_refuses_a_link_where_it_writes_and_changes_nothing(cli, work, victim, name):
    """Before: a run.lock linked to a file emptied it (the lock file is truncated), a .rbl-ballast
    filled it with zeros, and the services appended their logs through a link in logs/."""
    run = make_run(work / "R")
    _plant_link(run, name, victim)
    before = snapshot(run)
    code, out, err = cli("run", "--resume", "R")
    text = traceback_free(out, err)
    assert code == 2, text
    assert f"R/{name} is a symbolic link; rbl does not write there" in text
    assert untouched(victim) and snapshot(run) == before


@pytest.mark.parametrize("name", ["logs", "envoy", "requests", "requests/s1", "requests/s1/round-2.work",
                                  "calibration"])
def test_resume_refuses_a_linked_directory_where_services_write(cli, work, victim, name):
    """Before: requests/ and calibration/ were not checked, and an open-loop round emptied the
    directory a planted requests/SCENARIO/round-N.work pointed to."""
    run = make_run(work / "R")
    if (run / name).exists():
        (run / name).rmdir()
    (run / name).parent.mkdir(parents=True, exist_ok=True)
    (run / name).symlink_to(victim)
    code, out, err = cli("run", "--resume", "R")
    assert code == 2 and f"R/{name} is a symbolic link" in traceback_free(out, err)
    assert untouched(victim)


def test_every_directory_a_run_writes_is_checked_before_resume():
    """The list the pre-check walks is the one the writers name their directories from."""
    from rbl.store.run_layout import RUN_TREES
    assert set(RESUME_WRITES_BENEATH) == set(RUN_TREES) >= {"logs", "envoy", "requests", "calibration"}


# -- an open-loop round's work directory (requests/SCENARIO/round-N.work, calibration/) ---------------
def _round_setup(scenario_id: str = "s1"):
    from types import SimpleNamespace
    from rbl.plan_records import ClientKind
    return SimpleNamespace(scenario={"id": scenario_id}, round_number=1, client_kind=ClientKind.LIBRARY,
                           load=SimpleNamespace(warmup_s=0.0))


class _DoneLoad:
    """A load generator that has finished, with one request in its CSV."""

    def __init__(self, csv_path: Path):
        self.csv_path = csv_path

    def result(self):
        return self.csv_path, {}


CSV = ("seq,scheduled_ns,sent_ns,latency_ns,status,flags,ok,requests,last_status,error,ending\n"
       "0,0,10,1000,200,,1,1,200,,\n")


def test_a_rounds_work_directory_linked_elsewhere_is_not_emptied(work, victim):
    """Before: `open_loop` removed every file of the directory a planted round-N.work link pointed to."""
    from rbl.runner.backend import RoundFailed
    from rbl.runner.open_loop import LoadRound
    run = work / "R"
    (run / "requests" / "s1").mkdir(parents=True)
    (run / "requests" / "s1" / "round-1.work").symlink_to(victim)
    (work / "requests.csv").write_text(CSV)
    load_round = LoadRound(_DoneLoad(work / "requests.csv"), run / "requests" / "s1" / "round-1.work", run,
                           _round_setup())
    with pytest.raises(RoundFailed, match="round-1.work is a symbolic link"):
        load_round.result()
    assert untouched(victim)


def test_a_rounds_work_directory_loses_only_its_own_entries(work, victim):
    """A link inside the work directory is removed itself; what it points to is kept."""
    from rbl.runner.open_loop import LoadRound
    run = work / "R"
    work_dir = run / "requests" / "s1" / "round-1.work"
    work_dir.mkdir(parents=True)
    (work_dir / "requests.csv").write_text(CSV)
    (work_dir / "schedule.txt").symlink_to(victim / "file")
    (work_dir / "elsewhere").symlink_to(victim)
    table, _ = LoadRound(_DoneLoad(work_dir / "requests.csv"), work_dir, run, _round_setup()).result()
    assert table.num_rows == 1 and not work_dir.exists() and untouched(victim)
    assert (run / "requests" / "s1" / "round-1.parquet").is_file()


@pytest.mark.parametrize("planted", ["schedule.txt", "body.json", "stdout.txt", "stderr.txt"])
def test_the_load_generator_never_writes_through_a_link_left_in_its_work_directory(work, victim, planted):
    """Before: a leftover round-N.work holding a link (schedule, job body, output) had its target
    overwritten when the round was redone."""
    from rbl.runner.load_generator import LoadRun
    work_dir = work / "round-1.work"
    work_dir.mkdir()
    (work_dir / planted).symlink_to(victim / "file")
    load = LoadRun(Path("/bin/true"), "http://127.0.0.1:1/", [0], work_dir, 1.0, 1.0, body={"x": 1})
    try:
        load.wait(10)
    finally:
        load.stop()
    assert untouched(victim) and not (work_dir / planted).is_symlink()


def test_the_load_generator_refuses_a_work_directory_that_is_a_link(work, victim):
    from rbl.errors import UsageError
    from rbl.runner.load_generator import LoadRun
    (work / "round-1.work").symlink_to(victim)
    with pytest.raises(UsageError, match="round-1.work is a symbolic link"):
        LoadRun(Path("/bin/true"), "http://127.0.0.1:1/", [0], work / "round-1.work", 1.0, 1.0)
    assert untouched(victim)


@pytest.mark.parametrize("name", ["results.jsonl", "run.lock", "logs/tenacity.log"])
def test_resume_refuses_a_file_hard_linked_to_another(cli, work, victim, name):
    """Appending to (or truncating) a file with another hard link changes the other name's file too."""
    run = make_run(work / "R")
    path = run / name
    if not path.exists():
        path.write_text("")
    os.link(path, work / "elsewhere")
    before = (work / "elsewhere").read_bytes()
    code, out, err = cli("run", "--resume", "R")
    text = traceback_free(out, err)
    assert code == 2 and f"R/{name} has 1 other hard link(s)" in text
    assert (work / "elsewhere").read_bytes() == before


def test_resume_refuses_a_fifo_where_it_writes(cli, work):
    run = make_run(work / "R")
    os.mkfifo(run / "failures.jsonl")
    code, out, err = cli("run", "--resume", "R")
    assert code == 2 and "R/failures.jsonl is not a regular file" in traceback_free(out, err)


# -- one real run ----------------------------------------------------------------------------------------
SPEC = """
space real {
  rounds = 2
  users = 2
  successes = 2
  max_requests = 8
  target = "/bytes/64"
  fault.kind = abort
  fault.status = 503
  fault.rate in [0%, 50%]
  client tenacity.baseline {}
}
"""


@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("real")
    (work / "real.rbl").write_text(SPEC)
    done = run_rbl("run", "real.rbl", "-o", "run", "--proxy", "builtin", cwd=work, timeout=240)
    assert done.returncode == 0, done.stderr
    return work / "run"


def _copy_of(run: Path, into: Path) -> Path:
    import shutil
    return Path(shutil.copytree(run, into / "run", ignore=shutil.ignore_patterns("report", "diff-vs-*")))


def test_on_a_real_run_planted_links_are_refused_by_report_resume_and_merge(cli, work, victim, real_run):
    run = _copy_of(real_run, work)
    logs = sorted(p.name for p in (run / "logs").iterdir())
    assert logs, "a real run keeps its services' logs"
    # what `rbl run` itself leaves is never taken for something planted
    check_own_entries(real_run, RESUME_WRITES, RESUME_WRITES_BENEATH)
    # report: the default directory linked elsewhere
    (run / "report").symlink_to(victim)
    code, out, err = cli("report", "run", *FAST)
    assert code == 2 and "run/report is a symbolic link" in traceback_free(out, err) and untouched(victim)
    (run / "report").unlink()
    code, out, err = cli("report", "run", *FAST)
    assert code == 0 and (run / "report" / "report.html").is_file(), traceback_free(out, err)
    # resume: a service's log linked elsewhere is refused before any service starts
    log = run / "logs" / logs[0]
    log.unlink()
    log.symlink_to(victim / "file")
    code, out, err = cli("run", "--resume", "run")
    assert code == 2 and f"run/logs/{logs[0]} is a symbolic link" in traceback_free(out, err) and untouched(victim)
    # merge: the same link is not copied, the real logs are, and the run is left as it was
    before = snapshot(run)
    code, out, err = cli("merge", "run", "-o", "merged")
    text = traceback_free(out, err)
    assert code == 0, text
    assert f"run/logs/{logs[0]}: is a symbolic link" in text
    assert sorted(p.name for p in (work / "merged" / "logs" / "shard-0-of-1").iterdir()) == logs[1:]
    assert snapshot(run) == before
    merged = [json.loads(line) for line in (work / "merged" / "results.jsonl").read_text().splitlines()]
    assert len(merged) == len((real_run / "results.jsonl").read_text().splitlines()) == 2 * 2 * 2


def test_merged_shards_leave_no_link_behind(cli, work):
    """copytree(symlinks=True) once copied a shard's links as links into the merged directory."""
    s0, s1 = make_shards(work)
    (s0 / "logs" / "a.log").symlink_to("/etc/hostname")
    code, out, err = cli("merge", "S0", "S1", "-o", "M")
    assert code == 0, traceback_free(out, err)
    assert not [p for p in (work / "M").rglob("*") if p.is_symlink()]
