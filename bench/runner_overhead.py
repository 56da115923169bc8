"""Runner overhead per scenario round: everything except the virtual users' own work.

Runs a small plan on the local backend (fault changes between scenarios, 10 virtual users per
round) and, per round, subtracts the longest virtual user's own time (measured by the client)
from the round's wall time: what remains is setting and confirming the fault, resetting and
reading counters, dispatching jobs, computing metrics and writing results (with fsync).
Target: under 100 ms.

python3 bench/runner_overhead.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402

from rbl.compiler.expand import iter_scenario_lines  # noqa: E402
from rbl.compiler.pipeline import compile_source  # noqa: E402
from rbl.compiler.plan import plan_header  # noqa: E402
from rbl.runner.executor import Executor  # noqa: E402
from rbl.runner.local import LocalBackend, LocalOptions  # noqa: E402
from rbl.runner.progress import RunProgress  # noqa: E402
from rbl.runner.results import RunDirectory  # noqa: E402

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    result = compile_source(SPEC.format(rounds=args.rounds), "overhead.rbl")
    assert result.ok, result.diagnostics
    space = result.space
    header = plan_header(space)
    with tempfile.TemporaryDirectory() as work:
        run = RunDirectory.create(Path(work) / "run", header, iter_scenario_lines(space))
        with LocalBackend(run.logs, {"tenacity": "python", "pybreaker": "python"}, LocalOptions(proxy="builtin", seed=1)) as backend, \
                RunProgress(Console(file=io.StringIO()), header["size"], header["rounds"]) as progress:
            outcome = Executor(run, backend, header, progress).execute()
    overheads = sorted(t.overhead_s * 1000 for t in outcome.timings)
    p50 = statistics.median(overheads)
    p95 = overheads[int(0.95 * (len(overheads) - 1))]
    walls = statistics.median(t.wall_s * 1000 for t in outcome.timings)
    print(f"{len(overheads)} rounds of 10 virtual users (median round {walls:.1f} ms wall)")
    print(f"runner overhead per round: median {p50:.2f} ms, p95 {p95:.2f} ms, max {overheads[-1]:.2f} ms "
          f"(target < 100 ms): {'ok' if overheads[-1] < 100 else 'MISSED'}")
    return 0 if overheads[-1] < 100 else 1


if __name__ == "__main__":
    sys.exit(main())
