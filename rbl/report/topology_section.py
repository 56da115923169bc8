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
from .figures import PALETTE, subplots, figure_entry, figure_facts, write_figure
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
    figure, axes = subplots(1, len(panels), figsize=(3.4 * len(panels) + 1, 3.6), squeeze=False)
    width = 0.8 / max(1, len(labels))
    for ax, (key, title) in zip(axes[0], panels):
        for index, label in enumerate(labels):
            values = [next((r[key] for r in rows if r["configuration"] == label and r["service"] == name), None) or 0
                      for name in order]
            ax.bar([position + index * width for position in range(len(order))], values, width,
                   color=PALETTE[index % len(PALETTE)], label=label)
        ax.set_xticks([position + width * (len(labels) - 1) / 2 for position in range(len(order))])
        ax.set_xticklabels([f"{name}\n(tier {next(r['tier'] for r in rows if r['service'] == name) or '-'})"
                            for name in order], fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    handles, names = axes[0][0].get_legend_handles_labels()
    legend_rows = -(-len(names) // 4)
    figure.legend(handles, names, loc="lower center", ncol=min(4, len(names)), fontsize=8, frameon=False)
    figure.suptitle(f"{header['name']}: along the chain", fontsize=11)
    figure.tight_layout(rect=(0, 0.06 * legend_rows + 0.02, 1, 0.95))
    return figure


def _series_figure(header: dict, drawn: list[tuple[str, list[dict]]], order: list[str]):
    figure, axes = subplots(len(drawn), 1, figsize=(8, 2.2 * len(drawn) + 1), squeeze=False, sharex=True)
    for (label, records), (ax,) in zip(drawn, axes):
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
            ax.plot(times, ok, color=colour, label=f"{name}: success")
            ax.plot(times, failed, color=colour, linestyle="--", label=f"{name}: failed")
        ax.set_title(label, fontsize=9)
        ax.set_ylabel("answers per s", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(True, alpha=0.3)
    axes[-1][0].set_xlabel("seconds into the round", fontsize=8)
    handles, names = axes[0][0].get_legend_handles_labels()
    legend_rows = -(-len(names) // 3)
    figure.legend(handles, names, loc="lower center", ncol=min(3, len(names)), fontsize=7, frameon=False)
    figure.suptitle(f"{header['name']}: answers per tier over time (solid: success, dashed: failed)", fontsize=11)
    figure.tight_layout(rect=(0, 0.025 * legend_rows + 0.02, 1, 0.96))
    return figure
