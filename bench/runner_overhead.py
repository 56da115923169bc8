"""Runner overhead per scenario round: everything except the virtual users' own work.

Runs a small plan on the local backend (fault changes between scenarios, 10 virtual users per
round) and, per round, subtracts the longest virtual user's own time (measured by the client)
from the round's wall time: what remains is setting and confirming the fault, resetting and
reading counters, dispatching jobs, computing metrics and writing results (with fsync).
Target: under 100 ms.

Then the useful fraction of a whole `rbl run`: the quickstart and the Resilience4j
example run as a user runs them (`python3 -m rbl run EXAMPLE`, on each proxy in turn: rbl's
built-in one and real Envoy), and the virtual
users' own time (per round, its longest virtual user's totalExecutionTime; warm-up rounds
included, they are load the runner asked for) is divided by the command's wall time, start-up,
compilation, services starting and stopping included. Targets: quickstart >= 90%, Resilience4j
example >= 97%. The services' start and stop times are printed too (they start side by side).

python3 bench/runner_overhead.py [--rounds 10] [--examples quickstart,resilience4j | --examples none]
                                 [--proxies builtin,envoy]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402

from rbl.compiler.expand import iter_scenario_lines  # noqa: E402
from rbl.targets.client_builds import client_jar  # noqa: E402
from rbl.compiler.pipeline import compile_source  # noqa: E402
from rbl.compiler.plan import plan_header  # noqa: E402
from rbl.runner.executor import Executor  # noqa: E402
from rbl.backends.local.backend import LocalOptions, LocalServices  # noqa: E402
from rbl.runner.progress import RunProgress  # noqa: E402
from rbl.store.results import RunDirectory  # noqa: E402

SPEC = """
space overhead {{
  rounds = {rounds}
  users = 10
  successes = 5
  max_requests = 20
  target = "/bytes/100"
  fault.rate in [0%, 10%, 20%]
  client tenacity.baseline {{}}
  client pybreaker.circuit_breaker {{
    fail_max = 3
    reset_timeout = 50ms
  }}
}}
"""


REPO = Path(__file__).resolve().parent.parent
EXAMPLES = {"quickstart": (REPO / "examples" / "quickstart.rbl", 0.90),
            "resilience4j": (REPO / "examples" / "ccpe-listing4-resilience4j.rbl", 0.97)}


def useful_fraction(example: Path, proxy: str) -> tuple[float, float, int]:
    """(wall s, the virtual users' own s, rounds) of one `rbl run` of the example."""
    with tempfile.TemporaryDirectory() as work:
        start = time.perf_counter()
        # --allow-violations: a statistical oracle flagging a row is no failure of the run's timing
        done = subprocess.run([sys.executable, "-m", "rbl", "run", str(example), "-o", f"{work}/run", "--proxy",
                               proxy, "--allow-violations"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, cwd=REPO)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"rbl run {example.name} exited {done.returncode}:\n{done.stderr[-2000:]}")
        longest: dict[tuple, float] = {}
        with open(f"{work}/run/results.jsonl", encoding="utf-8") as rows:
            for line in rows:
                row = json.loads(line)
                key = (row["scenarioId"], row["round"], row["warmup"])
                longest[key] = max(longest.get(key, 0.0), row["totalExecutionTime"] / 1000)
    return wall, sum(longest.values()), len(longest)


def services_start_stop(libraries: dict[str, str], proxy: str) -> tuple[float, float]:
    jars = {name: client_jar(kind) for name, kind in libraries.items() if kind == "resilience4j"}
    with tempfile.TemporaryDirectory() as logs:
        start = time.perf_counter()
        backend = LocalServices(Path(logs), libraries, LocalOptions(proxy=proxy, client_jars=jars))
        backend.__enter__()
        started = time.perf_counter()
        backend.__exit__(None, None, None)
        return started - start, time.perf_counter() - started


def examples(names: list[str], proxies: list[str]) -> bool:
    ok = True
    for proxy in proxies:
        start, stop = services_start_stop({"tenacity": "python", "pybreaker": "python",
                                           "resilience4j": "resilience4j"}, proxy)
        print(f"[{proxy}] services (httpbin, proxy, tenacity, pybreaker and Resilience4j clients): "
              f"start {start:.2f} s, stop {stop:.2f} s")
    for name in names:
        example, target = EXAMPLES[name]
        for proxy in proxies:              # one example on each proxy in turn: the same machine state
            wall, useful, rounds = useful_fraction(example, proxy)
            fraction = useful / wall
            ok &= fraction >= target
            print(f"[{proxy}] {name} ({example.name}, {rounds} rounds): wall {wall:.1f} s, virtual users "
                  f"{useful:.1f} s: useful {fraction:.1%} (target >= {target:.0%}): "
                  f"{'ok' if fraction >= target else 'MISSED'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--examples", default="quickstart,resilience4j",
                        help="examples whose useful fraction to measure (`none`: skip)")
    parser.add_argument("--proxies", default="builtin,envoy", help="the fault proxies the examples run on")
    args = parser.parse_args()
    proxies = args.proxies.split(",")
    if set(proxies) - {"builtin", "envoy"}:
        parser.error("--proxies: builtin, envoy or both")
    chosen = [] if args.examples == "none" else args.examples.split(",")
    unknown = [name for name in chosen if name not in EXAMPLES]
    if unknown:
        parser.error(f"--examples: unknown {', '.join(unknown)} (choose from {', '.join(EXAMPLES)}, or none)")
    result = compile_source(SPEC.format(rounds=args.rounds), "overhead.rbl")
    assert result.ok, result.diagnostics
    space = result.space
    header = plan_header(space)
    with tempfile.TemporaryDirectory() as work:
        run = RunDirectory.create(Path(work) / "run", header, iter_scenario_lines(space))
        with LocalServices(run.logs, {"tenacity": "python", "pybreaker": "python"},
                           LocalOptions(proxy="builtin", seed=1)) as backend, \
                RunProgress(Console(file=io.StringIO()), header["size"], header["rounds"]) as progress:
            outcome = Executor(run, backend, header, progress).execute()
    overheads = sorted(t.overhead_s * 1000 for t in outcome.timings)
    p50 = statistics.median(overheads)
    p95 = overheads[int(0.95 * (len(overheads) - 1))]
    walls = statistics.median(t.wall_s * 1000 for t in outcome.timings)
    print(f"{len(overheads)} rounds of 10 virtual users (median round {walls:.1f} ms wall)")
    print(f"runner overhead per round: median {p50:.2f} ms, p95 {p95:.2f} ms, max {overheads[-1]:.2f} ms "
          f"(target < 100 ms): {'ok' if overheads[-1] < 100 else 'MISSED'}")
    useful_ok = examples(chosen, proxies) if chosen else True
    return 0 if overheads[-1] < 100 and useful_ok else 1


if __name__ == "__main__":
    sys.exit(main())
