"""Cells of a run: one per scenario (client and configuration x fault rate x users), with the
observations of every round and virtual user, and a status saying whether it may be plotted."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..plan_records import is_open_loop
from ..store.results import MANIFEST, RESULTS, RunDirectory
from ..store.run_reader import DOCUMENT_LIMIT, check_member
from .labels import METRIC_TITLES as TITLES, Labeller, load_text, target_phrase
from .stats import MIN_OBSERVATIONS, MIN_ROUNDS, Estimate, estimate, interval_method, rounds_t_estimate

DEFAULT_METRICS = ("successTimePerRequest", "totalExecutionTime")   # the paper's Figures 4 and 5
METRIC_TITLES = TITLES      # one wording for the summary, tables and figures (labels.py)


@dataclass
class Cell:
    scenario: dict
    rounds: dict[int, list[dict]] = field(default_factory=dict)     # round -> rows (one per user)
    failed_rounds: list[int] = field(default_factory=list)
    estimates: dict[str, Estimate] = field(default_factory=dict)
    warmup_rounds: set[int] = field(default_factory=set)            # run and stored, left out of the statistics
    violation_rows: int = 0                                         # rows with oracle violations (warm-up too)
    method: str = "auto"                                            # the interval method asked for

    def interval_method(self, method: str | None = None) -> str:
        """bootstrap or rounds-t: what this cell's intervals use (a t-interval on the round medians
        where `auto` meets few rounds, rbl/report/stats.py)."""
        return interval_method(method or self.method, len(self.rounds))

    @property
    def client(self) -> str:
        return self.scenario["client"]

    @property
    def library(self) -> str:
        return self.scenario["library"]

    @property
    def pattern(self) -> str:
        return self.scenario["pattern"]

    @property
    def fault_rate(self) -> float:
        return self.scenario["fault"]["rate"]

    @property
    def users(self) -> int:
        return self.scenario["users"]

    @property
    def status(self) -> str:
        """ok | failed rounds | too few observations | no data"""
        if self.failed_rounds:
            return f"failed rounds: {', '.join(map(str, sorted(self.failed_rounds)))}"
        if not self.rounds:
            return "no data"
        n = sum(len(rows) for rows in self.rounds.values())
        if n < MIN_OBSERVATIONS or len(self.rounds) < MIN_ROUNDS:
            return "too few observations"
        return "ok"


def configuration_label(scenario: dict, labeller: Labeller) -> str:
    """The client and the values of its varying parameters in the spec's spelling, e.g.
    `resilience4j.retry initialIntervalMillis=20ms`."""
    return labeller.label(scenario)


def load_cells(run_dir: Path, metrics: list[str], resamples: int = 2000, seed: int = 0,
               warn=lambda text: None, include_warmup: bool = False,
               method: str = "auto") -> tuple[dict, list[Cell]]:
    """The run's plan header and its cells in plan order, with an estimate per metric. Lines of
    results.jsonl that are not rows of this plan are left out, and so are rounds in which a virtual
    user appears twice (each row would count twice); `warn` names them. Warm-up rows (the plan's
    `warmup`) are left out of the statistics unless `include_warmup`. `method` chooses each cell's
    interval (stats.interval_method: auto, bootstrap, rounds-t). The run directory is read as
    untrusted input (rbl/store/run_reader.py)."""
    run = RunDirectory(run_dir)
    # the report reads the manifest too (build.py): no link, FIFO or giant file there either
    check_member(run_dir, MANIFEST, DOCUMENT_LIMIT)
    header = run.plan_header(strict=True)
    cells = {s["id"]: Cell(s) for s in run.scenarios(header, strict=True)}
    read = run.rounds()
    for (scenario_id, round_number), rows in read.rounds.items():
        cell = cells[scenario_id]
        cell.violation_rows += sum(bool(row.get("oracleViolations")) for row in rows)
        if (scenario_id, round_number) in read.repeated:
            continue
        for row in rows:
            if row.get("warmup") and not include_warmup:
                cell.warmup_rounds.add(row["round"])
                continue
            cell.rounds.setdefault(row["round"], []).append(row)
    results = run_dir / RESULTS
    if read.bad_count:
        many = read.bad_count != 1
        warn(f"{read.bad_count} line{'s' if many else ''} of {results} {'are' if many else 'is'} not "
             f"{'rows' if many else 'a row'} of this plan (damaged or edited) and {'are' if many else 'is'} left "
             f"out; `rbl run --resume` redoes {'their rounds' if many else 'its round'}: "
             + "; ".join(read.bad_lines(str(results))))
    for message in read.repeats():
        warn(f"{results}: {message}: the round is left out (its rows would count twice); "
             f"`rbl run --resume {run_dir}` redoes it")
    for failure in run.failures():
        cell = cells[failure["scenarioId"]]
        # a round that failed and was later redone by --resume has rows: it no longer counts
        if failure["round"] not in cell.rounds and failure["round"] not in cell.warmup_rounds \
                and failure["round"] not in cell.failed_rounds:          # failed in two sessions: once
            cell.failed_rounds.append(failure["round"])
    for cell in cells.values():
        cell.method = method
    estimate_metrics(list(cells.values()), metrics, resamples, seed)
    return header, list(cells.values())


def estimate_metrics(cells: list[Cell], metrics: list[str], resamples: int = 2000, seed: int = 0) -> None:
    """Each cell's estimate of each metric, with the cell's interval method."""
    for cell in cells:
        for metric in metrics:
            groups = [[row.get(metric) for row in rows] for _, rows in sorted(cell.rounds.items())]
            cell.estimates[metric] = rounds_t_estimate(groups) if cell.interval_method() == "rounds-t" \
                else estimate(groups, resamples, seed)


def axes_by_client(header: dict) -> dict[str, list[str]]:
    return {client["label"]: list(client.get("axes", [])) for client in header["clients"]}


def cells_as_records(header: dict, cells: list[Cell], metrics: list[str]) -> list[dict]:
    labeller = Labeller(header)
    records = []
    for cell in cells:
        record = {"scenarioId": cell.scenario["id"], "client": cell.client, "library": cell.library,
                  "pattern": cell.pattern, "configuration": configuration_label(cell.scenario, labeller),
                  "faultRate": cell.fault_rate, "users": cell.users, "status": cell.status}
        if is_open_loop(cell.scenario):        # an open-loop scenario: its load tells its cells apart
            record["load"] = load_text(cell.scenario).removeprefix("load ")
        if "target" in cell.scenario:          # a varying target: its point tells them apart too
            record["target"] = target_phrase(cell.scenario).removeprefix(", on ")
        for metric in metrics:
            e = cell.estimates[metric]
            record.update({f"{metric}.median": e.median, f"{metric}.ci95Low": e.low, f"{metric}.ci95High": e.high,
                           f"{metric}.n": e.n})
        record["oracleViolations"] = cell.violation_rows
        record.update({"rounds": len(cell.rounds), "interval": cell.interval_method()})
        records.append(record)
    return records


def write_tables(records: list[dict], out_dir: Path) -> list[Path]:
    import csv
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = out_dir / "cells.json", out_dir / "cells.csv"
    json_path.write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    with csv_path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=list(records[0]) if records else ["scenarioId"])
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in records)
    return [csv_path, json_path]


def group_lines(cells: list[Cell]) -> dict:
    """(library, users) -> configuration label -> cells ordered by fault rate."""
    grouped: dict = defaultdict(lambda: defaultdict(list))
    for cell in cells:
        grouped[(cell.library, cell.users)][cell.scenario["client"], json.dumps(cell.scenario["config"],
                                                                                sort_keys=True)].append(cell)
    return grouped
