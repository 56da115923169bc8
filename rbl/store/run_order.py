"""The order a run's (scenario, round) pairs are executed in (docs/running.md, Experiment design).

- sequential: Algorithm 1's order, every round of a scenario before the next scenario (the paper's);
- blocked: round 1 of every scenario, then round 2 of every scenario, ...: slow drift of the
  machine (another process, heat, a JIT warming up) reaches every scenario alike;
- randomized: every round of every scenario shuffled with a seed, so drift is not confounded with
  the fault rate or the configuration that Algorithm 1 walks through in sequence.

Round numbers always count a scenario's rounds in the order they run (its first round to run is
round 1), so warm-up rounds (the first `warmup` of each scenario) are the first ones to run in
every order. The shuffle is a Fisher-Yates shuffle driven by SHA-256 of the seed and a counter,
not by a library's generator, so a seed gives the same order on any Python and any machine, and
`rbl run --resume` continues the very order the run started with.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from ..errors import UsageError

ORDERS = ("sequential", "randomized", "blocked")
SHUFFLE = "fisher-yates-sha256-v1"      # recorded with the seed: what the seed means
MAX_RANDOMIZED_RUNS = 5_000_000         # a shuffle holds every run's scenario index in memory
SEED_LIMIT = 2**63


@dataclass(frozen=True)
class RunOrder:
    kind: str = "sequential"
    seed: int | None = None             # randomized only

    def record(self) -> dict:
        """What the manifest keeps, so a resumed run (and a reader) knows the order."""
        if self.kind != "randomized":
            return {"kind": self.kind}
        return {"kind": self.kind, "seed": self.seed, "shuffle": SHUFFLE}

    def describe(self) -> str:
        return f"randomized (seed {self.seed})" if self.kind == "randomized" else self.kind


def choose_order(header: dict, kind: str | None = None, seed: int | None = None) -> RunOrder:
    """A new run's order: --order / --order-seed over the plan's `order`, a fresh seed if none."""
    planned = header.get("order") or {}
    kind = kind or planned.get("kind", "sequential")
    if kind not in ORDERS:
        raise UsageError(f"--order must be one of {', '.join(ORDERS)}, got {kind!r}")
    if kind != "randomized":
        if seed is not None:
            raise UsageError("--order-seed applies to a randomized order",
                             hint="add --order randomized, or leave out --order-seed")
        return RunOrder(kind)
    if seed is None:
        seed = planned.get("seed")
    if seed is None:
        seed = random.randrange(2**32)
    if not 0 <= seed < SEED_LIMIT:
        raise UsageError(f"--order-seed must be in 0..2^63-1, got {seed}")
    return RunOrder(kind, seed)


def recorded_order(record: object) -> RunOrder | None:
    """The order a manifest recorded, or None when it has none (or one rbl cannot read)."""
    if not isinstance(record, dict) or record.get("kind") not in ORDERS:
        return None
    if record["kind"] != "randomized":
        return RunOrder(record["kind"])
    seed = record.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < SEED_LIMIT \
            or record.get("shuffle", SHUFFLE) != SHUFFLE:
        return None
    return RunOrder("randomized", seed)


def rounds_per_scenario(header: dict) -> int:
    """Warm-up rounds plus measured rounds: how many rounds each scenario runs for sure. A plan run
    until its answer is resolved (`until_resolved`) runs its first rounds here, and more only where
    the answer needs them (rbl/runner/until_resolved.py), up to its `rounds`."""
    adaptive = header.get("until_resolved")
    return (adaptive["rounds"] if isinstance(adaptive, dict) else header["rounds"]) + header.get("warmup", 0)


def check_order_fits(order: RunOrder, header: dict) -> None:
    """A randomized order holds one index per run in memory: refuse plans too large for that."""
    runs = header["size"] * rounds_per_scenario(header)
    if order.kind == "randomized" and runs > MAX_RANDOMIZED_RUNS:
        raise UsageError(f"a randomized order of {runs} runs is more than rbl shuffles ({MAX_RANDOMIZED_RUNS})",
                         hint="use `order = blocked` (every scenario sees the same drift, in constant memory)")


def ordered_runs(order: RunOrder, scenarios: Callable[[], Iterable[dict]], rounds: int) -> Iterator[tuple[dict, int]]:
    """(scenario, round) pairs in run order. `scenarios` gives the plan's scenarios afresh on each
    call (blocked reads them once per round instead of holding them)."""
    if order.kind == "sequential":
        for scenario in scenarios():
            for round_number in range(1, rounds + 1):
                yield scenario, round_number
    elif order.kind == "blocked":
        for round_number in range(1, rounds + 1):
            for scenario in scenarios():
                yield scenario, round_number
    else:
        listed = list(scenarios())
        done = [0] * len(listed)
        for index in shuffled_runs(len(listed), rounds, order.seed):
            done[index] += 1
            yield listed[index], done[index]


def shuffled_runs(scenarios: int, rounds: int, seed: int) -> list[int]:
    """Each scenario index `rounds` times, in the seed's Fisher-Yates order."""
    runs = [index for index in range(scenarios) for _ in range(rounds)]
    draw = _Draws(seed)
    for i in range(len(runs) - 1, 0, -1):
        j = draw.below(i + 1)
        runs[i], runs[j] = runs[j], runs[i]
    return runs


class _Draws:
    """Uniform integers from SHA-256(seed, counter): the same on every platform and version."""

    def __init__(self, seed: int):
        self.prefix = b"rbl-order\0" + str(seed).encode() + b"\0"
        self.counter = 0

    def _word(self) -> int:
        self.counter += 1
        return int.from_bytes(hashlib.sha256(self.prefix + str(self.counter).encode()).digest()[:8], "big")

    def below(self, n: int) -> int:
        """Uniform in 0..n-1, by rejection (no modulo bias)."""
        limit = (1 << 64) - (1 << 64) % n
        while True:
            word = self._word()
            if word < limit:
                return word % n
