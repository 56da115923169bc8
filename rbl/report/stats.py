"""Medians with 95% confidence intervals from a two-level bootstrap: rounds are resampled with
replacement, then the virtual users within each chosen round, because users of one round share
the same conditions (the proxy's fault sequence, the machine's load) and are not independent."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
MIN_OBSERVATIONS = 6          # fewer values than this give no interval worth drawing
MIN_ROUNDS = 2                # one round says nothing about round-to-round variation


@dataclass(frozen=True)
class Estimate:
    median: float | None
    low: float | None           # None: no interval (too few observations or rounds)
    high: float | None
    n: int                      # observations (virtual users x rounds) with a value
    rounds: int


def hierarchical_bootstrap(groups: list[list[float]], resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap distribution of the pooled median: groups (rounds) with replacement, then values
    within each chosen group with replacement."""
    sizes = {len(g) for g in groups}
    if len(sizes) == 1:                       # the usual case (every round has the same users): vectorised
        values = np.asarray(groups, dtype=float)                       # rounds x users
        rounds, users = values.shape
        chosen = rng.integers(0, rounds, size=(resamples, rounds, 1))
        picks = rng.integers(0, users, size=(resamples, rounds, users))
        return np.median(values[chosen, picks].reshape(resamples, -1), axis=1)
    medians = np.empty(resamples)
    arrays = [np.asarray(g, dtype=float) for g in groups]
    for b in range(resamples):
        chosen = rng.integers(0, len(arrays), size=len(arrays))
        pooled = np.concatenate([arrays[i][rng.integers(0, len(arrays[i]), size=len(arrays[i]))] for i in chosen])
        medians[b] = np.median(pooled)
    return medians


def estimate(groups: list[list[float]], resamples: int = 2000, seed: int = 0) -> Estimate:
    """Median and percentile interval of the values in `groups` (one list per round); None values
    are left out (a metric that is undefined for that user, e.g. error time without errors)."""
    groups = [[v for v in g if v is not None] for g in groups]
    groups = [g for g in groups if g]
    values = [v for g in groups for v in g]
    if not values:
        return Estimate(None, None, None, 0, 0)
    median = float(np.median(values))
    if len(values) < MIN_OBSERVATIONS or len(groups) < MIN_ROUNDS:
        return Estimate(median, None, None, len(values), len(groups))
    distribution = hierarchical_bootstrap(groups, resamples, np.random.default_rng(seed))
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(distribution, [tail, 100 - tail])
    return Estimate(median, float(low), float(high), len(values), len(groups))


@dataclass(frozen=True)
class Difference:
    """median(B) - median(A) with a bootstrap interval; None where either side has too little data."""
    a: Estimate
    b: Estimate
    difference: float | None
    low: float | None
    high: float | None

    @property
    def significant(self) -> bool:
        """The interval excludes 0."""
        return self.low is not None and (self.low > 0 or self.high < 0)


def difference(groups_a: list[list[float]], groups_b: list[list[float]], resamples: int = 2000, seed: int = 0,
               confidence: float = CONFIDENCE) -> Difference:
    """The difference of the pooled medians of two independent runs, each resampled as `estimate`
    does (rounds, then users within them), with independent random streams for the two sides."""
    a, b = estimate(groups_a, resamples, seed), estimate(groups_b, resamples, seed)
    if a.median is None or b.median is None:
        return Difference(a, b, None, None, None)
    if a.low is None or b.low is None:          # too few observations or rounds on one side
        return Difference(a, b, b.median - a.median, None, None)
    clean = lambda groups: [g for g in ([v for v in g if v is not None] for g in groups) if g]
    streams = np.random.default_rng(seed).spawn(2)
    spread = (hierarchical_bootstrap(clean(groups_b), resamples, streams[1])
              - hierarchical_bootstrap(clean(groups_a), resamples, streams[0]))
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(spread, [tail, 100 - tail])
    return Difference(a, b, b.median - a.median, float(low), float(high))
