"""The A/A check: the run's noise floor, measured on cells that cannot differ in behaviour
(rbl/report/aa_groups.py). Each pair of such cells is compared with the report's own interval
method; a significant difference between them means the intervals understate the run's variance.
The floor is the smallest difference between cells this run can resolve."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .other_work import SHARED_MACHINE_CORES, run_other_work
from .aa_groups import AAGroup, Grouping, aa_groups
from .cell_effects import CellEffects, cell_effects
from .stats import CONFIDENCE, Difference, difference, interval_method, rounds_t_difference

# With n A/A pairs, honest 95% intervals still call about 5% of them significant. The check fails when
# more are than a 5% rate gives in 99 runs of 100 (a binomial tail), not at the first one: the
# Resilience4j example has 42 pairs per metric, and 2 significant ones is what honest intervals give.
EXCESS_TAIL = 0.01
# A floor at or above this (a fraction of the median) leaves the run unable to tell cells apart by
# less than half their value: the verdict says the run is too noisy even where the intervals hold.
TOO_NOISY = 0.5


def allowed_significant(pairs: int, rate: float = 1 - CONFIDENCE, tail: float = EXCESS_TAIL) -> int:
    """The most significant A/A pairs out of `pairs` that a false-positive `rate` explains: the
    smallest k with P(X > k) <= tail for X ~ Binomial(pairs, rate)."""
    from math import comb
    cumulative = 0.0
    for k in range(pairs + 1):
        cumulative += comb(pairs, k) * rate ** k * (1 - rate) ** (pairs - k)
        if 1 - cumulative <= tail:
            return k
    return pairs


@dataclass(frozen=True)
class AAPair:
    group: AAGroup
    a: str                              # scenario ids
    b: str
    method: str                         # the interval method the pair was compared with
    result: Difference

    @property
    def scale(self) -> float | None:
        """The pair's typical value (the mean of the two medians), what relative sizes refer to."""
        a, b = self.result.a.median, self.result.b.median
        return None if a is None or b is None or a + b <= 0 else (a + b) / 2

    @property
    def significant(self) -> bool:
        return self.result.significant

    @property
    def relative(self) -> float | None:
        """|median(B) - median(A)| as a fraction of the scale."""
        return None if self.scale is None or self.result.difference is None else abs(self.result.difference) / self.scale

    @property
    def resolvable(self) -> float | None:
        """Half the difference interval's width as a fraction of the scale: a difference between two
        such cells smaller than this cannot be told from 0."""
        if self.scale is None or self.result.low is None:
            return None
        return (self.result.high - self.result.low) / 2 / self.scale


@dataclass
class MetricFloor:
    metric: str
    pairs: list[AAPair] = field(default_factory=list)
    cell_effects: CellEffects | None = None     # alike cells against their own rounds (all sets pooled)

    @property
    def judged(self) -> list[AAPair]:
        """Pairs with an interval (cells with too few rounds or observations have none)."""
        return [p for p in self.pairs if p.resolvable is not None]

    @property
    def significant(self) -> list[AAPair]:
        return [p for p in self.judged if p.significant]

    @property
    def excess(self) -> bool:
        """More significant A/A pairs than a 5% false-positive rate explains."""
        return len(self.significant) > allowed_significant(len(self.judged))

    @property
    def drifted(self) -> bool:
        """Alike cells differ more than their own rounds vary: conditions changed between cells."""
        return self.cell_effects is not None and self.cell_effects.significant

    @property
    def failed(self) -> bool:
        return self.excess or self.drifted

    @property
    def resolvable(self) -> float | None:
        """The median over the pairs of the resolvable difference (a fraction)."""
        values = [p.resolvable for p in self.judged]
        return float(np.median(values)) if values else None

    @property
    def largest(self) -> AAPair | None:
        """The A/A pair whose medians differ most (relative to their scale)."""
        judged = self.judged
        return max(judged, key=lambda p: p.relative) if judged else None

    @property
    def floor(self) -> float | None:
        """The noise floor, a fraction: the resolvable difference while the intervals hold; when
        they do not (too many significant A/A pairs, or alike cells apart by more than their rounds
        vary), the larger of it and the largest difference seen between cells that behave alike,
        since the intervals understate the noise."""
        if self.resolvable is None:
            return None
        return max(self.resolvable, self.largest.relative) if self.failed else self.resolvable

    @property
    def floor_absolute(self) -> float | None:
        """The floor in the metric's unit, at the median scale of the pairs."""
        if self.floor is None:
            return None
        return self.floor * float(np.median([p.scale for p in self.judged]))


@dataclass
class NoiseCheck:
    grouping: Grouping
    method: str                         # the method asked for (auto, bootstrap, rounds-t)
    metrics: dict[str, MetricFloor]
    few_rounds: int                     # cells in A/A groups with few rounds (<= FEW_ROUNDS)
    order: str = "sequential"           # the run order (rbl/store/run_order.py), for the verdict's why
    other_work: dict | None = None      # the CPU other work took while the rounds ran (run_other_work)

    @property
    def shared_machine(self) -> bool:
        return self.other_work is not None and self.other_work["otherCores"] >= SHARED_MACHINE_CORES

    @property
    def cells_passed(self) -> bool:
        """No metric has more significant A/A pairs than a 5% false-positive rate explains, nor alike
        cells further apart than their rounds vary."""
        return not any(m.failed for m in self.metrics.values())

    @property
    def measurable(self) -> bool:
        return any(m.judged for m in self.metrics.values())

    @property
    def passed(self) -> bool:
        """The cells pass (cells_passed) and the run had its machine to itself (True with nothing to
        judge: see `measurable`)."""
        return self.cells_passed and not self.shared_machine

    @property
    def too_noisy(self) -> bool:
        return self.floor is not None and self.floor >= TOO_NOISY

    @property
    def floor(self) -> float | None:
        """The largest floor over the metrics (a fraction), None when no pair could be judged."""
        floors = [m.floor for m in self.metrics.values() if m.floor is not None]
        return max(floors) if floors else None

    @property
    def worst_metric(self) -> MetricFloor | None:
        measured = [m for m in self.metrics.values() if m.floor is not None]
        return max(measured, key=lambda m: m.floor) if measured else None


def compare(groups_a: list[list[float]], groups_b: list[list[float]], method: str, resamples: int,
            seed: int) -> Difference:
    if method == "rounds-t":
        return rounds_t_difference(groups_a, groups_b)
    return difference(groups_a, groups_b, resamples, seed)


def run_order_kind(header: dict, manifest: dict | None) -> str:
    """The order the run went in: the manifest's record (--order may override the plan), else the plan's."""
    from ..store.run_order import recorded_order
    recorded = recorded_order(manifest.get("order")) if manifest else None
    return recorded.kind if recorded else (header.get("order") or {}).get("kind", "sequential")


def noise_check(header: dict, cells: list, metrics: list[str], method: str = "auto", resamples: int = 2000,
                seed: int = 0, manifest: dict | None = None) -> NoiseCheck:
    """Compare every pair of every A/A group of the run's cells (rbl/report/cells.py's Cell) on each
    metric, with `method` chosen per pair by the fewer rounds of its two cells, and every set of
    alike cells against their own rounds (rbl/report/cell_effects.py). The run's manifest says how
    it went: its order and the other work beside it."""
    from .stats import FEW_ROUNDS
    by_id = {cell.scenario["id"]: cell for cell in cells}
    grouping = aa_groups(header, [cell.scenario for cell in cells])
    floors = {metric: MetricFloor(metric) for metric in metrics}
    seen, few = set(), set()
    for group in grouping.groups:
        for a, b in group.pairs:
            if (a, b) in seen or a not in by_id or b not in by_id:
                continue                  # a pair shared by two groups (the baseline with itself) counts once
            seen.add((a, b))
            cell_a, cell_b = by_id[a], by_id[b]
            if cell_a.failed_rounds or cell_b.failed_rounds:
                continue
            rounds = min(len(cell_a.rounds), len(cell_b.rounds))
            few.update(c.scenario["id"] for c in (cell_a, cell_b) if 1 < len(c.rounds) <= FEW_ROUNDS)
            chosen = interval_method(method, rounds)
            for metric in metrics:
                series = lambda cell: [[row.get(metric) for row in rows] for _, rows in sorted(cell.rounds.items())]
                floors[metric].pairs.append(AAPair(group, a, b, chosen,
                                                   compare(series(cell_a), series(cell_b), chosen, resamples, seed)))
    for metric in metrics:
        floors[metric].cell_effects = cell_effects(grouping.groups, by_id, metric)
    return NoiseCheck(grouping, method, floors, len(few), run_order_kind(header, manifest), run_other_work(manifest))
