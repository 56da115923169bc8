"""`rbl diff RUN_A RUN_B`: what changed between two runs, cell by cell.

The typical use: the same spec before and after a library upgrade, or on two machines. Cells
match on client label, configuration, user count and fault rate (the fault's kind, status and
duration may differ: comparing fault settings is a use too). For each matched cell and metric:
median(B) - median(A), with the report's interval method (`--intervals auto`: Welch's t-interval
on the round medians where either cell has 2-3 rounds, else a bootstrap, each run resampled as the
report does, rounds then users, independently), flagged when the interval excludes 0. Warm-up rows are left out as
in the report. At 95%, about 1 in 20 comparisons of two identical setups is flagged by chance:
the output says how many to expect.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from ..errors import UsageError
from ..plan_records import is_open_loop
from ..store.report_output import OutputDirectory
from ..store.results import PLAN, RESULTS, RunDirectory
from ..store.run_reader import check_member
from .cells import Cell, load_cells
from .keyed_table import NumberColumn, print_keyed_table
from .labels import Labeller
from .stats import Difference, difference, interval_method, rounds_t_difference

DEFAULT_DIFF_METRICS = ("successTimePerRequest", "totalExecutionTime", "totalRequests")
# open-loop runs are compared on the overload papers' metrics (as their reports are)
OPEN_LOOP_DIFF_METRICS = ("carriedThroughput", "successP99Ms", "p95UnderSloShare")


def default_diff_metrics(run_a: Path, run_b: Path) -> list[str]:
    """The metrics `rbl diff` compares without --metric: the overload ones when either run is open-loop."""
    def open_loop(run: Path) -> bool:
        try:
            return is_open_loop(RunDirectory(run).plan_header())
        except Exception:                    # a damaged run directory is reported by the diff itself
            return False
    return list(OPEN_LOOP_DIFF_METRICS if open_loop(run_a) or open_loop(run_b) else DEFAULT_DIFF_METRICS)
FIGURE_ROWS = 60                 # cells drawn per metric; beyond, the flagged ones first


@dataclass
class CellDiff:
    key: tuple
    label: str
    fault_rate: float
    users: int
    metric: str
    result: Difference
    method: str = "bootstrap"           # the interval's method (rbl/report/stats.py's interval_method)

    def record(self) -> dict:
        r = self.result
        return {"configuration": self.label, "faultRate": self.fault_rate, "users": self.users,
                "metric": self.metric, "medianA": r.a.median, "medianB": r.b.median, "nA": r.a.n, "nB": r.b.n,
                "difference": r.difference, "ci95Low": r.low, "ci95High": r.high, "significant": r.significant,
                "interval": self.method}


@dataclass
class RunDiff:
    run_a: Path
    run_b: Path
    confidence: float
    cells: list[CellDiff]
    only_a: int
    only_b: int
    versions: list[str]             # library versions that differ between the runs

    @property
    def significant(self) -> list[CellDiff]:
        return [c for c in self.cells if c.result.significant]

    @property
    def tested(self) -> int:
        return sum(1 for c in self.cells if c.result.low is not None)


def _key(cell: Cell) -> tuple:
    # an open-loop cell is one load too: cells under different loads are not the same cell
    return (cell.client, json.dumps(cell.scenario["config"], sort_keys=True), cell.users, float(cell.fault_rate),
            json.dumps(cell.scenario.get("load"), sort_keys=True))


def _load(run_dir: Path, metrics: list[str], warn) -> tuple[dict, dict[tuple, Cell]]:
    if not run_dir.is_dir() or not check_member(run_dir, PLAN) or not check_member(run_dir, RESULTS):
        raise UsageError(f"{run_dir} is not an rbl run directory (no plan.json and results.jsonl)",
                         hint="pass two directories `rbl run` wrote (their -o)")
    # the estimates are recomputed by difference(); one resample here keeps loading cheap
    header, cells = load_cells(run_dir, metrics, resamples=1, warn=warn)
    return header, {_key(cell): cell for cell in cells if cell.rounds}


def _groups(cell: Cell, metric: str) -> list[list]:
    return [[row.get(metric) for row in rows] for _, rows in sorted(cell.rounds.items())]


def _versions(run_a: Path, run_b: Path) -> list[str]:
    def read(run: Path) -> dict:
        manifest, _ = RunDirectory(run).manifest()       # a damaged one names no versions
        return manifest.get("versions", {})
    a, b = read(run_a), read(run_b)
    return [f"{name} {a.get(name)} -> {b.get(name)}" for name in sorted(set(a) | set(b))
            if a.get(name) != b.get(name)]


def diff_runs(run_a: Path, run_b: Path, metrics: list[str], resamples: int = 2000, seed: int = 0,
              confidence: float = 0.95, warn=lambda text: None, method: str = "auto") -> RunDiff:
    header_a, cells_a = _load(run_a, metrics, warn)
    _, cells_b = _load(run_b, metrics, warn)
    labeller = Labeller(header_a)          # the spec's spelling with units, as in the report
    found = []
    for key, cell_a in cells_a.items():
        cell_b = cells_b.get(key)
        if cell_b is None:
            continue
        # a bootstrap over 2-3 rounds cannot see the rounds' spread: the fewer rounds of the two decide
        chosen = interval_method(method, min(len(cell_a.rounds), len(cell_b.rounds)))
        for metric in metrics:
            groups_a, groups_b = _groups(cell_a, metric), _groups(cell_b, metric)
            result = (rounds_t_difference(groups_a, groups_b, confidence) if chosen == "rounds-t"
                      else difference(groups_a, groups_b, resamples, seed, confidence))
            found.append(CellDiff(key, labeller.label(cell_a.scenario), cell_a.fault_rate, cell_a.users, metric,
                                  result, chosen))
    if not found:
        raise UsageError(f"{run_a} and {run_b} have no cell in common",
                         hint="cells match on client label, configuration, users, fault rate and (open loop) load")
    return RunDiff(run_a, run_b, confidence, found, len(set(cells_a) - set(cells_b)),
                   len(set(cells_b) - set(cells_a)), _versions(run_a, run_b))


# -- output -----------------------------------------------------------------------------------------

def as_json(diff: RunDiff) -> str:
    return json.dumps({"runA": str(diff.run_a), "runB": str(diff.run_b), "confidence": diff.confidence,
                       "onlyInA": diff.only_a, "onlyInB": diff.only_b, "versionsChanged": diff.versions,
                       "cells": [c.record() for c in diff.cells]}, indent=1) + "\n"


def as_csv(diff: RunDiff) -> str:
    out = io.StringIO()
    records = [c.record() for c in diff.cells]
    writer = csv.DictWriter(out, fieldnames=list(records[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: ("" if v is None else str(v).lower() if isinstance(v, bool) else v) for k, v in r.items()}
                     for r in records)
    return out.getvalue()


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def print_diff(diff: RunDiff, console: Console) -> None:
    # the configuration column is never cut: whole labels, or keys with a legend (keyed_table.py)
    columns = [NumberColumn("fault %"), NumberColumn("users"), NumberColumn("metric", "left"), NumberColumn("A"),
               NumberColumn("B"), NumberColumn("B - A"), NumberColumn("interval"), NumberColumn("", "left")]
    rows = []
    for c in diff.cells:
        r = c.result
        if r.a.median is None and r.b.median is None:
            interval = "not measured"        # e.g. a sidecar's metric for a library client
        elif r.low is None:
            interval = "too few observations"
        else:
            interval = f"[{r.low:.4g}, {r.high:.4g}]" + ("*" if c.method == "rounds-t" else "")
        rows.append((c.label, [f"{c.fault_rate:g}", str(c.users), c.metric, _number(r.a.median), _number(r.b.median),
                               _number(r.difference), interval, "[bold red]differs[/bold red]" if r.significant else ""]))
    title = f"median(B) - median(A) [{diff.confidence:.0%} CI]; A = {diff.run_a}, B = {diff.run_b}"
    if any(c.method == "rounds-t" for c in diff.cells):
        title += " (* 2-3 rounds: Welch's t-interval on the round medians)"
    print_keyed_table(console, title, "configuration", columns, rows)
    expected = (1 - diff.confidence) * diff.tested
    console.print(f"{len(diff.significant)} of {diff.tested} comparisons differ (interval excludes 0); about "
                  f"{expected:.1f} would by chance alone between identical setups", highlight=False)
    if diff.only_a or diff.only_b:
        console.print(f"not compared: {diff.only_a} cell(s) only in A, {diff.only_b} only in B", highlight=False)
    if diff.versions:
        console.print(f"versions that differ: {', '.join(diff.versions)}", highlight=False)


def default_output(run_a: Path, run_b: Path) -> Path:
    """Where `rbl diff` writes without -o (as rbl/commands/diff.py computes it): inside run B."""
    return run_b / f"diff-vs-{run_a.resolve().name}"


def write_diff(diff: RunDiff, out: Path) -> list[Path]:
    """diff.csv, diff.json and the figure (SVG) in `out`: made apart and moved in, so a link
    planted there is refused, not written through (a directory the user named may be a link)."""
    output = OutputDirectory(out, named_by_user=out != default_output(diff.run_a, diff.run_b))
    out_dir = output.staging
    paths = [out_dir / "diff.csv", out_dir / "diff.json"]
    paths[0].write_text(as_csv(diff), encoding="utf-8")
    paths[1].write_text(as_json(diff), encoding="utf-8")
    from .figures import write_figure
    paths += write_figure(diff_figure(diff), out_dir, "diff")
    return output.commit(paths)


def diff_figure(diff: RunDiff):
    """One panel per metric: each cell's difference with its interval, flagged ones in red."""
    from .chart.model import Chart, Ticks

    metrics = list(dict.fromkeys(c.metric for c in diff.cells))
    per_metric = {m: [c for c in diff.cells if c.metric == m and c.result.difference is not None] for m in metrics}
    for m, cells in per_metric.items():
        if len(cells) > FIGURE_ROWS:
            cells.sort(key=lambda c: not c.result.significant)
            per_metric[m] = cells[:FIGURE_ROWS]
    rows = max((len(cells) for cells in per_metric.values()), default=1)
    # one panel per metric, stacked, so long configuration labels never run into the next panel
    figure = Chart(8, max(1, len(metrics)) * (0.9 + 0.25 * max(rows, 2)) + 0.4,
                   title=f"{diff.run_b.name} vs {diff.run_a.name}: red = {diff.confidence:.0%} interval excludes 0")
    grid = figure.grid(max(1, len(metrics)), 1)
    for (ax,), metric in zip(grid, metrics):
        cells = per_metric[metric]
        for y, c in enumerate(cells):
            r = c.result
            colour = "#d62728" if r.significant else "#1f77b4"
            if r.low is not None:
                ax.interval([r.low], [r.high], [y], colour, width=2)
            ax.points([r.difference], [y], colour, marker="o", size=4)
        ax.rule("x", 0, colour="#808080", width=1)
        ax.yticks = Ticks(list(range(len(cells))), [f"{c.label} {c.fault_rate:g}% u={c.users}" for c in cells])
        ax.invert_y = True
        ax.title = f"{metric}: B - A"
    return figure
