"""Shards: one plan spread over machines (docs/backends.md, Running on a cluster).

`rbl run PLAN --shard I/N` runs shard I (0 <= I < N, as Kubernetes numbers an Indexed Job's
completions) of the plan: whole scenarios, every round of each, assigned so that the shards'
estimated durations are close (longest first, each to the shard with the least work so far; ties
go to the lower index and the earlier scenario). The assignment depends only on the plan, never on
the machine, so N machines that each compute it agree without talking to each other.

A shard's run directory is a normal run directory holding the whole plan; its manifest records
the shard and the plan's digest, and the runner executes only the shard's scenarios. `rbl merge`
(merge.py) checks the digests and joins the shards into one run directory.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from ..errors import UsageError

BALANCE = "longest-first-v1"      # recorded: what produced the assignment
MAX_SHARDS = 10_000
ROUND_OVERHEAD_S = 0.12           # per round: fault set, users started, results stored
REFERENCE_REQUEST_MS = 1.6        # one request, one user; a fixed reference so every machine agrees
REFERENCE_CPUS = 4                # users beyond this queue for the cores, in the reference machine
_SHARD = re.compile(r"\s*(\d{1,9})\s*/\s*(\d{1,9})\s*")
# not part of what a plan means: where the spec was read from, and how scenarios are stored
_DIGEST_IGNORES = ("scenarios", "scenarios_file")


@dataclass(frozen=True)
class Shard:
    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def record(self, plan_sha256: str, scenarios: int, runs: int, estimated_s: float) -> dict:
        return {"index": self.index, "count": self.count, "plan_sha256": plan_sha256, "balance": BALANCE,
                "scenarios": scenarios, "runs": runs, "estimated_seconds": round(estimated_s, 1)}


def parse_shard(text: str) -> Shard:
    """`I/N` with 0 <= I < N; a clear error otherwise."""
    match = _SHARD.fullmatch(text or "")
    if not match:
        raise UsageError(f"--shard expects I/N (for example 0/3), got {text!r}",
                         hint="N is the number of shards, I the shard to run, from 0 to N-1")
    index, count = int(match.group(1)), int(match.group(2))
    if not 1 <= count <= MAX_SHARDS:
        raise UsageError(f"--shard {text}: the number of shards must be 1 to {MAX_SHARDS}")
    if index >= count:
        raise UsageError(f"--shard {text}: shards are numbered 0 to {count - 1}",
                         hint=f"the last of {count} shards is {count - 1}/{count}")
    return Shard(index, count)


def plan_digest(header: dict, scenarios: Iterable[dict]) -> str:
    """SHA-256 of what the plan means: its header (without where the spec was read from) and its
    scenarios, each as canonical JSON. Two shards agree on it exactly when they split one plan."""
    digest = hashlib.sha256()
    meaning = {k: v for k, v in header.items() if k not in _DIGEST_IGNORES}
    meaning["source"] = {k: v for k, v in (header.get("source") or {}).items() if k != "path"}
    digest.update(_canonical(meaning) + b"\n")
    for scenario in scenarios:
        digest.update(_canonical(scenario) + b"\n")
    return digest.hexdigest()


def _canonical(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def scenario_seconds(scenario: dict, rounds: int) -> float:
    """A machine-independent estimate of one scenario's duration, all rounds: the estimate of
    `rbl plan` (rbl/estimate.py) on a fixed reference machine, or a simpler request count when
    that model cannot say."""
    try:
        from ..estimate import user_seconds
        seconds = user_seconds(scenario, REFERENCE_REQUEST_MS * _queueing(scenario["users"]) /
                               _local_queueing(scenario["users"]))
    except (ImportError, KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError):
        seconds = _requests(scenario) * REFERENCE_REQUEST_MS * _queueing(scenario["users"]) / 1000.0
    # to the millisecond: the reference figure is computed through this machine's core count, and
    # the last bits of a float must not decide which shard a scenario joins
    return round(rounds * (ROUND_OVERHEAD_S + seconds), 3)


def _queueing(users: int) -> float:
    return max(1.0, users / REFERENCE_CPUS)


def _local_queueing(users: int) -> float:
    """What rbl/estimate.py multiplies by on this machine, divided out again above so the
    reference machine's figure is used everywhere."""
    import os
    return max(1.0, users / (os.cpu_count() or 1))


def _requests(scenario: dict) -> float:
    rate = min(max(float(scenario["fault"]["rate"]) / 100.0, 0.0), 0.99)
    if scenario["fault"]["kind"] == "delay":
        rate = 0.0
    return min(scenario["max_requests"], scenario["successes"] / (1.0 - rate))


def assign(scenarios: Iterable[dict], count: int, rounds: int) -> tuple[list[int], list[float]]:
    """Each scenario's shard (in plan order) and each shard's estimated seconds."""
    weights = [scenario_seconds(s, rounds) for s in scenarios]
    order = sorted(range(len(weights)), key=lambda i: (-weights[i], i))
    loads = [0.0] * count
    shard_of = [0] * len(weights)
    for position in order:
        lightest = min(range(count), key=lambda k: (loads[k], k))
        shard_of[position] = lightest
        loads[lightest] += weights[position]
    return shard_of, loads


@dataclass
class Selection:
    """The scenarios of one shard, and what the manifest records about it."""

    shard: Shard
    ids: frozenset[str]
    record: dict

    def restrict(self, scenarios: Callable[..., Iterator[dict]]) -> Callable[..., Iterator[dict]]:
        """A run directory's `scenarios` that yields only this shard's."""
        ids = self.ids

        def shard_scenarios(*args, **kwargs) -> Iterator[dict]:
            return (s for s in scenarios(*args, **kwargs) if s["id"] in ids)
        return shard_scenarios


def select(shard: Shard, header: dict, scenarios: Callable[[], Iterable[dict]], rounds_per_scenario: int) -> Selection:
    """Shard `shard` of the plan whose scenarios `scenarios()` yields (read twice: digest, assignment)."""
    digest = plan_digest(header, scenarios())
    listed = list(scenarios())
    shard_of, loads = assign(listed, shard.count, rounds_per_scenario)
    ids = frozenset(s["id"] for s, k in zip(listed, shard_of) if k == shard.index)
    if not ids:
        raise UsageError(f"shard {shard} has no scenarios: the plan has only {len(listed)}",
                         hint=f"use at most {len(listed)} shards")
    record = shard.record(digest, len(ids), len(ids) * rounds_per_scenario, loads[shard.index])
    return Selection(shard, ids, record)


def recorded_shard(manifest: dict) -> Shard | None:
    """The shard a run directory's manifest records, if any (checked: a manifest is input)."""
    shard = manifest.get("shard")
    if not isinstance(shard, dict):
        return None
    index, count = shard.get("index"), shard.get("count")
    if not all(type(v) is int for v in (index, count)) or not 0 <= index < count <= MAX_SHARDS:
        raise UsageError(f"the manifest's shard {shard!r} is not valid",
                         hint="start the shard again in a new run directory")
    return Shard(index, count)


def check_fits(shard: Shard, header: dict) -> None:
    """Before a run directory exists: every one of N shards gets a scenario when N <= size."""
    if shard.count > header["size"]:
        raise UsageError(f"--shard {shard}: the plan has {header['size']} scenarios, fewer than {shard.count} shards",
                         hint=f"use at most {header['size']} shards (a shard runs whole scenarios)")


def apply(run, header: dict, shard: Shard | None, rounds_per_scenario: int) -> Selection | None:
    """Make `run` (a RunDirectory) run only `shard`'s scenarios, and record the shard in its
    manifest; a resumed shard must still split the plan its manifest names."""
    if shard is None:
        return None
    selection = select(shard, header, run.scenarios, rounds_per_scenario)
    manifest = run.read_manifest()
    recorded = manifest.get("shard")
    if isinstance(recorded, dict) and recorded.get("plan_sha256") not in (None, selection.record["plan_sha256"]):
        raise UsageError(f"{run.path} is shard {shard} of another plan than the one it holds now",
                         hint="the run directory was edited; start the shard again in a new run directory")
    manifest["shard"] = selection.record
    run.write_manifest(manifest)
    run.scenarios = selection.restrict(run.scenarios)
    return selection


EXACT_LIMIT = 200_000             # scenarios `rbl plan` assigns one by one; beyond, it assumes a balanced split


@dataclass(frozen=True)
class ClusterEstimate:
    """How a plan splits over `shards` pods, `parallelism` of them at once: the longest shard's
    share of the plan's work, and the share of it the Job's wall time is (shards waiting for a
    slot add theirs)."""
    shards: int
    parallelism: int
    longest_share: float
    wall_share: float
    exact: bool                   # False: too many scenarios to assign here, a balanced split assumed


def cluster_estimate(scenarios: Iterable[dict], size: int, count: int, parallelism: int | None,
                     rounds: int) -> ClusterEstimate:
    """What `rbl run --backend kubernetes --shards COUNT --parallelism P` does with the plan's work:
    the same assignment the shards compute (assign), then shards started in index order, each on
    the first slot free (as an Indexed Job starts its completions), and the last to end."""
    slots = min(parallelism or count, count)
    if size <= EXACT_LIMIT:
        _, loads = assign(scenarios, count, rounds)
        exact = True
    else:
        loads, exact = [1.0] * count, False
    total = sum(loads) or 1.0
    free = [0.0] * slots
    for load in loads:
        earliest = min(range(slots), key=lambda k: (free[k], k))
        free[earliest] += load
    return ClusterEstimate(count, slots, max(loads) / total, max(free) / total, exact)
