"""`rbl diff`: two runs compared cell by cell, each difference of medians with its interval."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import UsageError


def diff(run_a: Path = typer.Argument(..., help="The first run directory (A: before, or machine 1)."),
         run_b: Path = typer.Argument(..., help="The second run directory (B: after, or machine 2)."),
         output: Optional[Path] = typer.Option(None, "-o", "--output",
                                               help="Where to write diff.csv, diff.json and the figure "
                                                    "[default: RUN_B/diff-vs-NAME_OF_A]."),
         metric: list[str] = typer.Option([], "--metric", "-m",
                                          help="A metric to compare (repeatable) [default: successTimePerRequest, "
                                               "totalExecutionTime, totalRequests; for open-loop runs "
                                               "carriedThroughput, successP99Ms, p95UnderSloShare]."),
         output_format: str = typer.Option("text", "--format", help="What stdout gets: text (a table), csv or json."),
         resamples: int = typer.Option(2000, "--resamples", min=100, help="Bootstrap resamples per cell and run."),
         confidence: float = typer.Option(0.95, "--confidence", min=0.5, max=0.999,
                                          help="Level of the interval of each difference."),
         seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
         intervals: str = typer.Option("auto", "--intervals", metavar="METHOD",
                                       help="auto (Welch's t-interval on round medians where a cell has 2-3 "
                                            "rounds, the bootstrap above), bootstrap or rounds-t.")):
    """Compare two runs cell by cell: the difference of medians (B - A) with an interval (the
    report's method), flagged when it excludes 0 (e.g. one spec before and after a library upgrade)."""
    from rich.console import Console

    from ..report.build import KNOWN_METRICS
    from ..report.diff import as_csv, as_json, default_diff_metrics, diff_runs, print_diff, write_diff
    from ..report.stats import INTERVAL_METHODS
    if output_format not in ("text", "csv", "json"):
        raise UsageError(f"--format must be text, csv or json, got {output_format!r}")
    if intervals not in INTERVAL_METHODS:
        raise UsageError(f"--intervals: unknown method {intervals!r}", hint=f"one of {', '.join(INTERVAL_METHODS)}")
    metrics = list(dict.fromkeys(metric)) or default_diff_metrics(run_a, run_b)
    unknown = [m for m in metrics if m not in KNOWN_METRICS]
    if unknown:
        raise UsageError(f"unknown metric {unknown[0]!r}", f"the metrics are: {', '.join(KNOWN_METRICS)}")
    err = Console(stderr=True, highlight=False)
    result = diff_runs(run_a, run_b, metrics, resamples, seed, confidence,
                       warn=lambda text: err.print(f"warning: {text}", markup=False), method=intervals)
    if output_format == "text":
        from ..report.keyed_table import output_width
        print_diff(result, Console(highlight=False, width=output_width(sys.stdout, 200)))
    else:
        sys.stdout.write(as_csv(result) if output_format == "csv" else as_json(result))
    out = output or run_b / f"diff-vs-{run_a.resolve().name}"
    files = write_diff(result, out)
    typer.echo(f"wrote {', '.join(p.name for p in files)} to {out}", err=True)
