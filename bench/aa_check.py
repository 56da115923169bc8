"""The A/A check on real runs: quiet, and beside a neighbour that makes the machine noisy on purpose.

Runs a spec several times with `rbl run` (local backend, as a user runs it) and prints, per run,
what the report's A/A check says (rbl/report/noise.py): the verdict, the noise floor, the
significant A/A pairs and the between-cell analysis (rbl/report/cell_effects.py: F, its p-value,
the rounds' spread) and the other work the runner measured beside the run. Each line starts with
PASS, NOISY (passed, but too noisy to compare: the floor is 50% or more) or FAIL (the check failed;
`rbl report RUN_DIR` says why). A quiet machine should pass; a noisy one should fail.

Neighbours (one busy process per core, started before and stopped after each run):
- none:    nothing beside the run;
- steady:  every core busy the whole time;
- bursty:  each process alternates busy and idle phases of 0.05-1 s (seeded), as a build or a
           test suite beside a benchmark does: the machine's conditions change during the run.

python3 bench/aa_check.py [--spec examples/quickstart.rbl] [--rounds 2] [--runs 3]
                          [--neighbour none|steady|bursty] [--out DIR]
python3 bench/aa_check.py --existing RUN_DIR...     (judge runs made before)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rbl.report.cells import DEFAULT_METRICS, load_cells  # noqa: E402
from rbl.report.noise import noise_check  # noqa: E402
from rbl.report.noise_view import percent, verdict  # noqa: E402

NEIGHBOURS = ("none", "steady", "bursty")


def busy(kind: str, seed: int) -> None:
    """One neighbour process: spin, or alternate spinning and sleeping (phases of 50 ms to 1 s)."""
    rng = random.Random(seed)
    while True:
        until = time.monotonic() + (3600 if kind == "steady" else rng.uniform(0.05, 1.0))
        while time.monotonic() < until:
            pass
        time.sleep(rng.uniform(0.05, 1.0))


def start_neighbour(kind: str, seed: int) -> list[multiprocessing.Process]:
    if kind == "none":
        return []
    processes = [multiprocessing.Process(target=busy, args=(kind, seed * 100 + i), daemon=True)
                 for i in range(os.cpu_count() or 1)]
    for process in processes:
        process.start()
    return processes


def stop_neighbour(processes: list[multiprocessing.Process]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(timeout=5)


def one_run(spec: str, rounds: int | None, out: Path, neighbour: str, seed: int) -> str:
    command = [sys.executable, "-m", "rbl", "run", spec, "-o", str(out)]
    if rounds:
        command += ["--rounds", str(rounds)]
    processes = start_neighbour(neighbour, seed)
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    finally:
        stop_neighbour(processes)
    if result.returncode != 0:
        return f"rbl run failed ({result.returncode}): {result.stderr.strip()[-300:]}"
    return summary(out)


def summary(run_dir: Path) -> str:
    """One line: what the report's A/A check says of a run directory."""
    header, cells = load_cells(run_dir, list(DEFAULT_METRICS), resamples=1000)
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    check = noise_check(header, cells, list(DEFAULT_METRICS), resamples=1000, manifest=manifest)
    text = verdict(check)
    work = check.other_work
    parts = [{"ok": "PASS", "warning": "FAIL" if not check.passed else "NOISY"}.get(text["level"], "N/A"),
             f"floor {percent(check.floor)}",
             "other work " + ("not measured" if work is None else f"{work['otherCores']:.2f} cores "
                                                                   f"(at most {work['otherCoresPeak']:.2f})")]
    for metric in check.metrics.values():
        effects = metric.cell_effects
        spread = "" if effects is None else (f", F {effects.ratio:.2f} p {effects.p_value:.2g} "
                                             f"(df {effects.df_between},{effects.df_within}), "
                                             f"rounds spread {percent(effects.round_spread)}")
        parts.append(f"{metric.metric}: {len(metric.significant)}/{len(metric.judged)} pairs significant{spread}")
    return " | ".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="examples/quickstart.rbl")
    parser.add_argument("--rounds", type=int, default=None, help="override the spec's rounds")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--neighbour", choices=NEIGHBOURS, default="none")
    parser.add_argument("--seed", type=int, default=1, help="seeds the bursty neighbour's phases")
    parser.add_argument("--out", type=Path, default=None, help="keep the run directories here")
    parser.add_argument("--existing", type=Path, nargs="+", metavar="RUN_DIR",
                        help="judge these run directories instead of running anything")
    args = parser.parse_args()
    if args.existing:
        for run_dir in args.existing:
            print(f"{run_dir.name}: {summary(run_dir)}", flush=True)
        return 0
    out = args.out or Path(tempfile.mkdtemp(prefix="rbl-aa-"))
    print(f"{args.spec}, rounds {args.rounds or 'as the spec says'}, neighbour {args.neighbour}, "
          f"{args.runs} runs in {out}; load average before: {os.getloadavg()[0]:.2f}")
    for i in range(1, args.runs + 1):
        started = time.monotonic()
        line = one_run(args.spec, args.rounds, out / f"{args.neighbour}-{i}", args.neighbour, args.seed + i)
        print(f"run {i} ({time.monotonic() - started:.0f} s): {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
