"""Builds the report of a run directory: the cell statistics (terminal table, CSV, JSON), the
figures (SVG) and one HTML file with everything embedded, which opens offline."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ..templating import render_html
from ..errors import UsageError
from ..store.report_output import OutputDirectory
from ..store.run_checks import manifest_problem
from ..store.metrics import (CHAIN_COLUMNS, LATENCY_COLUMNS, METRIC_COLUMNS, PATTERN_COLUMNS, RESPONSE_CLASS_COLUMNS,
                             SIDECAR_COLUMNS, SPIN_FREE_COLUMNS)
from ..store.open_columns import OPEN_LOOP_COLUMNS
from ..store.controllers import CONTROLLERS
from ..store.hops import HOPS
from ..store.requests import REQUESTS
from .design_notes import design_notes, spin_dependent
from .findings_view import print_findings
from .recommendation import objective_metrics
from .recommendation_view import print_recommendations
from .run_facts import hosts
from .keyed_table import NumberColumn, print_keyed_table
from .cells import DEFAULT_METRICS, METRIC_TITLES, cells_as_records, estimate_metrics, load_cells, write_tables
from ..plan_records import ClientKind, client_kind, is_open_loop

KNOWN_METRICS = (*METRIC_COLUMNS, *LATENCY_COLUMNS, *SPIN_FREE_COLUMNS, *RESPONSE_CLASS_COLUMNS, *SIDECAR_COLUMNS,
                 *PATTERN_COLUMNS, *CHAIN_COLUMNS,
                 *OPEN_LOOP_COLUMNS)
MESH_DEFAULT_METRICS = ("circuitBrokenRequests", "sidecarRetries")    # what a mesh policy did, beside the paper's
OPEN_LOOP_DEFAULT_METRICS = ("carriedThroughput", "successP99Ms", "p95UnderSloShare")   # the overload papers'
# beside them, for a run with controllers or adaptive limits: the adaptive mesh papers' own comparison
ADAPTIVE_DEFAULT_METRICS = ("circuitBrokenShare", "timedOutShare", "windowP50Ms", "windowP95Ms")


@dataclass
class Report:
    out_dir: Path
    files: list[Path]
    records: list[dict]


def build_report(run_dir: Path, out_dir: Path | None, metrics: list[str] | None, console: Console,
                 resamples: int = 2000, seed: int = 0, include_warmup: bool = False, method: str = "auto",
                 explain: bool = False) -> Report:
    from .figures import figure_entry

    if not (run_dir / "plan.json").is_file() or not (run_dir / "results.jsonl").is_file():
        raise UsageError(f"{run_dir} is not an rbl run directory (no plan.json and results.jsonl)",
                         hint="pass the directory `rbl run` wrote (its -o)")
    metrics = list(metrics or _default_metrics(run_dir))
    unknown = [m for m in metrics if m not in KNOWN_METRICS]
    if unknown:
        raise UsageError(f"unknown metric {unknown[0]!r}", f"the metrics are: {', '.join(KNOWN_METRICS)}")
    header, cells = load_cells(run_dir, metrics, resamples, seed,
                               warn=lambda text: console.print(f"warning: {text}", highlight=False),
                               include_warmup=include_warmup, method=method)
    if not any(cell.rounds for cell in cells):
        raise UsageError(f"{run_dir} has no results yet", hint=f"finish it with `rbl run --resume {run_dir}`")
    # the recommendation's metrics (the objective and its bounds) are estimated too, and get a noise floor
    scored = [*metrics, *(m for m in objective_metrics(header) if m not in metrics)]
    estimate_metrics(cells, scored[len(metrics):], resamples, seed)
    # files are written to a staging directory, then moved in: no link planted in the run directory is followed
    output = OutputDirectory(out_dir or run_dir / "report", named_by_user=out_dir is not None)
    out_dir = output.staging
    # the metrics' figures and an open-loop run's per-request figures (rbl/report/overload_figures.py; none
    # for a closed-loop run), each a plan that builds its chart
    from .overload_figures import FIGURE_METRICS, overload_plans
    overload = overload_plans(run_dir, header, cells)
    # the overload figure draws its metrics against the axis the run sweeps: against a fault rate with
    # one value, their own figures would only stack dots at one x
    drawn_elsewhere = set(FIGURE_METRICS) if overload and len({c.fault_rate for c in cells}) == 1 else set()
    plans = [partial(_metric_figure, header, cells, metric) for metric in metrics if metric not in drawn_elsewhere]
    records = cells_as_records(header, cells, metrics)
    files = write_tables(records, out_dir)
    # a topology's view along its chain (rbl/report/topology_section.py); none without a topology
    from .topology_section import topology_section
    section_figures, chain_files = topology_section(run_dir, header, cells, out_dir)
    files += chain_files
    # a run's controllers: the value each set over time (rbl/report/controllers_section.py)
    from .controllers_section import controllers_section
    controller_figures, controller_files = controllers_section(run_dir, header, cells, out_dir)
    section_figures += controller_figures
    files += controller_files
    manifest = _manifest(run_dir / "manifest.json", console)
    noise, noise_files, check = noise_section(header, manifest, cells, scored, method, resamples, seed, out_dir)
    files += noise_files
    # the findings (what did best, by how much, above the noise?) from the cells and the check above
    findings, findings_file = findings_section(header, cells, metrics, check, method, resamples, seed, out_dir)
    files.append(findings_file)
    recommendations, recommendations_file = recommendation_section(header, cells, check, method, resamples, seed,
                                                                   out_dir)
    files.append(recommendations_file)
    drawn = [_drawn(plan, out_dir) for plan in overload + plans]
    overload, by_metric = drawn[:len(drawn) - len(plans)], drawn[len(drawn) - len(plans):]
    figures = []
    for title, paths, facts in by_metric + overload:     # the metrics' figures first in report.html
        files += paths
        figures.append(figure_entry(title, paths[0], facts))
    figures += section_figures
    failed = sum(len(c.failed_rounds) for c in cells)
    html = render_html("report.html.j2", header=header, manifest=manifest, records=records, metrics=metrics,
                       figures=figures, run_dir=str(run_dir), resamples=resamples, seed=seed,
                       metric_titles=METRIC_TITLES,
                       failed_rounds=failed or "none",
                       design_notes=(notes := design_notes(header, manifest, cells, metrics, include_warmup)),
                       spin_dependent=spin_dependent(metrics, cells), noise=noise, findings=findings,
                       recommendations=recommendations, rounds_text=rounds_text(header, cells),
                       hosts=hosts(manifest))
    html_path = out_dir / "report.html"
    html_path.write_text(html, encoding="utf-8")
    files = output.commit(files + [html_path])
    print_recommendations(recommendations, console)
    print_findings(findings, console, explain)
    print_noise_verdict(noise, console, explain, run_dir)
    print_table(records, metrics, console, unmeasured(cells, metrics))
    if chain_files:
        from .topology_section import print_chain_table
        print_chain_table(output.path / "topology.csv", console)
    for note in notes:
        console.print(f"note: {note}", highlight=False, markup=False)
    return Report(output.path, files, records)


def _drawn(plan, out_dir: Path) -> tuple[str, list[Path], dict]:
    """A figure's plan made: (title, its files, what the report says of it)."""
    from .figures import figure_facts, write_figure
    title, stem, chart = plan()
    return title, write_figure(chart, out_dir, stem), figure_facts(chart)


def rounds_text(header: dict, cells: list) -> str:
    """`3 rounds`, or for a run until resolved the rounds it took: `3-6 rounds (until resolved, at most 20)`."""
    if "until_resolved" not in header:
        return f"{header['rounds']} round{'s' if header['rounds'] != 1 else ''}"
    counts = [len(cell.rounds) for cell in cells if cell.rounds] or [0]
    low, high = min(counts), max(counts)
    return f"{low}{'' if low == high else f'-{high}'} rounds (until resolved, at most {header['rounds']})"


def _metric_figure(header: dict, cells: list, metric: str):
    """A metric's figure plan: (title, stem, figure)."""
    from .figures import build_figure
    return METRIC_TITLES.get(metric, metric), metric, build_figure(header, cells, metric)


def noise_section(header: dict, manifest: dict, cells: list, metrics: list[str], method: str, resamples: int,
                  seed: int, out_dir: Path) -> tuple[dict, list[Path], object]:
    """The A/A check (rbl/report/noise.py) for the HTML report, and noise.json (its numbers, which
    `assert noise < ...` is checked against) and noise-floor.svg; and the check itself."""
    from .labels import Labeller
    from .noise import noise_check
    from .other_work import SHARED_MACHINE_CORES
    from .noise_view import cell_effects_rows, rows, summary as one_line, verdict, write_noise_figure
    check = noise_check(header, cells, metrics, method, resamples, seed, manifest)
    labeller = Labeller(header)
    labels = {c.scenario["id"]: labeller.label(c.scenario) for c in cells}
    figure, figure_facts = write_noise_figure(check, out_dir) or (None, None)
    summary = {"method": method, "passed": check.passed, "measurable": check.measurable, "floor": check.floor,
               "metrics": {m.metric: {"floor": m.floor, "floorAbsolute": m.floor_absolute, "resolvable": m.resolvable,
                                      "pairs": len(m.judged), "significant": len(m.significant),
                                      "cellEffects": cell_effects_summary(m.cell_effects)}
                           for m in check.metrics.values()},
               "leftOut": [{"scenarioId": item.scenario_id, "reason": item.reason} for item in check.grouping.left_out],
               "otherWork": check.other_work,
               "verdict": verdict(check), "summary": one_line(check)}
    path = out_dir / "noise.json"
    path.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    section = {**summary, "rows": rows(check, labels), "cell_effects_rows": cell_effects_rows(check),
               "shared_machine_cores": SHARED_MACHINE_CORES,
               "left_out": [f"{labels.get(i.scenario_id, i.scenario_id)}: {i.reason}" for i in check.grouping.left_out],
               "figure": base64.b64encode(figure.read_bytes()).decode() if figure else None, "figure_facts": figure_facts}
    return section, [path] + ([figure] if figure else []), check


def findings_section(header: dict, cells: list, metrics: list[str], check, method: str, resamples: int, seed: int,
                     out_dir: Path) -> tuple[dict, Path]:
    """The findings (rbl/report/findings.py) in words for the report and the terminal, and
    findings.json (each with its numbers and sentence)."""
    from .findings import find, record
    from .findings_view import html, sentence, view
    from .labels import Labeller
    labeller = Labeller(header)
    found = find(header, cells, metrics, check, method, resamples, seed)
    shown = view(found, labeller, metrics, max(len(c.rounds) for c in cells))
    for items in (shown["effects"], shown["unchecked"], shown["unresolved"]):
        for item in items:
            item["html"] = html(item["text"])
    shown["rounds_html"] = html(shown["rounds_line"])
    path = out_dir / "findings.json"
    path.write_text(json.dumps([record(f, labeller, sentence(f, labeller)) for f in found], indent=1) + "\n",
                    encoding="utf-8")
    return shown, path


def recommendation_section(header: dict, cells: list, check, method: str, resamples: int, seed: int,
                           out_dir: Path) -> tuple[dict, Path]:
    """Which configuration to deploy per condition (rbl/report/recommendation.py), in words, and
    recommendations.json (each with its numbers and sentence)."""
    from .recommendation import objective_of, recommend
    from .recommendation_view import view
    from .labels import Labeller
    objective = objective_of(header)
    found = recommend(header, cells, check, method, resamples, seed)
    labeller = Labeller(header)
    shown = view(found, labeller, objective, "until_resolved" in header)
    records = []
    for rec, item in zip(found, shown["items"]):
        finding = rec.finding
        records.append({"status": rec.status, "fault": rec.group.fault, "users": rec.group.users,
                        **({"load": rec.group.load} if rec.group.load is not None else {}),
                        **({"target": rec.group.target} if rec.group.target is not None else {}),
                        "deploy": labeller.label(rec.leader.scenario) if rec.leader else None,
                        "deployScenarioId": rec.leader.scenario["id"] if rec.leader else None,
                        "runnerUp": labeller.label(finding.worst.scenario) if finding else None,
                        "median": rec.leader.estimates[objective["metric"]].median if rec.leader else None,
                        "runnerUpMedian": finding.result.b.median if finding else None,
                        "ci95Low": finding.result.low if finding else None,
                        "ci95High": finding.result.high if finding else None,
                        "floor": finding.floor if finding else None, "moreRounds": rec.more_rounds,
                        "excluded": [{"configuration": labeller.label(c.scenario), "why": why} for c, why in rec.excluded],
                        "text": item["text"]})
    path = out_dir / "recommendations.json"
    path.write_text(json.dumps({"objective": objective, "recommendations": records}, indent=1) + "\n",
                    encoding="utf-8")
    return shown, path


def cell_effects_summary(effects) -> dict | None:
    """noise.json's record of rbl/report/cell_effects.py's analysis for one metric."""
    if effects is None:
        return None
    return {"F": effects.ratio, "dfBetween": effects.df_between, "dfWithin": effects.df_within,
            "pValue": effects.p_value, "significant": effects.significant, "cells": effects.cells,
            "roundSpread": effects.round_spread}


def print_noise_verdict(noise: dict, console: Console, explain: bool, run_dir: Path) -> None:
    """The A/A check in one line; a failed one in at most five, with where to read more; the full
    verdict with `explain`."""
    if explain:
        text = noise["verdict"]
        style = {"warning": "bold red", "ok": "green"}.get(text["level"])
        headline = escape(text["headline"])
        console.print(f"[{style}]{headline}[/{style}]" if style else headline, highlight=False)
        for line in text["details"]:
            console.print(f"  {line}", highlight=False, markup=False)
        return
    short = noise["summary"]
    style = {"fail": "bold red", "noisy": "yellow", "shared": "yellow", "pass": "green"}.get(short["status"])
    line = escape(short["line"])
    console.print(f"[{style}]{line}[/{style}]" if style else line, highlight=False)
    if short["status"] in ("fail", "shared"):
        if short["why"]:
            console.print(f"  Why: {'; '.join(short['why'])}.", highlight=False, markup=False)
        if short["advice"]:
            console.print(f"  What to do: {short['advice']}.", highlight=False, markup=False)
        console.print(f"  Details: `rbl report --explain {run_dir}`, or the noise floor section of report.html.",
                      highlight=False, markup=False)


def unmeasured(cells: list, metrics: list[str]) -> set[tuple[str, str]]:
    """(scenario id, metric) of cells that do not measure the metric: an open-loop scenario (`load`)
    none of Table 2's, a closed-loop one none of the overload metrics, or rows without it at all.
    The table says 'not measured' there, not '-' (a metric undefined in this cell's rounds)."""
    found = set()
    for cell in cells:
        rows = [row for rows in cell.rounds.values() for row in rows]
        for metric in metrics:
            other_loop = (metric in OPEN_LOOP_COLUMNS) != is_open_loop(cell.scenario)
            if rows and ((other_loop and all(row.get(metric) is None for row in rows))
                         or not any(metric in row for row in rows)):
                found.add((cell.scenario["id"], metric))
    return found


def print_table(records: list[dict], metrics: list[str], console: Console,
                not_measured: set[tuple[str, str]] = frozenset()) -> None:
    open_loop = any(is_open_loop(r) for r in records)      # the load column only where there is one
    conditions = {"fault %": lambda r: f"{r['faultRate']:g}", "users": lambda r: str(r["users"]),
                  **({"load": lambda r: r.get("load", "closed loop")} if open_loop else {}),
                  **({"target": lambda r: r.get("target", "")} if any("target" in r for r in records) else {})}
    # a condition every row shares is said once, in the title, not repeated in a column of its own
    shared = {name: value(records[0]) for name, value in conditions.items()
              if len(records) > 1 and len({value(r) for r in records}) == 1}
    varying = [name for name in conditions if name not in shared]
    columns = [*(NumberColumn(name, "left" if name in ("load", "target") else "right") for name in varying),
               *(NumberColumn(METRIC_TITLES.get(m, m)) for m in metrics), NumberColumn("status", "left")]
    rows = []
    for r in records:
        cells = [escape(conditions[name](r)) for name in varying]
        for metric in metrics:
            median, low, high = r[f"{metric}.median"], r[f"{metric}.ci95Low"], r[f"{metric}.ci95High"]
            text = ("not measured" if (r["scenarioId"], metric) in not_measured else "-") if median is None \
                else f"{median:.4g}"
            if low is not None:            # one word: a narrow column breaks before the interval, not inside it
                text += f" [{low:.4g},{high:.4g}]" + ("*" if r.get("interval") == "rounds-t" else "")
            cells.append(text)
        cells.append(r["status"] if r["status"] == "ok" else f"[red]{escape(r['status'])}[/red]")
        rows.append((r["configuration"], cells))
    title = "median [95% CI] per cell"
    if shared:
        said = {"fault %": lambda v: f"fault {v}%", "users": lambda v: f"{v} user{'' if v == '1' else 's'}",
                "load": lambda v: f"load {v}", "target": lambda v: f"target {v}"}
        title += " (every cell: " + ", ".join(said[name](value) for name, value in shared.items()) + ")"
    if any(r.get("interval") == "rounds-t" for r in records):
        title += " (* 2-3 rounds: t-interval on the round medians)"
    print_keyed_table(console, escape(title), "configuration", columns, rows)


def _manifest(path: Path, console: Console) -> dict:
    """The run's manifest for the report's header; a damaged one is reported and left out."""
    try:
        manifest = json.loads(path.read_bytes().decode("utf-8")) if path.is_file() else {}
    except (OSError, ValueError, RecursionError) as error:
        console.print(f"warning: {path} is not readable ({error}); the report leaves it out", highlight=False)
        return {}
    problem = manifest_problem(manifest) if manifest else None
    if problem:
        console.print(f"warning: {path} is damaged ({problem}); the report leaves it out", highlight=False)
        return {}
    return manifest


def _default_metrics(run_dir: Path) -> list[str]:
    """The paper's two, and for a plan with mesh clients what their sidecars refused and retried; for
    an open-loop run (per-request records), the overload metrics, with the paper's only when some
    scenario is closed-loop, and with controllers or adaptive limits (controllers.jsonl) the adaptive
    papers' refused and timed-out shares and windowed RT50/RT95; for a run along a topology's chain,
    the CPU it wasted too."""
    chain = ["chainWastedCpuSeconds"] if (run_dir / HOPS).is_file() else []
    if (run_dir / REQUESTS).is_dir():
        adaptive = ADAPTIVE_DEFAULT_METRICS if (run_dir / CONTROLLERS).is_file() else ()
        return [*(DEFAULT_METRICS if _has_closed_loop(run_dir) else ()), *OPEN_LOOP_DEFAULT_METRICS, *adaptive,
                *chain]
    try:
        clients = json.loads((run_dir / "plan.json").read_text(encoding="utf-8")).get("clients", [])
        mesh = any(isinstance(c, dict) and client_kind(c) is ClientKind.MESH for c in clients)
    except (OSError, ValueError, AttributeError, RecursionError):
        mesh = False                     # the plan's own checks report a damaged plan later
    return [*DEFAULT_METRICS, *(MESH_DEFAULT_METRICS if mesh else ()), *chain]


def _has_closed_loop(run_dir: Path) -> bool:
    """Whether a scenario of the run has no `load` (closed loop); a damaged plan reads as closed loop
    (its checks report it later)."""
    from ..store.results import RunDirectory
    try:
        return any("load" not in scenario for scenario in RunDirectory(run_dir).scenarios())
    except (UsageError, OSError, ValueError, RecursionError):
        return True
