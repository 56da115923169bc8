"""The end-of-run summary: per client x fault rate x users, medians of the headline metrics."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from statistics import median

from rich.console import Console

from ..plan_records import is_open_loop
from ..report.keyed_table import NumberColumn, print_keyed_table
from ..report.labels import METRIC_TITLES, Labeller, plural
from ..store.results import RunDirectory


# a mesh client's requests refused by its sidecar's pool and retried by it (median per virtual user)
MESH_SUMMARY = {"circuitBrokenRequests": "circuit broken", "sidecarRetries": "sidecar retries"}
# what a library's timeout, bulkhead, rate limiter, hedge or fallback did (median per virtual user)
PATTERN_SUMMARY = {"timedOutCalls": "timed out", "bulkheadRejectedCalls": "bulkhead refused",
                   "rateLimitedCalls": "rate limited", "hedgedRequests": "hedges", "fallbackCalls": "fallbacks"}
# a topology's round along its chain (the same for every row of the round)
CHAIN_SUMMARY = {"chainAmplification": "requests per entry request", "chainRefusedCalls": "refused in the chain",
                 "chainWastedCpuSeconds": "CPU wasted in the chain (s)"}
OPTIONAL_SUMMARY = {**MESH_SUMMARY, **PATTERN_SUMMARY, **CHAIN_SUMMARY}     # columns shown when some row has them


def _median(values: list[float]) -> str:
    present = [v for v in values if v is not None]
    return f"{median(present):.1f}" if present else "-"


def summary_rows(run: RunDirectory) -> list[tuple]:
    labeller = Labeller(run.plan_header())
    cells: dict[tuple, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for row in run.rows():
        if row.get("warmup"):
            continue                   # warm-up rounds are not measurements
        # the configuration is shown by the parameters that vary (the axes), the rest is fixed
        cell = cells[(labeller.label({"client": row["client"], "config": row["config"]}), row["faultPercentage"],
                      row["users"])]
        cell["total"].append(row["totalExecutionTime"])
        cell["success"].append(row["successTimePerRequest"])
        cell["applied"].append(row["faultRateApplied"])
        cell["rounds"].append(row["round"])
        for column in OPTIONAL_SUMMARY:
            cell[column].append(row.get(column))
    return [(client, fault, users, len(set(cell["rounds"])), _median(cell["total"]), _median(cell["success"]),
             _median(cell["applied"]), *(_median(cell[column]) for column in OPTIONAL_SUMMARY))
            for (client, fault, users), cell in cells.items()]


# an open-loop round's headline metrics (store/open_metrics.py): title, how a median is shown
OPEN_LOOP_SUMMARY = {"offeredRate": ("offered req/s", "{:.1f}"), "carriedThroughput": ("carried", "{:.1%}"),
                     "circuitBrokenShare": ("circuit broken", "{:.1%}"), "rejectedShare": ("rejected", "{:.1%}"),
                     "timedOutShare": ("timed out", "{:.1%}"), "failedShare": ("failed", "{:.1%}"),
                     "successP95Ms": ("success p95 ms", "{:.1f}"), "successP99Ms": ("success p99 ms", "{:.1f}"),
                     "p95UnderSloShare": ("p95 under SLO", "{:.0%}")}
# ... and a topology's, when the run has one
OPEN_LOOP_CHAIN_SUMMARY = {"chainRefusedCalls": ("refused in the chain", "{:.0f}"),
                           "chainWastedCpuSeconds": ("CPU wasted in the chain (s)", "{:.3f}")}


def open_loop_rows(run: RunDirectory, summary: dict = OPEN_LOOP_SUMMARY) -> list[tuple[str, list[str]]]:
    """Per scenario (client and configuration at one fault rate, load and target point), medians over
    its rounds: (label, [fault %, load, target, *values])."""
    from ..compiler.workload import describe_load      # the compiler's import cost, for open-loop runs only
    labeller = Labeller(run.plan_header())
    cells: dict[tuple, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for row in run.rows():
        if row.get("warmup") or "offeredRequests" not in row:
            continue
        load = describe_load(row["load"]) if isinstance(row.get("load"), dict) else "-"
        target = ""
        if "targetPath" in row:                # a varying target's point tells cells apart too
            cpus = row.get("targetCpus")
            target = row["targetPath"] + (f", {cpus:g} CPU" if isinstance(cpus, (int, float)) else "")
        label = labeller.label({"client": row["client"], "config": row["config"]})
        cell = cells[(label, row["faultPercentage"], load, target)]
        for column in summary:
            cell[column].append(row.get(column))
    rows = []
    for (client, fault, load, target), cell in cells.items():
        values = []
        for column, (_, shape) in summary.items():
            present = [v for v in cell[column] if v is not None]
            values.append(shape.format(median(present)) if present else "-")
        rows.append((client, [f"{fault:g}", load, target, *values]))
    return rows


def print_summary(run: RunDirectory, console: Console, proxy: str | None = None) -> None:
    overrides = run.plan_header().get("source", {}).get("overrides")
    if overrides:
        console.print(f"overrides: {', '.join(overrides)}", highlight=False, markup=False)
    if is_open_loop(run.plan_header()):
        summary = {**OPEN_LOOP_SUMMARY, **(OPEN_LOOP_CHAIN_SUMMARY if "topology" in run.plan_header() else {})}
        rows = open_loop_rows(run, summary)
        # a condition every row shares is said once, in the title, not in a column of its own
        conditions = ["fault %", "load", "target"]
        shared = {i: rows[0][1][i] for i in range(len(conditions)) if len(rows) > 1 and
                  len({row[1][i] for row in rows}) == 1}
        kept = [i for i in range(len(conditions)) if i not in shared and any(row[1][i] for row in rows)]
        columns = [NumberColumn(conditions[i], "left" if i else "right") for i in kept] + \
            [NumberColumn(t) for t, _ in summary.values()]
        rows = [(label, [values[i] for i in kept] + values[len(conditions):]) for label, values in rows]
        said = [f"fault {shared[0]}%" if 0 in shared else "", f"load {shared[1]}" if shared.get(1) else ""]
        title = "open-loop load, median over rounds" + (f" (fault proxy: {proxy})" if proxy else "") + \
            "".join(f"; {text}" for text in said if text)
        print_keyed_table(console, title, "client and configuration", columns, rows)
        return
    names = ["fault %", "users", "rounds", METRIC_TITLES["totalExecutionTime"],
             METRIC_TITLES["successTimePerRequest"], "fault % applied"]
    found = summary_rows(run)
    # a mesh client's sidecar columns when some row has them; a pattern's when it did something somewhere
    hidden = [("-",) if column in MESH_SUMMARY or column in CHAIN_SUMMARY else ("-", "0.0")
              for column in OPTIONAL_SUMMARY]
    shown = [position for position in range(len(OPTIONAL_SUMMARY))
             if any(row[7 + position] not in hidden[position] for row in found)]
    names += [list(OPTIONAL_SUMMARY.values())[position] for position in shown]
    columns = [NumberColumn(name) for name in names]
    rows = [(client, [f"{fault:g}", str(users), str(rounds), total, success, applied,
                      *(optional[position] for position in shown)])
            for client, fault, users, rounds, total, success, applied, *optional in found]
    title = "median per virtual user" + (f" (fault proxy: {proxy})" if proxy else "")
    print_keyed_table(console, title, "client and configuration", columns, rows)


def print_failures(failures: list[dict], console: Console, run_path: Path) -> None:
    console.print(f"{plural(len(failures), 'round')} failed (also in {run_path / 'failures.jsonl'}):", highlight=False)
    for failure in failures:
        console.print(f"  - scenario {failure['scenarioIndex'] + 1} ({failure['client']}) round {failure['round']}: "
                      f"{failure['reason']}", highlight=False, markup=False)
    console.print(f"  = help: rerun only these with `rbl run --resume {run_path}`", highlight=False)
