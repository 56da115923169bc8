"""The report's view along a topology's chain (hops.jsonl, rbl/runner/hops.py), for a run whose plan has
one; nothing otherwise:

- a table (terminal and topology.csv): per configuration and service, in tier order, the requests it
  received per entry request (nominal, measured, worst case under the placed retries), its failed
  answers, the refusals of the calls into it (the callers' sidecars' pool overflows), the success p95
  of those calls, and the CPU it spent beyond what the carried requests needed (wasted);
- "along the chain": the same per tier as bars, a group per configuration;
- "answers per tier over time": each service's successful and failed answers per second, a panel per
  configuration (its first counted round).

Means over the counted rounds (not warm-up or failed rounds), as the other tables are."""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

from rich.console import Console

from ..store.hops import read_hops
from ..topology import topology_from_record
from .cells import Cell
from .chart.model import Chart, Ticks
from .figures import PALETTE, figure_entry, figure_facts, write_figure
from .keyed_table import NumberColumn, print_keyed_table
from .labels import Labeller

COLUMNS = ("configuration", "tier", "service", "perEntryRequestNominal", "perEntryRequest", "perEntryRequestWorstCase",
           "failedShare", "refusedCallsIn", "successP95MsIn", "wastedCpuSeconds", "cpuSeconds")


def topology_section(run_dir: Path, header: dict, cells: list[Cell], out_dir: Path) -> tuple[list[dict], list[Path]]:
    """(figures for report.html, files written); none for a run without a topology or hop records."""
    if "topology" not in header:
        return [], []
    topology = topology_from_record(header["topology"])
    counted = {(c.scenario["id"], r) for c in cells for r in c.rounds}
    by_scenario: dict[str, list[dict]] = {}
    for record in read_hops(run_dir):
        if (record["scenarioId"], record["round"]) in counted:
            by_scenario.setdefault(record["scenarioId"], []).append(record)
    labeller = Labeller(header)
    drawn = [(labeller.label(c.scenario), by_scenario[c.scenario["id"]]) for c in cells if c.scenario["id"] in by_scenario]
    if not drawn:
        return [], []
    order = sorted(topology.names, key=lambda name: (topology.tiers().get(name, 99), topology.names.index(name)))
    rows = [row for label, records in drawn for row in _rows(label, records, order)]
    files = [_write_csv(rows, out_dir / "topology.csv")]
    figures = []
    made = [("Along the chain: each tier, a group per configuration (mean of counted rounds)", "topology-tiers",
             _tiers_figure(header, rows, order, [label for label, _ in drawn]))]
    if any(records[0].get("series") for _, records in drawn):
        made.append(("Answers per tier over time (first counted round of each configuration)", "topology-series",
                     _series_figure(header, drawn, order)))
    for title, stem, figure in made:
        paths = write_figure(figure, out_dir, stem)
        files += paths
        figures.append(figure_entry(title, paths[0], figure_facts(figure)))
    return figures, files


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.fmean(values), 4) if values else None


def _rows(label: str, records: list[dict], order: list[str]) -> list[dict]:
    rows = []
    for name in order:
        services = [next(s for s in r["services"] if s["service"] == name) for r in records]
        edges_in = [[e for e in r["edges"] if e["callee"] == name] for r in records]
        rows.append({
            "configuration": label, "tier": services[0]["tier"], "service": name,
            "perEntryRequestNominal": services[0]["perEntryRequestNominal"],
            "perEntryRequest": _mean(s["perEntryRequest"] for s in services),
            "perEntryRequestWorstCase": services[0]["perEntryRequestWorstCase"],
            "failedShare": _mean(s["answeredFailed"] / s["requests"] if s["requests"] else None for s in services),
            "refusedCallsIn": _mean(sum(e["sidecarPoolOverflows"] for e in edges) for edges in edges_in),
            "successP95MsIn": _mean(max((e["successP95Ms"] or 0 for e in edges), default=None) or None
                                    for edges in edges_in),
            "wastedCpuSeconds": _mean(s["wastedCpuSeconds"] for s in services),
            "cpuSeconds": _mean(s["cpuSeconds"] for s in services)})
    return rows


def _write_csv(rows: list[dict], path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


def _text(value, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def print_chain_table(path: Path, console: Console) -> None:
    """The table of topology.csv on the terminal, after the report's own."""
    with path.open(newline="", encoding="utf-8") as lines:
        rows = [{key: _number(value) for key, value in row.items()} for row in csv.DictReader(lines)]
    _print(rows, console)


def _number(text: str):
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _print(rows: list[dict], console: Console) -> None:
    columns = [NumberColumn("tier"), NumberColumn("service", "left"),
               NumberColumn("requests per entry request: nominal / measured / worst"), NumberColumn("answered failed"),
               NumberColumn("calls into it refused (UO)"), NumberColumn("p95 of its successful calls (ms)"),
               NumberColumn("CPU wasted (s)")]
    cells = []
    for row in rows:
        failed = row["failedShare"]
        cells.append((row["configuration"], [
            str(row["tier"] or "-"), row["service"],
            f"{row['perEntryRequestNominal']} / {_text(row['perEntryRequest'])} / {row['perEntryRequestWorstCase']}",
            "-" if failed is None else f"{100 * failed:.1f}%", _text(row["refusedCallsIn"], 0),
            _text(row["successP95MsIn"], 1), _text(row["wastedCpuSeconds"], 3)]))
    print_keyed_table(console, "along the chain, mean of counted rounds (topology.csv)", "configuration", columns,
                      cells)


def _tiers_figure(header: dict, rows: list[dict], order: list[str], labels: list[str]):
    panels = (("perEntryRequest", "requests per entry request"), ("failedShare", "share answered failed"),
              ("refusedCallsIn", "calls into it refused (UO)"), ("wastedCpuSeconds", "CPU wasted (s)"))
    figure = Chart(3.4 * len(panels) + 1, 3.6 + 0.2 * -(-len(labels) // 4),
                   title=f"{header['name']}: along the chain")
    (axes,) = figure.grid(1, len(panels))
    width = 0.8 / max(1, len(labels))
    for ax, (key, title) in zip(axes, panels):
        for index, label in enumerate(labels):
            values = [next((r[key] for r in rows if r["configuration"] == label and r["service"] == name), None) or 0
                      for name in order]
            ax.bars([position + index * width for position in range(len(order))], values,
                    PALETTE[index % len(PALETTE)], bar_width=width, label=label)
        ax.xticks = Ticks([position + width * (len(labels) - 1) / 2 for position in range(len(order))],
                          [f"{name}\n(tier {next(r['tier'] for r in rows if r['service'] == name) or '-'})"
                           for name in order])
        ax.title = title
        ax.grid = "y"
    figure.add_legend("bottom", columns=min(4, len(labels)))
    return figure


def _series_figure(header: dict, drawn: list[tuple[str, list[dict]]], order: list[str]):
    figure = Chart(8, 2.2 * len(drawn) + 1 + 0.2 * -(-2 * len(order) // 3),
                   title=f"{header['name']}: answers per tier over time (solid: success, dashed: failed)")
    grid = figure.grid(len(drawn), 1, sharex=True)
    for (label, records), (ax,) in zip(drawn, grid):
        series = records[0].get("series") or []
        for index, name in enumerate(order):
            colour = PALETTE[index % len(PALETTE)]
            times, ok, failed, previous = [], [], [], 0.0
            for point in series:
                span = max(point["t"] - previous, 1e-3)
                counts = point["services"].get(name, {})
                times.append(point["t"])
                ok.append(counts.get("answeredOk", 0) / span)
                failed.append(counts.get("answeredFailed", 0) / span)
                previous = point["t"]
            ax.line(times, ok, colour, label=f"{name}: success")
            ax.line(times, failed, colour, dash="--", label=f"{name}: failed")
        ax.title = label
        ax.ylabel = "answers per s"
    grid[-1][0].xlabel = "seconds into the round"
    figure.add_legend("bottom", columns=3)
    return figure
