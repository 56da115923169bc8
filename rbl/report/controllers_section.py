"""The report's view of a run's controllers (controllers.jsonl, rbl/runner/controllers.py), for a run
whose plan has one; nothing otherwise:

- controllers.csv: every decision of the counted rounds (the window it saw, the value it set, how long
  putting it in force took);
- "controllers over time": per configuration with a controller (its first counted round), the
  controlled parameter as it was set, and beside it the RT95 of each window with the controller's
  target (adaptive_breaker's trt, aimd_retry's target) as a line."""

from __future__ import annotations

import csv
from pathlib import Path

from ..libraries.composition import pattern_names
from ..libraries.istio import CONTROLLED
from ..store.controllers import read_decisions
from .cells import Cell
from .figures import PALETTE, subplots, figure_entry, figure_facts, write_figure
from .labels import Labeller

COLUMNS = ("configuration", "round", "elapsedS", "controller", "parameter", "previous", "value", "appliedMs",
           "answered", "successes", "failed", "circuitBroken", "rt95Ms", "queue")
TARGET_KEYS = {"adaptive_breaker": "trt", "aimd_retry": "target"}


def controllers_section(run_dir: Path, header: dict, cells: list[Cell], out_dir: Path) -> tuple[list[dict], list[Path]]:
    """(figures for report.html, files written); none for a run without controller decisions."""
    if not any(name in CONTROLLED for c in header["clients"] for name in pattern_names(c["pattern"])):
        return [], []
    counted = {(c.scenario["id"], r) for c in cells for r in c.rounds}
    by_scenario: dict[str, list[dict]] = {}
    for record in read_decisions(run_dir):
        if (record["scenarioId"], record["round"]) in counted:
            by_scenario.setdefault(record["scenarioId"], []).append(record)
    labeller = Labeller(header)
    drawn = [(labeller.label(c.scenario), c.scenario, by_scenario[c.scenario["id"]]) for c in cells
             if c.scenario["id"] in by_scenario]
    if not drawn:
        return [], []
    files = [_write_csv(drawn, out_dir / "controllers.csv")]
    figure = _figure(header, drawn)
    paths = write_figure(figure, out_dir, "controllers")
    files += paths
    title = "Controllers over time: the value each set, beside each window's RT95 (first counted round)"
    return [figure_entry(title, paths[0], figure_facts(figure))], files


def _write_csv(drawn: list[tuple[str, dict, list[dict]]], path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=COLUMNS)
        writer.writeheader()
        for label, _, records in drawn:
            for record in records:
                writer.writerow({"configuration": label, **{k: record.get(k) for k in COLUMNS[1:9]},
                                 **{k: record["window"].get(k) for k in COLUMNS[9:]}})
    return path


def _first_round(records: list[dict]) -> list[dict]:
    first = min(record["round"] for record in records)
    return [record for record in records if record["round"] == first]


def _target_ms(scenario: dict, controller: str) -> float | None:
    names = pattern_names(scenario["pattern"])
    prefix = "" if len(names) == 1 else f"{controller}."
    value = scenario["config"].get(f"{prefix}{TARGET_KEYS[controller]}")
    return float(value) if value is not None else None


def _figure(header: dict, drawn: list[tuple[str, dict, list[dict]]]):
    figure, axes = subplots(len(drawn), 1, figsize=(8, 2.2 * len(drawn) + 1), squeeze=False, sharex=True)
    for index, ((label, scenario, records), (ax,)) in enumerate(zip(drawn, axes)):
        records = _first_round(records)
        colour = PALETTE[index % len(PALETTE)]
        times = [0.0] + [r["elapsedS"] for r in records]
        values = [records[0]["previous"]] + [r["value"] for r in records]
        ax.step(times, values, where="post", color=colour, label=records[0]["parameter"])
        ax.set_ylabel(records[0]["parameter"], fontsize=8, color=colour)
        ax.set_title(label, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(True, alpha=0.3)
        if records[0]["parameter"] == "http2MaxRequests" and max(values) / max(1, min(values)) > 50:
            ax.set_yscale("log")              # a limit falls from 1024 to a handful: both ends readable
        rt = ax.twinx()
        rt.plot([r["elapsedS"] for r in records], [r["window"]["rt95Ms"] for r in records], color="#333333",
                marker=".", linestyle=":", label="window RT95 (ms)")
        target = _target_ms(scenario, records[0]["controller"])
        if target is not None:
            rt.axhline(target, color="#999999", linewidth=0.8, label="target (ms)")
        rt.set_ylabel("RT95 (ms)", fontsize=8)
        rt.tick_params(labelsize=8)
    axes[-1][0].set_xlabel("seconds into the round", fontsize=8)
    figure.suptitle(f"{header['name']}: controllers over time (step: the value in force; dotted: RT95)", fontsize=11)
    figure.tight_layout(rect=(0, 0, 1, 0.96))
    return figure
