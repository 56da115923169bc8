"""The stopping rule of a run until resolved (rbl/runner/until_resolved.py): from the report's
recommendations so far, which cells get one more round, or why the run stops."""

from __future__ import annotations

from dataclasses import dataclass

from .cells import Cell
from .noise import NoiseCheck
from .recommendation import Recommendation


@dataclass(frozen=True)
class NextRounds:
    """What running until resolved does next: one more round for each of `cells`, or stop (no cells)
    for `reason`: resolved, cannot be resolved by more rounds, or the most rounds allowed."""
    cells: list[Cell]
    reason: str


def next_rounds(recommendations: list[Recommendation], cells: list[Cell], check: NoiseCheck,
                max_rounds: int) -> NextRounds:
    """The stopping rule: a condition whose answer is "cannot tell yet" and that more rounds would
    likely tell gets one more round for its leader and for every eligible cell whose interval on the
    objective still overlaps the leader's; where the noise floor is what holds it back, the cells
    that measure the floor (the A/A groups) get one too. Conditions that are resolved (or that more
    rounds cannot resolve) get none. Stops when no cell needs one, or every one that does has
    `max_rounds`."""
    wanted, capped = [], False

    def extend(cell: Cell) -> None:
        nonlocal capped
        if len(cell.rounds) >= max_rounds:
            capped = True
        elif cell not in wanted:
            wanted.append(cell)
    by_id = {cell.scenario["id"]: cell for cell in cells}
    for rec in recommendations:
        if rec.status != "cannot tell" or rec.more_rounds is None:
            continue
        metric = rec.objective["metric"]
        lead = rec.leader.estimates[metric]
        for cell in rec.ranked:
            estimate = cell.estimates[metric]
            if cell is rec.leader or cell is rec.finding.worst or lead.low is None or estimate.low is None \
                    or (estimate.low <= lead.high and lead.low <= estimate.high):
                extend(cell)
        floor = rec.finding.floor
        if floor is not None and (rec.finding.relative or 0) <= floor:
            for group in check.grouping.groups:
                for scenario_id in group.scenario_ids:
                    if scenario_id in by_id and not by_id[scenario_id].failed_rounds:
                        extend(by_id[scenario_id])
    if wanted:
        return NextRounds(wanted, "")
    if capped:
        return NextRounds([], f"the most rounds allowed ({max_rounds}) were run")
    hopeless = sum(rec.status == "cannot tell" for rec in recommendations)
    return NextRounds([], "resolved" + (f" ({hopeless} condition{'s' if hopeless != 1 else ''} whose configurations "
                                        "more rounds would not tell apart)" if hopeless else ""))
