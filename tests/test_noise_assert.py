"""`assert noise < N%` on a real run (local backend): checked after the run, exit 3 with the floor."""

from __future__ import annotations

import json
import shutil

from rbl.report.noise_assert import noise_assertion_result

from .conftest import run_rbl as rbl

SPACE = """space aa {
  rounds = 3
  users = 3
  successes = 4
  max_requests = 20
  target = "/bytes/64"
  fault.kind = abort
  fault.rate = 0%
  client tenacity.baseline {}
  client tenacity.retry {
    stop_after_attempt = 3
    wait = fixed
    wait_fixed in [2ms, 8ms]
  }
  assert noise < 0.001%
}
"""


def test_a_noise_floor_over_the_bound_fails_the_run_with_the_measured_floor(tmp_path):
    (tmp_path / "aa.rbl").write_text(SPACE)
    done = rbl("run", "aa.rbl", "-o", "run", cwd=tmp_path)
    # no real run resolves a thousandth of a percent: 3 rounds give t-intervals with 2 degrees of freedom
    assert done.returncode == 3, done.stdout + done.stderr
    output = done.stdout + done.stderr
    assert "assert noise < 0.001% failed: the noise floor is " in output
    assert "3 A/A cells have 3 rounds or fewer" in output and "order = randomized" in output
    # the same run against a bound it meets: the floor it reports, plus one, holds
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "run", copy)
    plan = json.loads((copy / "plan.json").read_text())
    held, message = noise_assertion_result(copy)
    floor = float(message.split("the noise floor is ")[1].split("%")[0])
    plan["assert_noise"] = {"op": "<=", "percent": floor + 1}
    (copy / "plan.json").write_text(json.dumps(plan))
    held, message = noise_assertion_result(copy)
    assert held and message.startswith(f"assert noise <= {floor + 1:g}% holds: the noise floor is ")
    del plan["assert_noise"]
    (copy / "plan.json").write_text(json.dumps(plan))
    assert noise_assertion_result(copy) is None


def test_bad_noise_assertions_are_located_errors(tmp_path):
    for bad, column, words in (("assert noise > 5%", 3, "cannot be asked for"), ("assert noise < 5", 18, "is a percentage"),
                               ("assert size == 5%", 18, "a count, not a percentage")):
        (tmp_path / "bad.rbl").write_text(SPACE.replace("assert noise < 0.001%", bad))
        done = rbl("check", "bad.rbl", cwd=tmp_path)
        assert done.returncode == 1 and "E0312" in done.stderr and words in done.stderr, done.stderr
        assert f"bad.rbl:15:{column}" in done.stderr and "Traceback" not in done.stderr


def test_one_shard_does_not_check_the_noise_of_the_whole_run(tmp_path):
    (tmp_path / "aa.rbl").write_text(SPACE)
    done = rbl("run", "aa.rbl", "--shard", "0/2", "-o", "shard0", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "is checked on the whole run, not on shard 0/2: `rbl merge` checks it" in done.stdout + done.stderr
    done = rbl("run", "aa.rbl", "--shard", "1/2", "-o", "shard1", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    merged = rbl("merge", "shard0", "shard1", "-o", "merged", cwd=tmp_path)
    assert merged.returncode == 3 and "assert noise < 0.001% failed: the noise floor is " in merged.stderr, merged.stderr
