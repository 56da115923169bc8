"""The report's view of a run's controllers (controllers.jsonl, rbl/runner/controllers.py), for a run
whose plan has one; nothing otherwise:

- controllers.csv: every decision of the counted rounds (the window it saw, the value it set, how long
  putting it in force took);
- "controllers over time": per configuration with a controller (its first counted round), the
  controlled parameter as it was set, and beside it the RT95 of each window with the controller's
  target (adaptive_breaker's trt, aimd_retry's target) as a line; the limit an adaptive limiter or
  Envoy's adaptive concurrency filter set itself, as the runner read it every window, likewise."""

from __future__ import annotations

import csv
from pathlib import Path

from ..libraries.composition import pattern_names
from ..libraries.istio import CONTROLLED
from ..libraries.self_limiting import SELF_LIMITING_PATTERNS
from ..store.controllers import read_decisions
from .cells import Cell
from .chart.model import Chart
from .figures import PALETTE, figure_entry, figure_facts, write_figure
from .labels import Labeller

COLUMNS = ("configuration", "round", "elapsedS", "controller", "parameter", "previous", "value", "appliedMs",
           "answered", "successes", "failed", "circuitBroken", "rt95Ms", "queue")
TARGET_KEYS = {"adaptive_breaker": "trt", "aimd_retry": "target"}
# the controllers, and the patterns whose limit moves by itself, which the runner reads every window
DRAWN = (*CONTROLLED, *sorted(SELF_LIMITING_PATTERNS))


def controllers_section(run_dir: Path, header: dict, cells: list[Cell], out_dir: Path) -> tuple[list[dict], list[Path]]:
    """(figures for report.html, files written); none for a run without controller decisions."""
    if not any(name in DRAWN for c in header["clients"] for name in pattern_names(c["pattern"])):
        return [], []
    counted = {(c.scenario["id"], r) for c in cells for r in c.rounds}
    # per configuration and controller: a client may compose two (the retry and the breaker controller)
    by_controller: dict[str, dict[str, list[dict]]] = {}
    for record in read_decisions(run_dir):
        if (record["scenarioId"], record["round"]) in counted:
            by_controller.setdefault(record["scenarioId"], {}).setdefault(record["controller"], []).append(record)
    labeller = Labeller(header)
    drawn = []
    for cell in cells:
        controllers = by_controller.get(cell.scenario["id"], {})
        for controller, records in controllers.items():
            label = labeller.label(cell.scenario) + (f" ({controller})" if len(controllers) > 1 else "")
            drawn.append((label, cell.scenario, records))
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
    if controller not in TARGET_KEYS:               # Envoy's filter has no target of its own
        return None
    value = scenario["config"].get(f"{prefix}{TARGET_KEYS[controller]}")
    return float(value) if value is not None else None


def _figure(header: dict, drawn: list[tuple[str, dict, list[dict]]]):
    """Per configuration two panels over the same seconds: the value in force, and each window's RT95
    with the controller's target (one panel each: a twin y axis reads ambiguously)."""
    figure = Chart(8, 3.4 * len(drawn) + 0.8,
                   title=f"{header['name']}: controllers over time (step: the value in force; dotted: RT95)")
    grid = figure.grid(2 * len(drawn), 1, sharex=True)
    for index, (label, scenario, records) in enumerate(drawn):
        records = _first_round(records)
        value_panel, rt_panel = grid[2 * index][0], grid[2 * index + 1][0]
        colour = PALETTE[index % len(PALETTE)]
        times = [0.0] + [r["elapsedS"] for r in records]
        values = [records[0]["previous"]] + [r["value"] for r in records]
        value_panel.line(times, values, colour, step=True, label="_" + records[0]["parameter"])
        value_panel.ylabel = records[0]["parameter"]
        value_panel.ylabel_colour = colour
        value_panel.title = label
        if records[0]["parameter"] in ("http2MaxRequests", "concurrencyLimit") and max(values) / max(1, min(values)) > 50:
            value_panel.yscale = "log"        # a limit falls from 1024 to a handful: both ends readable
        rt_panel.line([r["elapsedS"] for r in records], [r["window"]["rt95Ms"] for r in records], "#333333",
                      marker="o", size=3, dash=":", label="window RT95 (ms)")
        target = _target_ms(scenario, records[0]["controller"])
        if target is not None:
            rt_panel.rule("y", target, colour="#999999", label="target (ms)")
        rt_panel.ylabel = "RT95 (ms)"
    grid[-1][0].xlabel = "seconds into the round"
    figure.add_legend("top", columns=2)
    return figure
