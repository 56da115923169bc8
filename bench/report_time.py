"""How long `rbl report` takes on an open-loop run of examples/overload-pool.rbl (the per-request
figures, the overload metrics and the trade-off, tables, the A/A check, findings and the HTML), as a user runs it:
`python3 -m rbl report RUN -o OUT`, `--repeat` times. Per run: wall time, and CPU time (user +
system of the command and of any child it waits for, from wait4). Goal: under
2 s of wall time, the median over the repetitions.

The run is made first (`rbl run examples/overload-pool.rbl --rounds 1`, about a minute and a half,
calibrating when no capacity is stored), or given with --run-dir. With --baseline SRC (a source
tree of rbl, e.g. `git archive COMMIT rbl | tar -x -C SRC`) the same report is also made by that
code, alternating with this one, so both see the same machine.

python3 bench/report_time.py [--run-dir RUN] [--repeat 5] [--baseline SRC]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOAL_S = 2.0


def report_once(source: Path, run_dir: Path, out: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one `rbl report` by the rbl in `source`."""
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "rbl", "report", str(run_dir), "-o", str(out)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=source,
                               env={**os.environ, "PYTHONPATH": str(source)})
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"rbl report ({source}) failed:\n{stderr.decode(errors='replace')[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def make_run(work: Path) -> Path:
    run_dir = work / "run"
    done = subprocess.run([sys.executable, "-m", "rbl", "run", str(REPO / "examples" / "overload-pool.rbl"),
                           "--rounds", "1", "-o", str(run_dir), "--allow-violations"], cwd=REPO,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"rbl run failed:\n{done.stderr[-2000:]}")
    return run_dir


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", type=Path, help="an open-loop run to report (default: make one)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="another rbl source tree to compare, alternating")
    args = parser.parse_args()
    sources = {"this rbl": REPO, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    with tempfile.TemporaryDirectory(prefix="rbl-report-time-") as temporary:
        work = Path(temporary)
        run_dir = args.run_dir.resolve() if args.run_dir else make_run(work)
        print(f"rbl report {run_dir.name}: {args.repeat} times each; {os.cpu_count()} cores, load average "
              f"{os.getloadavg()[0]:.2f}")
        measured: dict[str, list[tuple[float, float]]] = {name: [] for name in sources}
        for repetition in range(args.repeat):
            order = list(sources) if repetition % 2 == 0 else list(reversed(sources))
            for name in order:
                measured[name].append(report_once(sources[name], run_dir, work / f"report-{repetition}-{len(order)}"
                                                  f"-{name.replace(' ', '-')}"))
        for name, runs in measured.items():
            walls, cpus = [w for w, _ in runs], [c for _, c in runs]
            print(f"  {name:<9} wall median {statistics.median(walls):.2f} s (min {min(walls):.2f}), CPU median "
                  f"{statistics.median(cpus):.2f} s (min {min(cpus):.2f})")
        wall = statistics.median(w for w, _ in measured["this rbl"])
        print(f"load average after {os.getloadavg()[0]:.2f}")
        print(f"rbl report, median wall {wall:.2f} s (goal < {GOAL_S:g} s): {'met' if wall < GOAL_S else 'MISSED'}")
    return 0 if wall < GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
