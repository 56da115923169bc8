"""`rbl report`: a run's findings, statistics across rounds, figures and a single-file HTML report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import UsageError


def report(run_dir: Path = typer.Argument(..., help="A run directory (`rbl run -o`)."),
           output: Optional[Path] = typer.Option(None, "-o", "--output", metavar="DIR",
                                                 help="Where to write the report [default: RUN_DIR/report]."),
           metric: list[str] = typer.Option([], "--metric", "-m",
                                            help="A metric to report and plot (repeatable) [default: "
                                                 "successTimePerRequest and totalExecutionTime]."),
           resamples: int = typer.Option(2000, "--resamples", min=100, help="Bootstrap resamples per cell."),
           seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
           include_warmup: bool = typer.Option(False, "--include-warmup",
                                               help="Count the warm-up rounds (the spec's `warmup`) in the "
                                                    "statistics too."),
           intervals: str = typer.Option("auto", "--intervals", metavar="METHOD",
                                         help="auto (t-intervals on round medians for cells of 2-3 rounds, "
                                              "the bootstrap above), bootstrap or rounds-t."),
           explain: bool = typer.Option(False, "--explain",
                                        help="Print every unresolved comparison and the A/A check in full.")):
    """What did best, by how much and above the noise (the findings), statistics across rounds
    (median and 95% CI per cell), the paper's figures (SVG) and a single-file HTML report."""
    from rich.console import Console

    from ..report.build import build_report
    from ..report.keyed_table import output_width
    console = Console(highlight=False, width=output_width(sys.stdout, 180))
    from ..report.stats import INTERVAL_METHODS
    if intervals not in INTERVAL_METHODS:
        raise UsageError(f"--intervals: unknown method {intervals!r}", hint=f"one of {', '.join(INTERVAL_METHODS)}")
    made = build_report(run_dir, output, metric, console, resamples, seed, include_warmup, intervals, explain)
    typer.echo(f"wrote {len(made.files)} files to {made.out_dir} (open {made.out_dir / 'report.html'})", err=True)
