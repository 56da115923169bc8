"""The answer to the spec's question: per condition the plan compares (a fault level, user count or
load, target point), which configuration to deploy under the objective (the spec's, or the kind of
round's default), by how much it beats the runner-up with its interval, and whether that clears the
noise floor; or that the run cannot tell yet, and about how many more rounds would.

Every configuration of a condition competes, whatever its pattern or library (no pattern at all
included: the baseline may be the answer). A configuration is eligible when the medians of its
bounded metrics are within the objective's bounds, and it has rounds and no failed ones."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from ..metric_directions import DEFAULT_OBJECTIVES, bound_text, direction, value_text
from ..plan_records import is_open_loop
from .cells import METRIC_TITLES, Cell
from .findings import EFFECT, UNCHECKED, Finding, Group, group_of
from .noise import NoiseCheck, compare
from .stats import interval_method

MAX_ROUNDS_SAID = 100       # beyond this, "more rounds" is no practical advice: the two are about equal
POWER = 2.0                 # ((1.96 + 0.84) / 1.96)^2: rounds for an 80% chance, not a coin flip, at 5% error


def objective_of(header: dict) -> dict:
    """The plan's objective record, or the kind of round's default (rbl/metric_directions.py)."""
    if isinstance(header.get("objective"), dict):
        return header["objective"]
    metric = DEFAULT_OBJECTIVES["open" if is_open_loop(header) else "closed"]
    return {"metric": metric, "direction": direction(metric), "bounds": [], "default": True}


def objective_metrics(header: dict) -> list[str]:
    """The metrics the recommendation needs estimates of: the objective's and its bounds'."""
    objective = objective_of(header)
    return list(dict.fromkeys([objective["metric"], *(b["metric"] for b in objective["bounds"])]))


@dataclass
class Recommendation:
    group: Group                    # the condition (its pattern field is not used: every pattern competes)
    objective: dict
    ranked: list[Cell]              # eligible cells, best first
    excluded: list[tuple[Cell, str]] = field(default_factory=list)   # (cell, why it is not eligible)
    finding: Finding | None = None  # leader against runner-up, when there are two
    more_rounds: int | None = None  # rounds per cell that would likely resolve it (None: more will not help)

    @property
    def leader(self) -> Cell | None:
        return self.ranked[0] if self.ranked else None

    @property
    def status(self) -> str:
        """deploy | deploy unchecked | only eligible | cannot tell | none eligible"""
        if not self.ranked:
            return "none eligible"
        if self.finding is None:
            return "only eligible"
        if self.finding.status == EFFECT:
            return "deploy"
        if self.finding.status == UNCHECKED:
            return "deploy unchecked"
        return "cannot tell"


def recommend(header: dict, cells: list[Cell], check: NoiseCheck, method: str = "auto", resamples: int = 2000,
              seed: int = 0) -> list[Recommendation]:
    """One recommendation per condition with two or more configurations, in plan order."""
    objective = objective_of(header)
    metric = objective["metric"]
    groups: dict[str, list[Cell]] = {}
    for cell in cells:
        groups.setdefault(_condition_key(cell), []).append(cell)
    found = []
    for members in groups.values():
        if len(members) < 2:
            continue
        ranked, excluded = [], []
        for cell in members:
            why = _ineligible(cell, objective)
            if why:
                excluded.append((cell, why))
            else:
                ranked.append(cell)
        better_high = objective["direction"] == "higher"
        ranked.sort(key=lambda c: c.estimates[metric].median, reverse=better_high)   # stable: plan order on ties
        recommendation = Recommendation(group_of(members[0]), objective, ranked, excluded)
        if len(ranked) >= 2:
            recommendation.finding = _leader_against_runner_up(ranked[0], ranked[1], metric, check, method,
                                                               resamples, seed, len(ranked), len(members))
            recommendation.more_rounds = rounds_to_resolve(recommendation.finding)
        found.append(recommendation)
    return found


def _condition_key(cell: Cell) -> str:
    s = cell.scenario
    return json.dumps([s["fault"], s["users"], s.get("load"), s.get("target"), s.get("successes"),
                       s.get("max_requests")], sort_keys=True)


def _ineligible(cell: Cell, objective: dict) -> str | None:
    if not cell.rounds:
        return "no data"
    if cell.failed_rounds:
        return "failed rounds"
    if cell.estimates[objective["metric"]].median is None:
        return f"{_name(objective['metric'])} not measured"
    for bound in objective["bounds"]:
        median = cell.estimates[bound["metric"]].median
        if median is None:
            return f"{_name(bound['metric'])} not measured"
        if (median > bound["limit"]) if bound["op"] == "<=" else (median < bound["limit"]):
            titles = {bound["metric"]: _name(bound["metric"])}
            return f"outside the bound ({bound_text(bound, titles)}; median {value_text(bound['metric'], median)})"
    return None


def _name(metric: str) -> str:
    """A metric's label without its unit, which the value beside it carries: `p99 of successful response time`."""
    return METRIC_TITLES.get(metric, metric).replace(" (ms)", "")


def _leader_against_runner_up(leader: Cell, runner_up: Cell, metric: str, check: NoiseCheck, method: str,
                              resamples: int, seed: int, eligible: int, members: int) -> Finding:
    chosen = interval_method(method, min(len(leader.rounds), len(runner_up.rounds)))
    series = lambda cell: [[row.get(metric) for row in rows] for _, rows in sorted(cell.rounds.items())]  # noqa: E731
    result = compare(series(leader), series(runner_up), chosen, resamples, seed)
    floor = check.metrics[metric].floor if metric in check.metrics else None
    alike = _connected(check, leader.scenario["id"], runner_up.scenario["id"])
    identical = (leader.library, leader.pattern, json.dumps(leader.scenario.get("config", {}), sort_keys=True)) == \
        (runner_up.library, runner_up.pattern, json.dumps(runner_up.scenario.get("config", {}), sort_keys=True))
    return Finding(metric, group_of(leader), leader, runner_up, eligible, members - eligible, result, chosen, floor,
                   alike, identical)


def _connected(check: NoiseCheck, one: str, other: str) -> bool:
    """Whether two cells behave alike through the A/A groups: in one, or linked by cells two groups
    share (each library's configurations are alike with the baseline without faults, so two
    libraries' are alike through it)."""
    reached, frontier = {one}, [one]
    groups = [set(group.scenario_ids) for group in check.grouping.groups]
    while frontier:
        current = frontier.pop()
        for group in groups:
            if current in group:
                for member in group - reached:
                    reached.add(member)
                    frontier.append(member)
    return other in reached


def rounds_to_resolve(finding: Finding) -> int | None:
    """Rounds per cell that would likely resolve the comparison: both the interval's half-width and
    the noise floor narrow about as 1/sqrt(rounds) (the floor is the spread of alike cells' medians,
    measured here), so from their sizes now against the difference measured now, with a factor of 2
    for power (about 80% of runs resolve it, if the difference is what this run measured). 3 with
    too few rounds for any interval; None when more rounds would not tell them apart (the two cannot
    differ, or they measured the same)."""
    rounds = min(len(finding.best.rounds), len(finding.worst.rounds))
    if finding.status in (EFFECT, UNCHECKED):
        return 0
    if finding.reason in ("alike", "identical"):
        return None
    if finding.reason == "no interval":
        return max(3, rounds + 1)
    result, relative = finding.result, finding.relative
    if result.low is None or not result.difference or not relative:
        return None
    shrink = ((result.high - result.low) / 2 / abs(result.difference)) ** 2
    if finding.floor is not None:
        shrink = max(shrink, (finding.floor / relative) ** 2)
    return max(math.ceil(rounds * shrink * POWER), rounds + 1)      # the view says "more than 100" past it
