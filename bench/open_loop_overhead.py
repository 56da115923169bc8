"""The useful fraction of an open-loop run: examples/overload-pool.rbl run as a user runs it
(`python3 -m rbl run EXAMPLE`), first on a machine with no stored capacity (calibration first), then
again with the capacity that run stored.

Useful time is the load: each round from its first send to its last answer (the row's startTime to
endTime: the schedule's `load.duration`, warm-up included as bench/runner_overhead.py counts warm-up
rounds, and the answers to its last requests, which an overloaded target gives late: they are the
round's measurements too). It is divided by the command's wall time: interpreter start-up,
compiling, starting the target, proxy and sidecars, calibrating, waiting for the target's queue after
each round, switching sidecars, the metrics, the Parquet files and stopping everything included. The
calibration's own time is the one its stored record gives. Goals: with a fresh calibration, useful
>= 85% and calibration <= 10% of the run; with the stored capacity, useful >= 95%.

The run's rbl-load is built before the timing (a first build takes a minute and is no part of a run);
the fresh run gets a cache of its own, whose clients/ links to the built clients, so only the
capacity is missing from it.

python3 bench/open_loop_overhead.py [--rounds N] [--example examples/overload-pool.rbl]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rbl.targets.client_builds import cache_dir, client_artifact  # noqa: E402

FRESH_GOAL, STORED_GOAL, CALIBRATION_GOAL = 0.85, 0.95, 0.10


def run(example: Path, work: Path, cache: Path, rounds: int | None, name: str) -> tuple[float, float, int]:
    """(wall s, the rounds' load s, rounds) of one `rbl run`."""
    argv = [sys.executable, "-m", "rbl", "run", str(example), "-o", str(work / name), "--allow-violations"]
    if rounds is not None:
        argv += ["--rounds", str(rounds)]
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO,
                          env={**os.environ, "XDG_CACHE_HOME": str(cache)})
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"rbl run {example.name} exited {done.returncode}:\n{done.stderr[-2000:]}")
    rows = [json.loads(line) for line in (work / name / "results.jsonl").read_text().splitlines()]
    return wall, sum(seconds(row["endTime"]) - seconds(row["startTime"]) for row in rows), len(rows)


def seconds(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp).timestamp()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--example", type=Path, default=REPO / "examples" / "overload-pool.rbl")
    parser.add_argument("--rounds", type=int, help="rounds per scenario (default: the example's own)")
    args = parser.parse_args()
    client_artifact("loadgen", say=lambda text: print(text, file=sys.stderr))
    with tempfile.TemporaryDirectory(prefix="rbl-open-loop-overhead-") as temporary:
        work = Path(temporary)
        cache = work / "cache"
        (cache / "rbl").mkdir(parents=True)
        (cache / "rbl" / "clients").symlink_to(cache_dir(), target_is_directory=True)
        ok = True
        print(f"{args.example.name}, {'its own rounds' if args.rounds is None else f'--rounds {args.rounds}'}; "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
        for name, goal in (("fresh", FRESH_GOAL), ("stored", STORED_GOAL)):
            wall, useful, rounds = run(args.example, work, cache, args.rounds, name)
            fraction = useful / wall
            ok &= fraction >= goal
            line = (f"{name:>6} capacity: wall {wall:.1f} s, load {useful:.1f} s over {rounds} rounds: useful "
                    f"{fraction:.1%} (goal >= {goal:.0%}): {'met' if fraction >= goal else 'MISSED'}")
            if name == "fresh":
                record = next(iter(json.loads((cache / "rbl" / "capacity.json").read_text()).values()))
                share = record["seconds"] / wall
                ok &= share <= CALIBRATION_GOAL
                line += (f"; calibration {record['seconds']:.1f} s in {len(record['steps'])} steps "
                         f"({record['capacity_rps']:g} req/s) = {share:.1%} of the run (goal <= "
                         f"{CALIBRATION_GOAL:.0%}): {'met' if share <= CALIBRATION_GOAL else 'MISSED'}")
            print(line, flush=True)
        print(f"load average after {os.getloadavg()[0]:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
