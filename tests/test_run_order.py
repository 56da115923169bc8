"""Run order (rbl/store/run_order.py): sequential, blocked and randomized with a seed, in the
language, the plan and real runs, and a resumed run keeping the order it started with."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from rbl.compiler.pipeline import compile_source
from rbl.compiler.plan import plan_header
from rbl.errors import UsageError
from rbl.store.plan_file import check_header
from rbl.store.run_order import (MAX_RANDOMIZED_RUNS, RunOrder, check_order_fits, choose_order, ordered_runs,
                                  recorded_order, shuffled_runs)

from .test_run import process_gone, rbl, rows, start_run_in_background, wait_until

SCENARIOS = [{"id": f"s{i}", "index": i} for i in range(5)]


def order_of(order: RunOrder, rounds: int = 3) -> list[tuple[str, int]]:
    return [(s["id"], r) for s, r in ordered_runs(order, lambda: iter(SCENARIOS), rounds)]


def test_sequential_is_algorithm_1_order():
    assert order_of(RunOrder("sequential")) == [(f"s{i}", r) for i in range(5) for r in (1, 2, 3)]


def test_blocked_runs_round_1_of_every_scenario_before_round_2():
    assert order_of(RunOrder("blocked")) == [(f"s{i}", r) for r in (1, 2, 3) for i in range(5)]


def test_the_same_seed_gives_the_same_order_and_another_seed_another():
    first = order_of(RunOrder("randomized", 42))
    assert first == order_of(RunOrder("randomized", 42))
    assert first != order_of(RunOrder("randomized", 43))
    assert first != order_of(RunOrder("sequential"))
    # the order is part of the run's record: it must not change with a Python or library version
    assert shuffled_runs(3, 2, 7) == [0, 1, 0, 2, 2, 1]


def test_a_randomized_order_runs_every_round_once_and_numbers_a_scenarios_rounds_as_they_run():
    order = order_of(RunOrder("randomized", 5), rounds=4)
    assert Counter(order) == Counter((f"s{i}", r) for i in range(5) for r in range(1, 5))
    for i in range(5):
        assert [r for s, r in order if s == f"s{i}"] == [1, 2, 3, 4]      # warm-up rounds come first


def test_shuffles_are_spread_evenly():
    """Where scenario 0's first round lands, over many seeds: each of the 5 first places about equally."""
    firsts = Counter(shuffled_runs(5, 1, seed).index(0) for seed in range(2000))
    assert all(300 < firsts[place] < 500 for place in range(5)), firsts


def test_choosing_an_order():
    header = {"size": 10, "rounds": 2}
    assert choose_order(header) == RunOrder("sequential")
    assert choose_order({**header, "order": {"kind": "randomized", "seed": 9}}) == RunOrder("randomized", 9)
    assert choose_order({**header, "order": {"kind": "randomized", "seed": 9}}, "blocked") == RunOrder("blocked")
    assert choose_order(header, "randomized", 3) == RunOrder("randomized", 3)
    fresh = choose_order(header, "randomized")
    assert fresh.kind == "randomized" and isinstance(fresh.seed, int)
    with pytest.raises(UsageError, match="--order must be one of"):
        choose_order(header, "shuffled")
    with pytest.raises(UsageError, match="--order-seed applies to a randomized order"):
        choose_order(header, "blocked", 3)
    with pytest.raises(UsageError, match="more than rbl shuffles") as refused:
        check_order_fits(RunOrder("randomized", 1), {"size": MAX_RANDOMIZED_RUNS, "rounds": 2})
    assert "order = blocked" in refused.value.hint
    check_order_fits(RunOrder("blocked"), {"size": MAX_RANDOMIZED_RUNS, "rounds": 2})


def test_recorded_orders_round_trip_and_damaged_ones_are_refused():
    for order in (RunOrder("sequential"), RunOrder("blocked"), RunOrder("randomized", 2**40)):
        assert recorded_order(json.loads(json.dumps(order.record()))) == order
    for damaged in (None, [], {"kind": "random"}, {"kind": "randomized"}, {"kind": "randomized", "seed": "1"},
                    {"kind": "randomized", "seed": -1}, {"kind": "randomized", "seed": 1, "shuffle": "other-v9"}):
        assert recorded_order(damaged) is None


# -- the language and the plan ------------------------------------------------------------------------

SPEC = """
space ordered {{
  users = 2
{settings}
  client tenacity.baseline {{}}
}}
"""


def compiled(settings: str):
    return compile_source(SPEC.format(settings=settings), "ordered.rbl")


def test_order_and_warmup_compile_into_the_plan_and_validate():
    header = plan_header(compiled("  order = randomized\n  order.seed = 11\n  warmup = 2").space)
    assert header["order"] == {"kind": "randomized", "seed": 11} and header["warmup"] == 2
    check_header(header, "plan")
    blocked = plan_header(compiled("  order = blocked").space)
    assert blocked["order"] == {"kind": "blocked"} and "warmup" not in blocked


def test_a_spec_that_says_nothing_keeps_the_plan_it_had():
    header = plan_header(compiled("").space)
    assert "order" not in header and "warmup" not in header
    check_header(header, "plan")


@pytest.mark.parametrize("settings, code, text", [
    ("  order = shuffled", "E0211", "`shuffled` is not a value of `order`"),
    ("  order.seed = 3", "E0219", "`order.seed` only applies to a randomized order"),
    ("  order = blocked\n  order.seed = 3", "E0219", "only applies to a randomized order"),
    ("  warmup = -1", "E0203", "must be >= 0"),
    ("  order.seed = 1.5\n  order = randomized", "E0202", "expects an int"),
])
def test_bad_order_settings_are_located_errors(settings, code, text):
    result = compiled(settings)
    assert not result.ok
    assert any(d.code == code and text in d.message for d in result.diagnostics), \
        [(d.code, d.message) for d in result.diagnostics]


def test_the_schema_refuses_an_unknown_order(tmp_path):
    header = plan_header(compiled("").space)
    with pytest.raises(UsageError, match="order"):
        check_header({**header, "order": {"kind": "shuffled"}}, "plan")
    with pytest.raises(UsageError, match="warmup"):
        check_header({**header, "warmup": -1}, "plan")


# -- real runs ----------------------------------------------------------------------------------------

ORDERED_SPACE = """
space ordered {
  rounds = 3
  order = randomized
  users in [2, 3]
  successes = 2
  max_requests = 4
  fault.kind = delay
  fault.duration = 100ms
  fault.rate = 100%
  client tenacity.baseline {}
  client pybreaker.baseline {}
}
"""


def executed_order(out: Path) -> list[tuple[str, int]]:
    """(scenario, round) in the order the rounds ran: by the first user's start time."""
    started: dict[tuple[str, int], str] = {}
    for row in rows(out):
        key = (row["scenarioId"], row["round"])
        started[key] = min(started.get(key, row["startTime"]), row["startTime"])
    return sorted(started, key=started.get)


def planned_order(out: Path) -> list[tuple[str, int]]:
    manifest = json.loads((out / "manifest.json").read_text())
    scenarios = [json.loads(line) for line in (out / "scenarios.jsonl").read_text().splitlines()]
    order = recorded_order(manifest["order"])
    return [(s["id"], r) for s, r in ordered_runs(order, lambda: iter(scenarios), 3)]


def test_a_resumed_randomized_run_keeps_its_order(tmp_path):
    process, out = start_run_in_background(tmp_path, ORDERED_SPACE)
    manifest = json.loads((out / "manifest.json").read_text())
    pids = list(manifest["sessions"][-1]["pids"].values())
    assert manifest["order"]["kind"] == "randomized" and isinstance(manifest["order"]["seed"], int)
    process.kill()
    process.wait()
    wait_until(lambda: all(process_gone(p) for p in pids), 10, "services to stop after kill -9")
    before = executed_order(out)
    assert 0 < len(before) < 12
    refused = rbl("run", "--resume", "out", "--order", "blocked", cwd=tmp_path)
    assert refused.returncode == 2 and "a resumed run keeps it" in refused.stderr
    done = rbl("run", "--resume", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    after = json.loads((out / "manifest.json").read_text())
    assert after["order"] == manifest["order"]
    assert executed_order(out) == planned_order(out)
    scenarios = [json.loads(line)["id"] for line in (out / "scenarios.jsonl").read_text().splitlines()]
    assert planned_order(out) != [(s, r) for s in scenarios for r in (1, 2, 3)]      # not Algorithm 1's


def test_order_and_seed_from_the_command_line(tmp_path):
    (tmp_path / "s.rbl").write_text(ORDERED_SPACE.replace("rounds = 3", "rounds = 2"))
    done = rbl("run", "s.rbl", "-o", "out", "--order", "blocked", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["order"] == {"kind": "blocked"}
    ran = executed_order(tmp_path / "out")
    assert [r for _, r in ran] == [1] * 4 + [2] * 4
    seeded = rbl("run", "s.rbl", "-o", "seeded", "--order-seed", "77", cwd=tmp_path)
    assert seeded.returncode == 0, seeded.stderr
    assert json.loads((tmp_path / "seeded" / "manifest.json").read_text())["order"]["seed"] == 77
    bad = rbl("run", "s.rbl", "-o", "bad", "--order", "sideways", cwd=tmp_path)
    assert bad.returncode == 2 and "--order must be one of" in bad.stderr and not (tmp_path / "bad").exists()
