"""Do cells that behave alike differ more than their own rounds vary? A one-way analysis of
variance of the A/A cells' round medians (rbl/report/aa_groups.py), on a log scale so that
differences are relative and cells of different sizes pool.

Why it is needed beside the pairwise A/A check (rbl/report/noise.py): with 2 or 3 rounds each
cell's own t-interval is so wide (t with 1 degree of freedom is 12.7) that no pair ever differs
significantly, so the pairwise check cannot fail however noisy the run was. Pooling the
round-to-round variance over every A/A cell gives it many degrees of freedom. When the run's
conditions change between cells (drift, or other work on the machine; in the sequential order
every round of a cell runs back to back, so a change lands on some cells only), cells that
behave alike drift apart by more than their rounds vary, and the ratio of the two variances
(an F statistic) shows it even with 2 rounds."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .aa_groups import AAGroup
from .stats import round_medians

# The test fails below this p-value: 1 run in 100 of a machine whose conditions hold still.
ALPHA = 0.01


@dataclass(frozen=True)
class CellEffects:
    metric: str
    between: float              # mean square between alike cells (log scale, per round)
    within: float               # pooled variance of a cell's round medians around its mean (log scale)
    df_between: int
    df_within: int
    cells: int

    @property
    def ratio(self) -> float:
        """F: how many times more alike cells differ than their rounds vary (about 1 when they do not)."""
        return self.between / self.within if self.within > 0 else math.inf

    @property
    def p_value(self) -> float:
        return f_survival(self.ratio, self.df_between, self.df_within)

    @property
    def significant(self) -> bool:
        return self.p_value < ALPHA

    @property
    def round_spread(self) -> float:
        """The typical round-to-round spread of a cell's median, a fraction (the pooled standard
        deviation on the log scale, turned back into a ratio)."""
        return math.expm1(math.sqrt(self.within))


def alike_sets(groups: list[AAGroup]) -> list[list[str]]:
    """A/A groups that share a cell (a baseline in the group of each library) joined: cells that
    each behave like a third behave like each other. Every cell lands in one set."""
    sets: list[set[str]] = []
    for group in groups:
        joined = set(group.scenario_ids)
        for overlapping in [s for s in sets if s & joined]:
            sets.remove(overlapping)
            joined |= overlapping
        sets.append(joined)
    return [sorted(s) for s in sets]


def log_round_medians(cell, metric: str) -> np.ndarray | None:
    """The natural log of each round's median; None when a round has no positive value (a metric
    at 0, or undefined for the cell), since a log scale cannot hold it."""
    medians = round_medians([[row.get(metric) for row in rows] for _, rows in sorted(cell.rounds.items())])
    if not medians or min(medians) <= 0:
        return None
    return np.log(medians)


def cell_effects(groups: list[AAGroup], cells_by_id: dict, metric: str) -> CellEffects | None:
    """The analysis over every set of alike cells, None when it has nothing to compare (no set with
    two cells, or no cell with two rounds)."""
    ss_between = ss_within = 0.0
    df_between = df_within = used = 0
    for ids in alike_sets(groups):
        series = [log_round_medians(cells_by_id[i], metric) for i in ids
                  if i in cells_by_id and not cells_by_id[i].failed_rounds]
        series = [s for s in series if s is not None]
        if len(series) < 2:
            continue
        means = np.array([s.mean() for s in series])
        counts = np.array([len(s) for s in series])
        grand = float((means * counts).sum() / counts.sum())
        ss_between += float((counts * (means - grand) ** 2).sum())
        ss_within += float(sum(((s - s.mean()) ** 2).sum() for s in series))
        df_between += len(series) - 1
        df_within += int((counts - 1).sum())
        used += len(series)
    if df_between == 0 or df_within == 0:
        return None
    return CellEffects(metric, ss_between / df_between, ss_within / df_within, df_between, df_within, used)


def f_survival(f: float, df1: int, df2: int) -> float:
    """P(F > f) for Fisher's F with (df1, df2) degrees of freedom."""
    from .stats import regularized_beta
    if math.isinf(f):
        return 0.0
    if f <= 0:
        return 1.0
    return regularized_beta(df2 / (df2 + df1 * f), df2 / 2, df1 / 2)
