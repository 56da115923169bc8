"""How long `rbl --help`, `rbl run --help` and shell completion take: the CLI imports what a
command needs only when that command runs, so help and completion do not load the compiler,
rich, pyarrow or the runner.

    python3 bench/cli_startup.py                    # this checkout
    python3 bench/cli_startup.py --against b0ccb34  # and a commit before, side by side

Each command runs REPEAT times in a fresh interpreter; the median wall time is reported, next to
`python -c pass` and `import typer` (the floor: typer 0.2x builds pydantic adapters for the
parameters it parses, which no lazy import in rbl avoids). Target: `rbl --help` well under 0.5 s
on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "import typer": ["-c", "import typer"],
    "rbl --help": ["-c", "import sys; sys.argv=['rbl','--help']; from rbl.cli import main; main()"],
    "rbl run --help": ["-c", "import sys; sys.argv=['rbl','run','--help']; from rbl.cli import main; main()"],
    "rbl check --help": ["-c", "import sys; sys.argv=['rbl','check','--help']; from rbl.cli import main; main()"],
    "completion of `rbl r`": ["-c", "from rbl.cli import main; main()"],
}
COMPLETION_ENV = {"_RBL_COMPLETE": "complete_bash", "COMP_WORDS": "rbl r", "COMP_CWORD": "1"}


def median_seconds(tree: Path, argv: list[str], repeat: int, env: dict) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, *argv], cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(tree), **env})
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def checkout(commit: str, into: Path) -> Path:
    archive = subprocess.run(["git", "archive", commit, "rbl", "templates"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--against", metavar="COMMIT", help="also measure this commit's CLI")
    args = parser.parse_args()
    trees = {"this checkout": ROOT}
    with tempfile.TemporaryDirectory() as work:
        if args.against:
            trees[args.against] = checkout(args.against, Path(work))
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; median of {args.repeat} runs (s)")
        print(f"{'command':<24}" + "".join(f"{name:>16}" for name in trees))
        for label, argv in COMMANDS.items():
            env = COMPLETION_ENV if label.startswith("completion") else {}
            cells = [median_seconds(tree, argv, args.repeat, env) for tree in trees.values()]
            print(f"{label:<24}" + "".join(f"{c:>16.3f}" for c in cells))


if __name__ == "__main__":
    main()
