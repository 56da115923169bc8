"""Benchmark: `rbl compile --format jsonl` streams a 10^6-scenario space in constant memory at
>= 200,000 scenarios/s; the same run times a naive recursive dict-copying expansion like the
original tool's (scheduler/app.py build_scenarios + utils.expand_config_template) on the same
space and prints the ratio. Memory: peak RSS of the real CLI for 10^5 and 10^6 scenarios."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo, for tests.original_tool

from rbl.compiler.pipeline import compile_source  # noqa: E402
from tests.original_tool import build_scenarios  # noqa: E402
from rbl.compiler.plan import write_scenarios

TARGET_RATE = 200_000


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


def main() -> int:
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
    return 0 if rate >= TARGET_RATE and large - small < 10 else 1


if __name__ == "__main__":
    sys.exit(main())
