"""Benchmark: `rbl compile --format jsonl` streams a 10^6-scenario space in constant memory at
>= 200,000 scenarios/s; the same run times a naive recursive dict-copying expansion like the
original tool's (scheduler/app.py build_scenarios + utils.expand_config_template) on the same
space and prints the ratio. Memory: peak RSS of the real CLI for 10^5 and 10^6 scenarios.

Batching: rbl's JSON Lines writer (rbl/compiler/plan.py write_scenarios) against a
hand-written minimal Python expansion of the same output (nested loops, f-strings, the same ids,
one buffered write per line), each in a fresh process writing to /dev/null, alternating
`--rounds` times: scenarios/s and minor page faults per 10^6 scenarios, medians, for rbl's batch
size and the `--batches` given. Goal: rbl at least 0.95x the minimal expansion.

python3 bench/compile_stream.py [--rounds 3] [--batches 64,256,1024,4096]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo, for tests.original_tool

from rbl.compiler.pipeline import compile_source  # noqa: E402
from tests.original_tool import build_scenarios  # noqa: E402
from rbl.compiler import plan  # noqa: E402
from rbl.compiler.expand import iter_scenario_lines  # noqa: E402
from rbl.compiler.plan import write_scenarios  # noqa: E402

TARGET_RATE = 200_000
MINIMAL_RATIO = 0.95


def spec(users: int) -> str:
    return f"""space stream {{
  users in 1..{users}
  fault.rate in 0%..90% step 10%
  client resilience4j.retry {{
    maxAttempts in 1..100
    initialIntervalMillis in 1ms..100ms step 1ms
  }}
}}
"""


class CountingSink:
    """A text sink that keeps only the byte count, so the measurement is expansion + encoding."""

    def __init__(self):
        self.chars = 0

    def write(self, text: str) -> None:
        self.chars += len(text)


def naive_expansion(conf: dict, sink: CountingSink) -> int:
    """The original tool's way: every scenario built as a dict by recursive copying, held in a
    list, then serialised (one round, to compare like with like)."""
    scenarios = build_scenarios({**conf, "rounds": 1})
    for scenario in scenarios:
        sink.write(json.dumps(scenario) + "\n")
    return len(scenarios)


def peak_rss_mib(users: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.rbl"
        path.write_text(spec(users))
        code = ("import resource, subprocess, sys; "
                f"subprocess.run([sys.executable, '-m', 'rbl', 'compile', {str(path)!r}, '-o', '-', "
                "'--format', 'jsonl'], stdout=subprocess.DEVNULL, check=True); "
                "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        return int(out.stdout.strip()) / 1024


def minimal_lines():
    """The same scenario lines as rbl writes for spec(10), by hand: what a user could script."""
    prefix = '"client":"resilience4j.retry","library":"resilience4j","pattern":"retry","config":'
    rest = (',"intervalFunction":"FIXED","waitDuration":500,"multiplier":1.5,"randomizationFactor":0.5,'
            '"failAfterMaxAttempts":false},"successes":10,"max_requests":500}')
    index = 0
    for rate in range(0, 100, 10):
        for users in range(1, 11):
            head = f'{{"fault":{{"kind":"abort","rate":{rate},"status":503}},"users":{users},{prefix}'
            for attempts in range(1, 101):
                for interval in range(1, 101):
                    body = f'{head}{{"maxAttempts":{attempts},"initialIntervalMillis":{interval}{rest}'
                    digest = hashlib.blake2b(body.encode(), digest_size=6).hexdigest()
                    yield f'{{"id":"{digest}","index":{index},{body[1:]}'
                    index += 1


def child(kind: str, batch: int) -> None:
    """One measured expansion in this (fresh) process: prints seconds, page faults, count."""
    space = compile_source(spec(10)).space
    plan.JSONL_BATCH_LINES = batch
    with open(os.devnull, "w", encoding="utf-8") as out:
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        if kind == "rbl":
            count = write_scenarios(space, "jsonl", out)
        else:
            count = 0
            for line in minimal_lines():
                out.write(line + "\n")
                count += 1
        seconds = time.perf_counter() - start
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    print(json.dumps({"seconds": seconds, "faults": faults, "count": count}))


def measured(kind: str, batch: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", kind, "--batch", str(batch)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def same_output(lines: int = 100_000) -> bool:
    """rbl's first lines and the minimal expansion's are the same text."""
    space = compile_source(spec(10)).space
    pairs = zip(islice(iter_scenario_lines(space), lines), minimal_lines())
    return all(mine == theirs for mine, theirs in pairs)


def batching(rounds: int, batches: list[int]) -> bool:
    """rbl's writer at each batch size against the minimal expansion, alternating; medians."""
    if not same_output():
        print("the minimal expansion does not write rbl's output: comparison void")
        return False
    chosen = plan.JSONL_BATCH_LINES
    sizes = sorted(set(batches) | {chosen})
    results: dict[str, list[dict]] = {"minimal": [], **{f"rbl/{b}": [] for b in sizes}}
    for round_index in range(rounds):
        order = ["minimal", *(f"rbl/{b}" for b in sizes)]
        for name in (order if round_index % 2 == 0 else order[::-1]):
            results[name].append(measured("minimal", 0) if name == "minimal"
                                 else measured("rbl", int(name.split("/")[1])))
    minimal_rate = statistics.median(r["count"] / r["seconds"] for r in results["minimal"])
    print(f"\nJSON Lines writer vs a minimal Python expansion of the same output "
          f"(10^6 scenarios to /dev/null, medians of {rounds} alternating rounds):")
    print(f"  {'writer':<18} {'scenarios/s':>12} {'page faults/10^6':>17} {'vs minimal':>11}")
    ratio = 0.0
    for name, runs in results.items():
        rate = statistics.median(r["count"] / r["seconds"] for r in runs)
        faults = statistics.median(r["faults"] * 1e6 / r["count"] for r in runs)
        mark = " (rbl's batch)" if name == f"rbl/{chosen}" else ""
        print(f"  {name:<18} {rate:>12,.0f} {faults:>17,.0f} {rate / minimal_rate:>10.2f}x{mark}")
        if name == f"rbl/{chosen}":
            ratio = rate / minimal_rate
    print(f"rbl's writer at {ratio:.2f}x the minimal expansion (goal >= {MINIMAL_RATIO}): "
          f"{'PASS' if ratio >= MINIMAL_RATIO else 'FAIL'}")
    return ratio >= MINIMAL_RATIO


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", default="64,256,1024,4096", help="other batch sizes to compare")
    parser.add_argument("--child", choices=("rbl", "minimal"), help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=plan.JSONL_BATCH_LINES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.batch)
        return 0
    space = compile_source(spec(10)).space
    assert space.size == 1_000_000, space.size
    sink = CountingSink()
    start = time.perf_counter()
    count = write_scenarios(space, "jsonl", sink)
    rbl_seconds = time.perf_counter() - start
    rate = count / rbl_seconds

    conf = {"users": list(range(1, 11)), "fault": {"percentage": list(range(0, 100, 10))},
            "maxRequests": 500, "succRequests": 10,
            "clientSpecs": [{"lib": "resilience4j", "strategy": "retry",
                             "patternConfig": {"maxAttempts": list(range(1, 101)),
                                               "initialIntervalMillis": list(range(1, 101))}}]}
    naive_sink = CountingSink()
    start = time.perf_counter()
    naive_count = naive_expansion(conf, naive_sink)
    naive_seconds = time.perf_counter() - start
    naive_rate = naive_count / naive_seconds

    small, large = peak_rss_mib(1), peak_rss_mib(10)
    print(f"rbl jsonl:   {count:,} scenarios in {rbl_seconds:.2f} s = {rate:,.0f} scenarios/s "
          f"(target >= {TARGET_RATE:,}): {'PASS' if rate >= TARGET_RATE else 'FAIL'}")
    print(f"naive (original-style) expansion: {naive_count:,} scenarios in {naive_seconds:.2f} s "
          f"= {naive_rate:,.0f} scenarios/s")
    print(f"ratio rbl / naive: {rate / naive_rate:.2f}x")
    print(f"peak RSS of `rbl compile --format jsonl -o -`: 10^5 scenarios {small:.1f} MiB, "
          f"10^6 scenarios {large:.1f} MiB (growth {large - small:+.1f} MiB): "
          f"{'PASS' if large - small < 10 else 'FAIL'}")
    batched = batching(args.rounds, [int(b) for b in args.batches.split(",") if b])
    return 0 if rate >= TARGET_RATE and large - small < 10 and batched else 1


if __name__ == "__main__":
    sys.exit(main())
