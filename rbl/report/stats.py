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


# ---- Intervals that stay honest with few rounds -------------------------------------------------
# With 2 or 3 rounds the bootstrap over rounds sees 2 or 3 values and cannot estimate how much a
# round's conditions move the median: its intervals come out too narrow. A t-interval on the round
# medians treats each round as one observation and widens with few rounds as it should (t with
# 1 degree of freedom is 12.7). The report uses it where a cell has few rounds (docs/reports.md,
# "The noise floor"); the A/A check in rbl/report/noise.py is how it was chosen.
FEW_ROUNDS = 3                          # cells with at most this many rounds are marked
INTERVAL_METHODS = ("auto", "bootstrap", "rounds-t")


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with df (> 0, not necessarily whole) degrees of freedom."""
    if p <= 0 or p >= 1 or df <= 0:
        raise ValueError("t_quantile: 0 < p < 1 and df > 0")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    low, high = 0.0, 1.0
    while _t_cdf(high, df) < p:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if _t_cdf(middle, df) < p else (low, middle)
    return (low + high) / 2


def _t_cdf(t: float, df: float) -> float:
    x = df / (df + t * t)
    tail = 0.5 * regularized_beta(x, df / 2, 0.5)
    return 1 - tail if t >= 0 else tail


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b) by its continued fraction (Lentz), switching sides where it converges slowly."""
    import math
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1 - regularized_beta(1 - x, b, a)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny, c, d = 1e-300, 1.0, 0.0
    result = 1.0
    for i in range(400):
        m = i // 2
        if i == 0:
            numerator = 1.0
        elif i % 2 == 0:
            numerator = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        else:
            numerator = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1 + numerator * d
        d = tiny if abs(d) < tiny else d
        d = 1 / d
        c = 1 + numerator / c
        c = tiny if abs(c) < tiny else c
        result *= c * d
        if abs(1 - c * d) < 1e-14:
            break
    return front * (result - 1)


def round_medians(groups: list[list[float]]) -> list[float]:
    clean = [[v for v in g if v is not None] for g in groups]
    return [float(np.median(g)) for g in clean if g]


def rounds_t_estimate(groups: list[list[float]], confidence: float = CONFIDENCE) -> Estimate:
    """The pooled median with a t-interval from the spread of the round medians: median +- t(k-1) *
    sd / sqrt(k) over k rounds, cut at 0 for a metric that cannot be negative. No interval from
    fewer than 2 rounds or 6 observations."""
    values = [v for g in groups for v in g if v is not None]
    medians = round_medians(groups)
    if not values:
        return Estimate(None, None, None, 0, 0)
    median = float(np.median(values))
    k = len(medians)
    if len(values) < MIN_OBSERVATIONS or k < MIN_ROUNDS:
        return Estimate(median, None, None, len(values), k)
    half = t_quantile(1 - (1 - confidence) / 2, k - 1) * float(np.std(medians, ddof=1)) / k ** 0.5
    floor = 0.0 if min(values) >= 0 else -np.inf      # times and counts: a median below 0 is impossible
    return Estimate(median, max(median - half, floor), median + half, len(values), k)


def rounds_t_difference(groups_a: list[list[float]], groups_b: list[list[float]],
                        confidence: float = CONFIDENCE) -> Difference:
    """median(B) - median(A) with Welch's t-interval on the two cells' round medians."""
    a, b = rounds_t_estimate(groups_a, confidence), rounds_t_estimate(groups_b, confidence)
    if a.median is None or b.median is None:
        return Difference(a, b, None, None, None)
    if a.low is None or b.low is None:
        return Difference(a, b, b.median - a.median, None, None)
    ma, mb = round_medians(groups_a), round_medians(groups_b)
    va, vb = float(np.var(ma, ddof=1)) / len(ma), float(np.var(mb, ddof=1)) / len(mb)
    se = (va + vb) ** 0.5
    shift = b.median - a.median
    if se == 0:
        return Difference(a, b, shift, shift, shift)
    df = (va + vb) ** 2 / ((va ** 2 / (len(ma) - 1) if va else 0) + (vb ** 2 / (len(mb) - 1) if vb else 0))
    half = t_quantile(1 - (1 - confidence) / 2, df) * se
    return Difference(a, b, shift, shift - half, shift + half)


def interval_method(method: str, rounds: int) -> str:
    """The method a cell's interval uses: `auto` takes the t-interval on round medians for cells
    with at most FEW_ROUNDS rounds, the bootstrap for more."""
    if method == "auto":
        return "rounds-t" if rounds <= FEW_ROUNDS else "bootstrap"
    return method
