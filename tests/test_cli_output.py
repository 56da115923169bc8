"""What a user sees at 80 columns: help text, the run summary and report table (labels whole, with
units), progress without and with a terminal, the estimated duration, the dry run, the hint to
run `rbl report`, one "interrupted" on Ctrl-C, and shell completion."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from rbl.report.keyed_table import NumberColumn, print_keyed_table
from rbl.runner import notices as notices_module, progress as progress_module
from rbl.runner.notices import BuildNotice
from rbl.runner.progress import RunProgress

from .conftest import as_from_a_shell, run_rbl as rbl

REPO = Path(__file__).resolve().parent.parent
QUICKSTART = REPO / "examples" / "quickstart.rbl"
ELLIPSIS = "\u2026"


@pytest.fixture
def cli80(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    return cli


# ---- help and completion --------------------------------------------------------------------

def test_run_help_keeps_defaults_and_shows_flags_as_flags(cli80):
    code, out, _ = cli80("run", "--help")
    assert code == 0
    flat = " ".join(out.split())
    assert "The run directory to create [default: runs/NAME-TIME]." in flat
    assert "gunicorn workers serving httpbin [default: one per core]." in flat
    assert "[default: random, recorded]" in flat
    assert "<bool>" not in out and not re.search(r"\w \.(\s|$)", flat)      # "to create ." lost its default
    assert re.search(r"^\s+--report\s+Build the report", out, re.M)
    assert re.search(r"^\s+--dry-run\s+Start and check the services", out, re.M)
    for option in ("--rounds N", "--users N,M,...", "--set SETTING"):
        assert option in out
    assert max(len(line) for line in out.splitlines()) <= 80


@pytest.mark.parametrize("command", ["check", "plan", "compile", "report", "explain", "import"])
def test_every_help_fits_80_columns_and_keeps_its_defaults(cli80, command):
    code, out, _ = cli80(command, "--help")
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "<bool>" not in out and not re.search(r"\w \.(\s|$)", " ".join(out.split()))


def test_the_command_list_is_not_cut(cli80):
    code, out, _ = cli80("--help")
    assert code == 0
    for command in ("check", "plan", "compile", "run", "report", "explain", "import"):
        (line,) = [line for line in out.splitlines() if re.match(rf"^\s+{command}\s", line)]
        assert not line.endswith("..."), line


def test_shell_completion_is_offered_and_completes_commands_and_options(tmp_path):
    code = rbl("--help", cwd=tmp_path)
    assert "--install-completion" in code.stdout and "--show-completion" in code.stdout
    # typer detects the user's shell from the process tree; a test runner's may be plain sh
    script = rbl("--show-completion", "bash", cwd=tmp_path, env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert script.returncode == 0 and "complete" in script.stdout and "_RBL_COMPLETE" in script.stdout
    words = rbl(cwd=tmp_path, env={"_RBL_COMPLETE": "complete_bash", "COMP_WORDS": "rbl run --ro",
                                   "COMP_CWORD": "2"})
    assert set(words.stdout.split()) == {"--rounds", "--round-timeout"}


@pytest.mark.parametrize("words, expected", [
    ("rbl run --proxy ", {"auto", "envoy", "builtin"}),
    ("rbl run --backend k", {"kubernetes"}),
    ("rbl run --order r", {"randomized"}),
    ("rbl calibrate --proxy e", {"envoy"}),
    ("rbl explain E022", {"E0220", "E0221", "E0222", "E0223", "E0224", "E0225", "E0226", "E0227", "E0228",
                           "E0229"}),
])
def test_completion_offers_an_option_s_values_and_explain_s_codes(tmp_path, words, expected):
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    done = rbl(cwd=tmp_path, env={"_RBL_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)})
    assert set(done.stdout.split()) == expected, done.stdout + done.stderr


# ---- plan: the estimated duration -----------------------------------------------------------

def test_plan_estimates_the_duration(cli80):
    code, out, _ = cli80("plan", QUICKSTART)
    assert code == 0
    (line,) = [line for line in out.splitlines() if line.startswith("time")]
    assert re.fullmatch(r"time    = about \d+ s \(estimated with 1\.6 ms per request, assumed\)", line)
    code, out, _ = cli80("plan", QUICKSTART, "--request-time", "50")
    slow = re.search(r"about (\d+) (s|min)", out)
    assert slow and (slow.group(2) == "min" or int(slow.group(1)) > 60)
    code, out, _ = cli80("plan", QUICKSTART, "--json")
    assert json.loads(out)["estimated_seconds"] > 0


# ---- tables ---------------------------------------------------------------------------------

LABELS = ["resilience4j.retry initialIntervalMillis=20ms", "resilience4j.retry initialIntervalMillis=40ms",
          "resilience4j.circuit_breaker waitDurationInOpenState=60ms"]
COLUMNS = [NumberColumn(name) for name in ("fault %", "users", "rounds", "total execution time (ms)",
                                           "average success time (ms)", "fault % applied")]


def table_text(width: int) -> str:
    out = io.StringIO()
    rows = [(label, ["20", "10", "2", "1234.5", "123.4", "19.8"]) for label in LABELS]
    print_keyed_table(Console(file=out, width=width), "median per virtual user", "client and configuration",
                      COLUMNS, rows)
    return out.getvalue()


@pytest.mark.parametrize("width", [80, 100])
def test_narrow_tables_key_the_labels_and_print_them_whole_below(width):
    text = table_text(width)
    assert ELLIPSIS not in text
    assert max(len(line) for line in text.splitlines()) <= width
    for key, label in zip("ABC", LABELS):
        assert re.search(rf"^\s+{key}\s+{re.escape(label)}$", text, re.M)
    assert "1234.5" in text and "123.4" in text and "19.8" in text


@pytest.mark.parametrize("width", [130, 200])
def test_wide_tables_print_the_labels_in_place(width):
    text = table_text(width)
    assert all(f"\u2503 {label} " in text or f"\u2502 {label} " in text for label in LABELS)
    assert "key" not in text and ELLIPSIS not in text and max(len(line) for line in text.splitlines()) <= width


def overload_records(low: float | None) -> list[dict]:
    """Three cells of a pool sweep as cells_as_records gives them: one fault rate, one user count, one load."""
    metrics = ("carriedThroughput", "successP99Ms", "p95UnderSloShare")
    return [{"configuration": f"istio.circuit_breaker http2MaxRequests={pool}", "scenarioId": f"s{pool}",
             "faultRate": 0, "users": 1, "load": "120% of capacity, constant", "interval": "rounds-t",
             "status": "too few observations",
             **{f"{m}.{part}": value for m in metrics
                for part, value in (("median", 8.211), ("ci95Low", low), ("ci95High", None if low is None else 18.34))}}
            for pool in (1, 20, 1024)]


@pytest.mark.parametrize("width", [80, 100, 140])
def test_the_cell_table_fits_says_shared_conditions_once_and_never_splits_an_interval(width):
    from rbl.report.build import print_table
    for low in (None, 0.0):
        out = io.StringIO()
        print_table(overload_records(low), ["carriedThroughput", "successP99Ms", "p95UnderSloShare"],
                    Console(file=out, width=width))
        text = out.getvalue()
        # rich's own measure is a column short of what it draws at 100: every line is whole, borders included
        assert max(len(line) for line in text.splitlines()) <= width, text
        assert all(line.rstrip()[-1] in "\u2513\u2503\u2529\u2502\u2518" for line in text.splitlines()
                   if line.startswith(("\u250f", "\u2503", "\u2521", "\u2502", "\u2514"))), text
        assert "(every cell: fault 0%, 1 user, load 120% of capacity, constant)" in " ".join(text.split())
        assert "fault %" not in text.split("\n", 2)[-1]                      # no column of its own
        if low is not None:
            assert "[0,18.34]*" in text                                      # the interval on one line


def test_a_column_empty_throughout_is_printed_not_a_crash():
    # `rbl diff` where nothing differs: its flag column has no header and no text in any row
    out = io.StringIO()
    rows = [(label, ["20", ""]) for label in LABELS]
    print_keyed_table(Console(file=out, width=80), "nothing differs", "configuration",
                      [NumberColumn("fault %"), NumberColumn("", "left")], rows)
    assert all(label in out.getvalue() for label in LABELS)
    empty = io.StringIO()                       # and a table without rows (a run with no cell yet)
    print_keyed_table(Console(file=empty, width=80), "no cells", "configuration", [NumberColumn("fault %")], [])
    assert "configuration" in empty.getvalue()


# ---- progress -------------------------------------------------------------------------------

SCENARIO = {"index": 0, "client": "tenacity.retry", "config": {"multiplier": 0.005},
            "fault": {"kind": "abort", "rate": 50}, "users": 5}


def test_without_a_terminal_every_finished_round_is_reported(monkeypatch):
    monkeypatch.setattr(progress_module, "LINE_INTERVAL", 0.0)
    out = io.StringIO()
    with RunProgress(Console(file=out, width=80), 3, 2) as progress:
        for scenario in range(3):
            for round_number in (1, 2):
                progress.round_started({**SCENARIO, "index": scenario}, round_number)
                progress.advance({**SCENARIO, "index": scenario}, round_number)
    lines = out.getvalue().splitlines()
    assert [re.search(r"(\d+)/6 rounds", line).group(1) for line in lines] == ["1", "2", "3", "4", "5", "6"]
    assert "scenario 3/3 round 2/2" in lines[-1]


def test_a_shard_names_its_scenarios_by_their_number_in_the_plan(monkeypatch):
    monkeypatch.setattr(progress_module, "LINE_INTERVAL", 0.0)
    out = io.StringIO()
    with RunProgress(Console(file=out, width=120), 2, 1, plan_size=9) as progress:   # a shard of 2 of 9
        for index in (4, 7):
            progress.round_started({**SCENARIO, "index": index}, 1)
            progress.advance({**SCENARIO, "index": index}, 1)
    lines = out.getvalue().splitlines()
    assert "1/2 rounds" in lines[0] and "scenario 5/9 round 1/1" in lines[0]
    assert "2/2 rounds" in lines[-1] and "scenario 8/9 round 1/1" in lines[-1]


def test_without_a_terminal_fast_rounds_are_throttled_but_the_last_is_always_said():
    out = io.StringIO()
    with RunProgress(Console(file=out, width=80), 50, 2) as progress:
        for index in range(100):
            progress.round_started({**SCENARIO, "index": index // 2}, index % 2 + 1)
            progress.advance({**SCENARIO, "index": index // 2}, index % 2 + 1)
    lines = out.getvalue().splitlines()
    assert 1 <= len(lines) < 10
    assert "100/100 rounds" in lines[-1]


def test_the_eta_weighs_rounds_by_their_modelled_duration(monkeypatch):
    monkeypatch.setattr(progress_module, "LINE_INTERVAL", 0.0)
    common = {"fault": {"kind": "abort", "rate": 80, "status": 503}, "users": 5, "library": "tenacity",
              "successes": 10, "max_requests": 500}
    baseline = {**common, "index": 0, "client": "tenacity.baseline", "pattern": "baseline", "config": {}}
    retry = {**common, "index": 1, "client": "tenacity.retry", "pattern": "retry",
             "config": {"stop_after_attempt": 6, "wait": "fixed", "wait_fixed": 0.1, "multiplier": 1,
                        "exp_base": 2, "wait_max": 0}}
    out = io.StringIO()
    with RunProgress(Console(file=out, width=120), 2, 1, plan_scenarios=lambda: iter([baseline, retry])) as progress:
        progress.started -= 10.0                      # the baseline round took 10 s
        progress.round_started(baseline, 1)
        progress.advance(baseline, 1)
    line = out.getvalue().splitlines()[0]
    hours, minutes, seconds = map(int, re.search(r"ETA (\d+):(\d\d):(\d\d)", line).groups())
    # one of two rounds done in 10 s, but the retry round under 80% faults is modelled ~25x longer
    assert hours * 3600 + minutes * 60 + seconds >= 100, line


def test_on_a_100_column_terminal_the_counts_and_times_are_never_cut():
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=True, color_system=None)
    long = {**SCENARIO, "client": "resilience4j.circuit_breaker" + "_very_long" * 5}
    with RunProgress(console, 70, 2) as progress:
        progress.round_started(long, 1)
        progress.advance(long, 1)
    final = [line for line in out.getvalue().splitlines() if "rounds" in line][-1]
    assert re.search(r"1/140 rounds \d:\d\d:\d\d ETA (\d:\d\d:\d\d|-:--:--)", final), final


def test_a_long_build_says_it_is_still_going(monkeypatch):
    import time
    monkeypatch.setattr(notices_module, "BUILD_TICK", 0.05)
    out = io.StringIO()
    with BuildNotice(Console(file=out, width=80)) as notice:
        notice.say("building the resilience4j client ...")
        time.sleep(0.3)
    text = out.getvalue()
    assert text.startswith("building the resilience4j client ...")
    assert "still building" in text and re.search(r"built in \d+ s", text)


# ---- a real run at 80 columns ---------------------------------------------------------------

@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("ux")
    done = rbl("run", QUICKSTART, "--rounds", "1", "--users", "2", "--set", "successes=3", "-o", "run",
               cwd=work, env={"COLUMNS": "80"})
    return work, done


def test_a_quick_run_prints_a_readable_summary_at_80_columns(small_run):
    work, done = small_run
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "overrides: --rounds 1, --users 2, --set successes=3" in out
    assert ELLIPSIS not in out and max(len(line) for line in out.splitlines()) <= 80
    for label in ("tenacity.retry multiplier=5ms", "tenacity.retry multiplier=10ms",
                  "pybreaker.circuit_breaker reset_timeout=20ms", "pybreaker.circuit_breaker reset_timeout=50ms"):
        assert re.search(rf"^\s+[A-Z]\s+{re.escape(label)}$", out, re.M), out
    assert "average" in out and "per request" not in out       # the report's wording: average success time
    assert "0.005" not in out and "0.02" not in out
    assert f"next: `rbl report {Path('run')}`" in done.stderr
    manifest = json.loads((work / "run" / "manifest.json").read_text())
    assert manifest["spec"]["overrides"] == ["--rounds 1", "--users 2", "--set successes=3"]
    # the W0303 warning says the assertion is the spec's, and the run went ahead
    assert "warning[W0303]" in done.stderr


def test_the_report_of_that_run_reads_at_80_columns(small_run):
    work, _ = small_run
    done = rbl("report", "run", "--resamples", "100", cwd=work, env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    assert ELLIPSIS not in done.stdout and max(len(line) for line in done.stdout.splitlines()) <= 80
    assert re.search(r"^\s+[A-Z]\s+tenacity\.retry multiplier=10ms$", done.stdout, re.M)
    # what to deploy first (one round tells nothing yet, and says how many would), the findings (one
    # round resolves nothing, and says what more rounds add), then the A/A check
    flat = " ".join(done.stdout.split())
    assert flat.startswith("Which configuration to deploy, for the least total execution time (ms)")
    assert "cannot tell yet" in flat and "run 3 or more (`--rounds 3`)" in flat
    assert "Findings: With one round per cell, none of the 8 comparisons can be resolved." in flat
    assert "Run it again with `--rounds 3` or more" in flat
    assert flat.index("Which configuration") < flat.index("Findings:") < flat.index("A/A check: ") \
        < flat.index("median [95% CI] per cell")
    html = (work / "run" / "report" / "report.html").read_text()
    assert "<code>--rounds 1</code>, <code>--users 2</code>, <code>--set successes=3</code>" in html
    cells = json.loads((work / "run" / "report" / "cells.json").read_text())
    assert {c["configuration"] for c in cells} >= {"tenacity.retry multiplier=5ms",
                                                     "pybreaker.circuit_breaker reset_timeout=50ms"}


def test_dry_run_starts_and_checks_the_services_and_runs_nothing(tmp_path):
    done = rbl("run", QUICKSTART, "--dry-run", "-o", "never", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    err = done.stderr
    assert "tenacity client service (python): healthy, tenacity 9." in err
    assert "pybreaker client service (python): healthy, pybreaker 1." in err
    assert re.search(r"one request \d+\.\d ms", err)
    assert re.search(r"estimated duration of the run: about \d+ s \(estimated with \d+\.\d ms per request, measured\)",
                     err)
    assert "no scenario was run and no run directory was written" in err
    assert not (tmp_path / "never").exists() and not (tmp_path / "runs").exists()


def test_ctrl_c_says_interrupted_once(tmp_path):
    import signal
    import subprocess
    import sys
    import time
    import os
    process = subprocess.Popen([sys.executable, "-m", "rbl", "run", str(QUICKSTART), "-o", "run"], cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO)}, preexec_fn=as_from_a_shell)
    deadline = time.monotonic() + 120
    while not (tmp_path / "run" / "results.jsonl").exists() or not (tmp_path / "run" / "results.jsonl").stat().st_size:
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert err.count("interrupted") == 1, err
    assert "continue with `rbl run --resume" in err


def test_the_readme_diagnostic_example_is_the_real_output():
    readme = (REPO / "README.md").read_text()
    block = re.search(r"```\n(error\[E0203\].*?)```", readme, re.S).group(1)
    done = rbl("check", "type-out-of-range.rbl", cwd=REPO / "tests" / "errors", env={"NO_COLOR": "1"})
    assert done.returncode == 1
    assert done.stderr.startswith(block), done.stderr
