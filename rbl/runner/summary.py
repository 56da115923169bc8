"""The end-of-run summary: per client x fault rate x users, medians of the headline metrics."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from statistics import median

from rich.console import Console
from rich.table import Table

from .results import RunDirectory


def _median(values: list[float]) -> str:
    present = [v for v in values if v is not None]
    return f"{median(present):.1f}" if present else "-"


def summary_rows(run: RunDirectory) -> list[tuple]:
    axes = {c["label"]: c["axes"] for c in run.plan_header()["clients"]}
    cells: dict[tuple, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for row in run.rows():
        # the configuration is shown by the parameters that vary (the axes), the rest is fixed
        varying = " ".join(f"{name}={row['config'][name]}" for name in axes.get(row["client"], ()))
        cell = cells[(f"{row['client']} {varying}".strip(), row["faultPercentage"], row["users"])]
        cell["total"].append(row["totalExecutionTime"])
        cell["success"].append(row["successTimePerRequest"])
        cell["applied"].append(row["faultRateApplied"])
    return [(client, fault, users, len(cell["total"]), _median(cell["total"]), _median(cell["success"]),
             _median(cell["applied"]))
            for (client, fault, users), cell in cells.items()]


def print_summary(run: RunDirectory, console: Console) -> None:
    table = Table(title="median per virtual user (times in ms)", title_justify="left")
    for column in ("client and configuration", "fault %", "users", "rows", "total execution time",
                   "success time per request", "fault % applied"):
        table.add_column(column, justify="left" if column.startswith("client") else "right")
    for client, fault, users, rows, total, success, applied in summary_rows(run):
        table.add_row(client, f"{fault:g}", str(users), str(rows), total, success, applied)
    console.print(table)


def print_failures(failures: list[dict], console: Console, run_path: Path) -> None:
    console.print(f"{len(failures)} round(s) failed (also in {run_path / 'failures.jsonl'}):", highlight=False)
    for failure in failures:
        console.print(f"  - scenario {failure['scenarioIndex'] + 1} ({failure['client']}) round {failure['round']}: "
                      f"{failure['reason']}", highlight=False, markup=False)
    console.print(f"  = help: rerun only these with `rbl run --resume {run_path}`", highlight=False)
