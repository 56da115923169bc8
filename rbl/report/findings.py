"""What a run found: in each group of cells the plan compares (a fault level x user count x pattern
family), the best and the worst configuration on each metric, their difference with its interval,
and whether that difference clears the run's noise floor (rbl/report/noise.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..metric_directions import direction
from .cells import Cell
from .labels import Labeller
from .noise import NoiseCheck, compare
from .stats import Difference, interval_method

EFFECT, UNCHECKED, UNRESOLVED = "effect", "unchecked", "unresolved"


@dataclass(frozen=True)
class Group:
    """Cells a reader compares with each other: one fault, one user count (or load), one target,
    one pattern family."""
    fault: dict
    users: int
    pattern: str
    successes: int | None
    max_requests: int | None
    load: dict | None = None        # an open-loop scenario's load record (a population's too)
    target: dict | None = None      # the scenario's point of a varying target

    def key(self) -> tuple:
        return (json.dumps(self.fault, sort_keys=True), self.users, self.pattern, self.successes, self.max_requests,
                json.dumps(self.load, sort_keys=True), json.dumps(self.target, sort_keys=True))


@dataclass(frozen=True)
class Finding:
    metric: str
    group: Group
    best: Cell                      # the better end (the lower median where direction is none)
    worst: Cell
    configurations: int             # how many were compared (cells with data)
    left_out: int                   # cells of the group left out: failed rounds or no data
    result: Difference              # median(worst) - median(best), the report's interval method
    method: str                     # that interval's method (rbl/report/stats.py)
    floor: float | None             # the metric's noise floor (a fraction), None when not measured
    alike: bool                     # the cells cannot differ in behaviour (an A/A group): any difference is noise
    identical: bool = False         # every cell of the group is the same library, pattern and configuration

    @property
    def ratio(self) -> float | None:
        """The larger median over the smaller one (>= 1)."""
        a, b = self.result.a.median, self.result.b.median
        if a is None or b is None or min(a, b) <= 0:
            return None
        return max(a, b) / min(a, b)

    @property
    def ratio_interval(self) -> tuple[float, float] | None:
        """The difference's interval as a ratio: divided by the smaller median (so the ratio's
        interval excludes 1 exactly when the difference's excludes 0); cut at 0."""
        r = self.result
        if r.low is None or self.ratio is None:
            return None
        smaller, sign = (r.a.median, 1) if r.a.median <= r.b.median else (r.b.median, -1)
        ends = sorted(max(0.0, 1 + sign * bound / smaller) for bound in (r.low, r.high))
        return ends[0], ends[1]

    @property
    def relative(self) -> float | None:
        """|difference| as a fraction of the two medians' mean: the scale the noise floor is in
        (rbl/report/noise.py's AAPair.relative)."""
        a, b, d = self.result.a.median, self.result.b.median, self.result.difference
        if d is None or a + b <= 0:
            return None
        return abs(d) / ((a + b) / 2)

    @property
    def status(self) -> str:
        """effect: the interval excludes no difference and the difference clears the noise floor;
        unchecked: the interval excludes no difference but the run measured no floor; unresolved:
        anything else (no interval, an interval that holds no difference, within the floor, or
        cells that cannot differ in behaviour)."""
        if self.alike or self.identical or not self.result.significant:
            return UNRESOLVED
        if self.floor is None:
            return UNCHECKED
        return EFFECT if self.relative is not None and self.relative > self.floor else UNRESOLVED

    @property
    def reason(self) -> str:
        """Why an unresolved difference is unresolved (one of: identical, alike, no interval, includes
        none, within the floor); '' for the others."""
        if self.status != UNRESOLVED:
            return ""
        if self.identical:
            return "identical"
        if self.alike:
            return "alike"
        if self.result.low is None:
            return "no interval"
        if not self.result.significant:
            return "includes none"
        return "within the floor"


def group_of(cell: Cell) -> Group:
    s = cell.scenario
    return Group(s["fault"], s["users"], s["pattern"], s.get("successes"), s.get("max_requests"), s.get("load"),
                 s.get("target"))


def _usable(cell: Cell) -> bool:
    """Cells the tables and figures show as measurements: no failed rounds, some data."""
    return bool(cell.rounds) and not cell.failed_rounds


def _series(cell: Cell, metric: str) -> list[list]:
    return [[row.get(metric) for row in rows] for _, rows in sorted(cell.rounds.items())]


def find(header: dict, cells: list[Cell], metrics: list[str], check: NoiseCheck, method: str = "auto",
         resamples: int = 2000, seed: int = 0) -> list[Finding]:
    """A finding per group of two or more configurations and per metric, in plan order. The medians
    are the cells' own (the tables'); the difference and its interval come from the A/A check's
    comparison (rbl/report/noise.py's compare), with the method chosen as there by the fewer rounds."""
    groups: dict[tuple, list[Cell]] = {}
    for cell in cells:
        groups.setdefault(group_of(cell).key(), []).append(cell)
    alike_sets = [set(group.scenario_ids) for group in check.grouping.groups]
    findings = []
    for members in groups.values():
        usable = [c for c in members if _usable(c)]
        if len({_configuration(c) for c in members}) < 2:
            continue                      # one configuration (a lone baseline): nothing to compare
        ids = {c.scenario["id"] for c in usable}
        alike = len(usable) >= 2 and any(ids <= s for s in alike_sets)
        # two clients given the same configuration (`client x.retry as a`, `as b`): one setup measured twice
        identical = len({_behaviour(c) for c in members}) == 1
        for metric in metrics:
            measured = [c for c in usable if c.estimates[metric].median is not None]
            if len(measured) < 2:
                continue
            ordered = sorted(measured, key=lambda c: c.estimates[metric].median)   # stable: plan order on ties
            if ordered[0].estimates[metric].median == ordered[-1].estimates[metric].median == 0:
                continue                  # none of them did it (no retries, no refusals): nothing to rank
            best, worst = (ordered[-1], ordered[0]) if direction(metric) == "higher" else (ordered[0], ordered[-1])
            chosen = interval_method(method, min(len(best.rounds), len(worst.rounds)))
            result = compare(_series(best, metric), _series(worst, metric), chosen, resamples, seed)
            floor = check.metrics[metric].floor if metric in check.metrics else None
            findings.append(Finding(metric, group_of(best), best, worst, len(measured), len(members) - len(measured),
                                    result, chosen, floor, alike, identical))
    return findings


def _configuration(cell: Cell) -> tuple:
    return cell.client, json.dumps(cell.scenario.get("config", {}), sort_keys=True)


def _behaviour(cell: Cell) -> tuple:
    """What decides a cell's behaviour under its group's fault and load: not the client's label."""
    return cell.library, cell.pattern, json.dumps(cell.scenario.get("config", {}), sort_keys=True)


def record(finding: Finding, labeller: Labeller, sentence: str) -> dict:
    """findings.json's record of one finding."""
    r, interval = finding.result, finding.ratio_interval
    return {"metric": finding.metric, "fault": finding.group.fault, "users": finding.group.users,
            **({"load": finding.group.load} if finding.group.load is not None else {}),
            **({"target": finding.group.target} if finding.group.target is not None else {}),
            "pattern": finding.group.pattern, "best": labeller.label(finding.best.scenario),
            "worst": labeller.label(finding.worst.scenario), "bestScenarioId": finding.best.scenario["id"],
            "worstScenarioId": finding.worst.scenario["id"], "configurations": finding.configurations,
            "leftOut": finding.left_out, "medianBest": r.a.median, "medianWorst": r.b.median,
            "difference": r.difference, "ci95Low": r.low, "ci95High": r.high, "interval": finding.method,
            "ratio": finding.ratio, "ratioLow": interval[0] if interval else None,
            "ratioHigh": interval[1] if interval else None, "relative": finding.relative, "floor": finding.floor,
            "alike": finding.alike, "identical": finding.identical, "status": finding.status, "reason": finding.reason, "text": sentence}
