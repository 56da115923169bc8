"""Running until the answer is resolved (`rbl run --until-resolved`): after every scenario's first
rounds, the report's recommendation is worked out from the rows so far, and the cells it still
cannot tell apart get one more round each, until every answer more rounds could settle is settled
or the most rounds allowed are run (rbl/report/recommendation.py's next_rounds is the rule)."""

from __future__ import annotations

from dataclasses import dataclass

from ..report.cells import load_cells
from ..report.noise import noise_check
from ..report.recommendation import objective_metrics, recommend
from ..report.stopping_rule import next_rounds
from ..store.results import RunDirectory

RESAMPLES = 1000            # the report's 2000 halves the noise of an interval's ends; a look needs less
DEFAULT_FIRST_ROUNDS = 3    # fewer give no interval to stop on


@dataclass(frozen=True)
class Step:
    runs: list[tuple[dict, int]]     # (scenario, round) to run next; none: stop
    reason: str                      # why it stops (empty while it goes on)


def until_resolved_header(header: dict, max_rounds: int) -> dict:
    """The plan run until resolved: its spec's rounds first (at least 3), then up to `max_rounds`."""
    first = max(header["rounds"], DEFAULT_FIRST_ROUNDS)
    if max_rounds < first:
        from ..errors import UsageError
        raise UsageError(f"--max-rounds {max_rounds} is fewer than the {first} rounds every scenario runs first",
                         hint=f"give --max-rounds {first} or more")
    return {**header, "rounds": max_rounds, "runs": header["size"] * max_rounds, "until_resolved": {"rounds": first}}


def step(run: RunDirectory, header: dict) -> Step:
    """The next rounds from the rows stored so far."""
    _, cells = load_cells(run.path, objective_metrics(header), RESAMPLES)
    check = noise_check(header, cells, objective_metrics(header), "auto", RESAMPLES)
    decided = next_rounds(recommend(header, cells, check, "auto", RESAMPLES), cells, check, header["rounds"])
    warmup = header.get("warmup", 0)
    runs = [(cell.scenario, max([*cell.rounds, warmup]) + 1) for cell in decided.cells]
    return Step(runs, decided.reason)
