"""The report's figures of an open-loop run, from its per-request records (rbl/store/requests.py):

- response classes over scheduled time (mean per 1-s bin over a scenario's measured rounds, stacked:
  success, failed, circuit broken, timed out, rejected), the warm-up shaded; a panel per scenario,
  rows = configurations, columns = conditions (load, fault rate, users);
- the CDF of response time (log x), of successful requests above and of all requests below (a
  refusal answers fast), a panel per condition, a line per configuration;
- p50, p95 and p99 of successful response time per window (load.window) over scheduled time;
- overload metrics (carried throughput, p99 of successes, share of windows under the SLO) against
  the axis that varies (the offered load, else the fault rate, else a client parameter; log-scaled
  where its values are spaced by factors), a line per configuration (per client when a client
  parameter is on x): medians over rounds, min-max bars. With one fault rate, the report draws no
  other figure of these metrics (rbl/report/build.py);
- the trade-off: carried throughput against the p99 of successes, the Pareto front marked
  (rbl/report/tradeoff_figure.py).

Only rounds the report counts are drawn (not warm-up or failed rounds). A run without a requests
directory (closed loop) gets none of these."""

from __future__ import annotations

import statistics
from functools import partial
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from ..plan_records import LOAD_KEY
from ..store.open_metrics import (class_time_series, open_loop_metrics, response_cdf, success_cdf,
                                  windowed_percentiles)
from ..store.requests import REQUESTS, RESPONSE_CLASSES, read_requests
from .cells import Cell
from .chart.model import Chart, Ticks
from .figures import MARKERS, PALETTE, figure_entry, figure_facts, write_figure
from .tradeoff_figure import tradeoff_figure
from .labels import METRIC_TITLES, Labeller, load_of, load_text, number as _number

CLASS_COLOURS = {"success": "#228833", "failed": "#EE6677", "circuit_broken": "#AA3377", "timed_out": "#CCBB44",
                 "rejected": "#BBBBBB"}
CLASS_NAMES = {"success": "success", "failed": "failed", "circuit_broken": "circuit broken", "timed_out": "timed out",
               "rejected": "rejected"}
FIGURE_METRICS = ("carriedThroughput", "successP99Ms", "p95UnderSloShare")
TRADEOFF = ("carriedThroughput", "successP99Ms")      # the trade-off figure's x (better high) and y (better low)
COLUMNS_PER_FIGURE = 3            # conditions per figure (legible at 1280 px); more make several figures
BIN_S = 1.0


def _rate_of(scenario: dict, where: str, unit: str) -> float | None:
    """The load's rate (`rate`) or its profile's peak (`peak`), in % of capacity or req/s."""
    load = load_of(scenario)
    rate = load.get("rate") if where == "rate" else (load.get("profile") or {}).get("peak") \
        if isinstance(load.get("profile"), dict) else None
    value = _number(rate.get(unit)) if isinstance(rate, dict) else None
    return value * 100 if value is not None and unit == "share" else value


# the x axes figure (c) may use, in order of preference: (title, value of a scenario)
LOAD_AXES = (
    ("offered load (% of capacity)", lambda s: _rate_of(s, "rate", "share")),
    ("offered load (req/s)", lambda s: _rate_of(s, "rate", "rps")),
    ("peak load (% of capacity)", lambda s: _rate_of(s, "peak", "share")),
    ("peak load (req/s)", lambda s: _rate_of(s, "peak", "rps")),
    ("users (load = users)", lambda s: _number(load_of(s).get("users"))),
    ("mean think time (ms)", lambda s: _number(load_of(s).get("think_ms"))),
    ("target CPU budget (cores)", lambda s: _number((s.get("target") or {}).get("cpus"))),
    ("fault rate (%)", lambda s: _number(s["fault"]["rate"])),
)


def x_axis(cells: list[Cell]) -> tuple[str, object, str | None]:
    """(title, value function, client parameter or None): the first axis that varies over `cells`."""
    for title, value in LOAD_AXES:
        if len({value(c.scenario) for c in cells} - {None}) > 1:
            return title, value, None
    parameters = dict.fromkeys(p for c in cells for p in c.scenario.get("config", {}))
    for parameter in parameters:
        values = {c.scenario["config"].get(parameter) for c in cells}
        if len(values - {None}) > 1 and all(_number(v) is not None for v in values - {None}):
            return parameter, lambda s, p=parameter: _number(s.get("config", {}).get(p)), parameter
    return LOAD_AXES[-1][0], LOAD_AXES[-1][1], None


def condition(scenario: dict, varying: set[str]) -> str:
    """What a scenario's client ran under, as far as it varies in the run."""
    parts = []
    if LOAD_KEY in varying:
        parts.append(load_text(scenario) or "closed loop")
    if "fault" in varying:
        parts.append(f"fault {scenario['fault']['rate']:g}%")
    if "users" in varying:
        parts.append(f"{scenario['users']} users")
    target = scenario.get("target") or {}
    if "target.path" in varying:
        parts.append(f"on {target.get('path')}")
    if "target.cpus" in varying:
        parts.append(f"{target.get('cpus'):g} CPU")
    return ", ".join(parts)


def varying_conditions(cells: list[Cell]) -> set[str]:
    found = {"load": {load_text(c.scenario) for c in cells}, "fault": {c.fault_rate for c in cells},
             "users": {c.users for c in cells},
             "target.path": {(c.scenario.get("target") or {}).get("path") for c in cells},
             "target.cpus": {(c.scenario.get("target") or {}).get("cpus") for c in cells}}
    return {name for name, values in found.items() if len(values) > 1}


def overload_section(run_dir: Path, header: dict, cells: list[Cell], out_dir: Path) -> tuple[list[dict], list[Path]]:
    """The figures (for report.html: title and SVG in base64) and their files; none without requests/.
    Drawn here, one after the other (the report makes overload_plans itself, beside its other figures)."""
    figures, files = [], []
    for make in overload_plans(run_dir, header, cells):
        title, stem, figure = make()
        paths = write_figure(figure, out_dir, stem)
        files += paths
        figures.append(figure_entry(title, paths[0], figure_facts(figure)))
    return figures, files


def overload_plans(run_dir: Path, header: dict, cells: list[Cell]) -> list[Callable[[], tuple[str, str, Chart]]]:
    """Each figure's plan: a callable that builds it, (title, stem, figure), from the request
    tables read here; none without requests/."""
    if not (run_dir / REQUESTS).is_dir():
        return []
    counted = {c.scenario["id"]: c for c in cells if c.rounds}
    table = read_requests(run_dir, list(counted))
    if table.num_rows:
        keys = pc.binary_join_element_wise(table.column("scenario"), pc.cast(table.column("round"), pa.string()), ":")
        wanted = [f"{sid}:{r}" for sid, cell in counted.items() for r in cell.rounds]
        table = table.filter(pc.is_in(keys, pa.array(wanted, pa.string())))
    present = set(pc.unique(table.column("scenario")).to_pylist())
    drawn = [c for c in cells if c.scenario["id"] in counted and c.scenario["id"] in present]
    if not drawn:
        return []
    labeller = Labeller(header)
    per_cell = {c.scenario["id"]: table.filter(pc.equal(table.column("scenario"), c.scenario["id"])) for c in drawn}
    varying = varying_conditions(drawn)
    args = (header, drawn, per_cell, labeller, varying)
    return [*class_figure_plans(*args),
            *cdf_figure_plans(*args),
            *percentile_figure_plans(*args),
            lambda: metrics_figure(*args),
            partial(_tradeoff, *args)]


def _tradeoff(header: dict, cells: list[Cell], per_cell: dict, labeller: Labeller, varying: set[str]):
    """The trade-off figure's points: per condition, each configuration's medians over its rounds."""
    rows, columns = _grid(cells, labeller, varying)
    panels: dict[str, list[tuple[str, float, float]]] = {column: [] for column in columns}
    for cell in cells:
        table = per_cell[cell.scenario["id"]]
        xs, ys = round_values(cell, table, TRADEOFF[0]), round_values(cell, table, TRADEOFF[1])
        if xs and ys:
            panels[condition(cell.scenario, varying)].append((labeller.label(cell.scenario), statistics.median(xs),
                                                              statistics.median(ys)))
    return tradeoff_figure(header["name"], rows, panels)


def _grid(cells: list[Cell], labeller: Labeller, varying: set[str]) -> tuple[list[str], list[str]]:
    rows = list(dict.fromkeys(labeller.label(c.scenario) for c in cells))
    columns = list(dict.fromkeys(condition(c.scenario, varying) for c in cells))
    return rows, columns


def _condition_groups(columns: list[str]) -> list[list[str]]:
    """The conditions cut into figures of at most COLUMNS_PER_FIGURE each."""
    return [columns[i:i + COLUMNS_PER_FIGURE] for i in range(0, len(columns), COLUMNS_PER_FIGURE)]


def _warmup_s(cell: Cell, table: pa.Table) -> float | None:
    declared = _number(load_of(cell.scenario).get("warmup_s"))
    if declared is not None:
        return declared
    measured = table.filter(pc.invert(pc.fill_null(table.column("warmup"), False)))
    if measured.num_rows == table.num_rows:
        return None
    return pc.min(measured.column("scheduled_s")).as_py() if measured.num_rows else \
        pc.max(table.column("scheduled_s")).as_py()


def class_figures(header: dict, cells: list[Cell], per_cell: dict, labeller: Labeller, varying: set[str]):
    """(title, stem, figure) for each group of up to COLUMNS_PER_FIGURE conditions."""
    for make in class_figure_plans(header, cells, per_cell, labeller, varying):
        yield make()


def class_figure_plans(header: dict, cells: list[Cell], per_cell: dict, labeller: Labeller,
                       varying: set[str]) -> list[Callable[[], tuple[str, str, Chart]]]:
    """A plan per group of up to COLUMNS_PER_FIGURE conditions (each builds its figure)."""
    rows, columns = _grid(cells, labeller, varying)
    groups = _condition_groups(columns)
    return [partial(_class_figure, header, cells, per_cell, labeller, varying, rows, group, number, len(groups))
            for number, group in enumerate(groups, 1)]


def _class_figure(header: dict, cells: list[Cell], per_cell: dict, labeller: Labeller, varying: set[str],
                  rows: list[str], group: list[str], number: int, groups: int) -> tuple[str, str, Chart]:
    """Group `number` of `groups`: a panel per scenario, rows = configurations, columns = its conditions."""
    part = f" ({number} of {groups})" if groups > 1 else ""
    figure = Chart(3.6 * len(group) + 1.5, 2.3 * len(rows) + 1.0,
                   title=f"{header['name']}: response classes per {BIN_S:g}-s bin of scheduled time{part}")
    grid = figure.grid(len(rows), len(group), sharex=True)
    for cell in cells:
        column = condition(cell.scenario, varying)
        if column not in group:
            continue
        ax = grid[rows.index(labeller.label(cell.scenario))][group.index(column)]
        table = per_cell[cell.scenario["id"]]
        series = class_time_series(table, BIN_S)
        series = series + [{**series[-1], "t": series[-1]["t"] + BIN_S}] if series else series   # close the last bin
        ax.stack([s["t"] for s in series], [([s[name] / BIN_S for s in series], CLASS_COLOURS[name], CLASS_NAMES[name])
                                            for name in RESPONSE_CLASSES]).step = True
        warmup = _warmup_s(cell, table)
        if warmup:          # over the stack: it is not measured
            ax.span(0, warmup, fill="#ffffff", opacity=0.45, hatch="#555555", front=True,
                    label="warm-up (not measured)")
        rounds = len(cell.rounds)
        ax.title = f"{labeller.label(cell.scenario)}\n{column}" if column else labeller.label(cell.scenario)
        ax.note(0.98, 0.97, f"mean of {rounds} round{'s' if rounds != 1 else ''}", anchor="end")
    for row in grid:
        for ax in row:
            ax.visible = ax.has_data()
        row[0].ylabel = "requests per s"
    for ax in grid[-1]:
        ax.xlabel = "scheduled send time (s)"
    figure.add_legend("top", columns=6)
    stem = "overload-classes" + (f"-{number}" if groups > 1 else "")
    return (f"Response classes over time, mean per {BIN_S:g}-s bin over the counted rounds{part}", stem, figure)


def _styles(labels: list[str]) -> dict[str, tuple[str, str]]:
    return {label: (PALETTE[i % len(PALETTE)], MARKERS[i % len(MARKERS)]) for i, label in enumerate(labels)}


def cdf_figure_plans(header: dict, cells: list[Cell], per_cell: dict, labeller: Labeller,
                     varying: set[str]) -> list[Callable[[], tuple[str, str, Chart]]]:
    """A plan per group of up to COLUMNS_PER_FIGURE conditions (each builds its CDF figure)."""
    _, columns = _grid(cells, labeller, varying)
    groups = _condition_groups(columns)
    return [partial(_cdf_figure, header, cells, per_cell, labeller, varying, group, number, len(groups))
            for number, group in enumerate(groups, 1)]


def cdf_figure(header: dict, cells: list[Cell], per_cell: dict, labeller: Labeller, varying: set[str]) -> Chart:
    """The first CDF figure (every condition, when there are at most COLUMNS_PER_FIGURE of them)."""
    return cdf_figure_plans(header, cells, per_cell, labeller, varying)[0]()[2]


CDF_ROWS = (("share of successful requests", success_cdf),
            ("share of all requests\n(any class; unanswered never reach)", response_cdf))


def _cdf_figure(header: dict, cells: list[Cell], per_cell: dict, labeller: Labeller, varying: set[str],
                group: list[str], number: int, groups: int) -> tuple[str, str, Chart]:
    """Top row: successful requests' response time; bottom row: every request's (a refusal answers
    fast, so a policy that refuses looks fast among successes and shows its refusals here)."""
    rows, _ = _grid(cells, labeller, varying)
    styles = _styles(rows)
    part = f" ({number} of {groups})" if groups > 1 else ""
    legend_w = max((len(label) for label in rows), default=0) * 0.075 + 0.6
    figure = Chart(3.4 * len(group) + legend_w + 0.4, 5.6,
                   title=f"{header['name']}: response time CDF, successful and all requests{part}")
    grid = figure.grid(len(CDF_ROWS), len(group), sharex=True, sharey=True)
    for cell in cells:
        column = condition(cell.scenario, varying)
        if column not in group:
            continue
        label = labeller.label(cell.scenario)
        for row, (_, cdf) in enumerate(CDF_ROWS):
            ax = grid[row][group.index(column)]
            times, probabilities = cdf(per_cell[cell.scenario["id"]])
            if times:
                ax.line([max(t, 1e-3) for t in times], probabilities, styles[label][0], label=label, width=1.4,
                        step=True)
            if row == 0:
                ax.title = column or "all scenarios"
    for row, (ylabel, _) in enumerate(CDF_ROWS):
        for ax in grid[row]:
            ax.xscale = "log"
        grid[row][0].ylabel = ylabel
    for ax in grid[-1]:
        ax.xlabel = "response time from scheduled send (ms, log)"
    figure.add_legend("right")
    stem = "overload-cdf" + (f"-{number}" if groups > 1 else "")
    return (f"Response time CDF: successful requests, and all requests (measured requests of the counted "
            f"rounds){part}", stem, figure)


PERCENTILES = ((0.5, "p50", "-"), (0.95, "p95", "--"), (0.99, "p99", ":"))


def percentile_figure_plans(header: dict, cells: list[Cell], per_cell: dict, labeller: Labeller,
                            varying: set[str]) -> list[Callable[[], tuple[str, str, Chart]]]:
    rows, columns = _grid(cells, labeller, varying)
    groups = _condition_groups(columns)
    return [partial(_percentile_figure, header, cells, per_cell, labeller, varying, rows, group, number, len(groups))
            for number, group in enumerate(groups, 1)]


def _percentile_figure(header: dict, cells: list[Cell], per_cell: dict, labeller: Labeller, varying: set[str],
                       rows: list[str], group: list[str], number: int, groups: int) -> tuple[str, str, Chart]:
    """RT50/95/99 of successes per window of the load (load.window, 5 s by default) over scheduled
    time: a panel per scenario, rows = configurations, columns = conditions; one y scale (log)."""
    styles = _styles(rows)
    part = f" ({number} of {groups})" if groups > 1 else ""
    figure = Chart(max(3.6 * len(group) + 1.5, 7.0), 2.2 * len(rows) + 1.0,
                   title=f"{header['name']}: p50, p95 and p99 of successes per window{part}")
    grid = figure.grid(len(rows), len(group), sharex=True, sharey=True)
    for cell in cells:
        column = condition(cell.scenario, varying)
        if column not in group:
            continue
        label = labeller.label(cell.scenario)
        ax = grid[rows.index(label)][group.index(column)]
        table = per_cell[cell.scenario["id"]]
        window_s = _number(load_of(cell.scenario).get("window_s")) or 5.0
        series = windowed_percentiles(table, window_s)
        for quantile, name, style in PERCENTILES:
            points = [(w["t"], w[quantile]) for w in series if w[quantile] is not None]
            if points:          # a step per window, held to the window's end
                xs = [t for t, _ in points] + [points[-1][0] + window_s]
                ys = [max(v, 1e-3) for _, v in points] + [max(points[-1][1], 1e-3)]
                ax.line(xs, ys, styles[label][0], dash=style, width=1.4, label=name, step=True)
        warmup = _warmup_s(cell, table)
        if warmup:
            ax.span(0, warmup, fill="#eeeeee", hatch="#999999", label="warm-up (not measured)")
        ax.title = f"{label}\n{column}" if column else label
        ax.yscale = "log"
    for row in grid:
        for ax in row:
            ax.visible = ax.has_data()
        row[0].ylabel = "successful response (ms, log)"
    for ax in grid[-1]:
        ax.xlabel = "scheduled send time (s)"
    # the line styles are the percentiles, the same in every panel (a panel's colour is its configuration)
    figure.add_legend("top", columns=4, entries=[
        *[(name, {"line": "#333333", "colour": "#333333", "dash": style}) for _, name, style in PERCENTILES],
        ("warm-up (not measured)", {"patch": "#eeeeee", "hatch": "#999999"})])
    stem = "overload-percentiles" + (f"-{number}" if groups > 1 else "")
    return (f"Response time percentiles over time: p50, p95 and p99 of successes per window (the counted rounds "
            f"pooled){part}", stem, figure)


def geometric(values: list[float]) -> bool:
    """Whether swept values are spaced by factors (1, 20, 1024) rather than steps: all positive, a
    range of 10x or more, and at most 8 of them (each gets its own tick)."""
    return 2 <= len(values) <= 8 and values[0] > 0 and values[-1] / values[0] >= 10


def round_values(cell: Cell, table: pa.Table, metric: str) -> list[float]:
    """The metric of each counted round: the row's value (the runner computes it), or, for a row
    without it, computed from the round's requests with the scenario's load settings."""
    load = load_of(cell.scenario)
    values = []
    for round_number, rows in sorted(cell.rounds.items()):
        row = rows[0]
        if metric in row:
            value = row[metric]
        else:
            requests = table.filter(pc.equal(table.column("round"), round_number))
            duration, warmup = _number(load.get("duration_s")), _number(load.get("warmup_s")) or 0.0
            value = open_loop_metrics(requests, window_s=_number(load.get("window_s")) or 5.0,
                                      slo_ms=_number(load.get("slo_ms")) or 100.0,
                                      measured_s=duration - warmup if duration else None,
                                      start_s=warmup if duration else None)[metric] if requests.num_rows else None
        if _number(value) is not None:
            values.append(float(value))
    return values


def metrics_figure(header: dict, cells: list[Cell], per_cell: dict, labeller: Labeller, varying: set[str]):
    title, value_of, parameter = x_axis(cells)
    on_x = {"fault rate (%)": "fault", "target CPU budget (cores)": "target.cpus"}.get(
        title, "load" if parameter is None else None)
    rest = varying - {on_x} if on_x else varying

    def line_of(cell: Cell) -> str:
        if parameter is None:
            name = labeller.label(cell.scenario)
        else:
            others = {k: v for k, v in cell.scenario.get("config", {}).items() if k != parameter and
                      len({c.scenario.get("config", {}).get(k) for c in cells}) > 1}
            name = " ".join([cell.client, *(f"{k}={v}" for k, v in others.items())])
        where = condition(cell.scenario, rest)
        return f"{name}, {where}" if where else name

    lines: dict[str, list[Cell]] = {}
    for cell in cells:
        lines.setdefault(line_of(cell), []).append(cell)
    styles = _styles(list(lines))
    swept = sorted({x for x in map(value_of, (c.scenario for c in cells)) if x is not None})
    log_x = geometric(swept)
    legend_w = max((len(name) for name in lines), default=0) * 0.075 + 0.6
    figure = Chart(3.4 * len(FIGURE_METRICS) + legend_w, 3.6,
                   title=f"{header['name']}: overload metrics against {title}, median and range over rounds")
    (panels,) = figure.grid(1, len(FIGURE_METRICS))
    for ax, metric in zip(panels, FIGURE_METRICS):
        for name, line_cells in lines.items():
            points = []
            for cell in line_cells:
                x, values = value_of(cell.scenario), round_values(cell, per_cell[cell.scenario["id"]], metric)
                if x is not None and values:
                    points.append((x, statistics.median(values), min(values), max(values)))
            if not points:
                continue
            points.sort()
            colour, marker = styles[name]
            ax.errorbars([p[0] for p in points], [p[1] for p in points], [p[2] for p in points],
                         [p[3] for p in points], colour, marker=marker, size=5, label=name)
        ax.xlabel = f"{title} (log)" if log_x else title
        ax.ylabel = METRIC_TITLES.get(metric, metric)
        if log_x:
            ax.xscale = "log"
            ax.xticks = Ticks(swept)
        if metric == "successP99Ms":
            ax.yscale = "log"
    figure.add_legend("right")
    return (f"Overload metrics against {title} (median and range over the counted rounds)", "overload-metrics", figure)
