"""What a round did along a topology (docs/topologies.md): each edge's and each service's counters over
the round, the retry amplification beside its worst case, and the per-edge oracle.

The backend reports cumulative counters (Services.hop_counters); a round's record is their increase,
with what follows from it: requests per entry request at each service (the amplification), the most
the placed retries allow (the worst case: the product of 1 + attempts along each path), the work and
CPU each service spent beyond what the carried entry requests needed (wasted), and, per edge, the
oracles: its sidecar sent no more requests upstream than its calls times (attempts + 1), and refused
calls as over a pool limit only when the caller had calls enough in flight to reach it.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from ..libraries.composition import BASELINE, policies_of
from ..libraries.istio import DEFAULT_ATTEMPTS, placed_policies
from ..plan_records import MESH_SERVICE
from ..topology import Topology
from .oracles import Violation, as_records

EDGE_SEPARATOR = ">"
PEAKS = "peaks"             # the counters' key of each edge's peak of calls in flight since the previous read
SAMPLE_INTERVAL_S = 1.0
# what the series keeps per interval: each service's answers, each edge's refusals and failed calls
SERIES_SERVICE = ("requests", "answeredOk", "answeredFailed")
SERIES_EDGE = ("callsFailed", "sidecarPoolOverflows", "sidecarRetries")


class HopSampler:
    """Reads a topology's counters every `interval_s` during a round, on its own thread (a replica
    under a small CPU budget can take a while to answer; the round does not wait for it), so the
    record can say what each tier answered second by second."""

    def __init__(self, read: Callable[[], dict | None], interval_s: float = SAMPLE_INTERVAL_S):
        self.read = read
        self.interval_s = interval_s
        self.samples: list[tuple[float, dict]] = []
        self.peaks: dict[str, int] = {}          # the highest of the reads during the round, per edge
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, first: dict) -> None:
        self.began = time.monotonic()
        self.samples = [(0.0, first)]
        self.peaks: dict[str, int] = {}
        self._thread = threading.Thread(target=self._run, name="rbl-hop-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            asked = time.monotonic()
            try:
                counters = self.read()
            except Exception:                # a lost service is the round's check to report, not the sampler's
                return
            if counters is not None:
                self.samples.append(((asked + time.monotonic()) / 2 - self.began, counters))
                self.peaks = highest(self.peaks, counters.get(PEAKS) or {})

    def stop(self) -> list[dict]:
        """Stop sampling; the series: per interval, its end (seconds into the round) and what each
        service and edge did in it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)       # a read still waiting on a throttled replica is not waited for
        samples = list(self.samples)
        series = []
        for (_, before), (at, after) in zip(samples, samples[1:]):
            grown = increase(before, after)
            series.append({"t": round(at, 3),
                           "services": {name: {key: counts[key] for key in SERIES_SERVICE}
                                        for name, counts in grown["services"].items()},
                           "edges": {edge: {key: counts.get(key, 0) for key in SERIES_EDGE}
                                     for edge, counts in grown["edges"].items()}})
        return series



def increase(before, after):
    """after - before, number by number, through nested dicts (a key new in `after` counts from 0);
    the peaks are no counters: the later read's are kept."""
    if isinstance(after, dict):
        if isinstance(before, dict) and PEAKS in after:
            return {**{key: increase(before.get(key), value) for key, value in after.items() if key != PEAKS},
                    PEAKS: after[PEAKS]}
        return {key: increase((before or {}).get(key), value) for key, value in after.items()}
    if isinstance(after, (int, float)) and not isinstance(after, bool):
        return after - (before or 0)
    return after


def _waste(counts: dict, useful_requests: int) -> dict:
    """What a service spent on anything but the entry requests that were carried: its work (and CPU)
    beyond their share, the requests the carried ones needed here times its mean cost per request.
    That is work on requests refused or failed later (or earlier), and on retries ("resources wasted")."""
    requests = counts["requests"]
    if not requests:
        return {"wastedWorkSeconds": 0.0, "wastedShare": None, "wastedCpuSeconds": 0.0}
    useful_share = min(1.0, useful_requests / requests)
    return {"wastedWorkSeconds": round(counts["workSeconds"] * (1 - useful_share), 6),
            "wastedShare": round(1 - useful_share, 4),
            "wastedCpuSeconds": round(counts["cpuSeconds"] * (1 - useful_share), 6)}


def percentile(buckets: dict[str, int], q: float, histogram) -> float | None:
    """The q-quantile of a bucketed histogram ({bucket index: count}) as its bucket's upper bound in
    ms (base x growth^k: at most growth - 1 above the true value); None without any count."""
    total = sum(buckets.values())
    if not total or not histogram or None in histogram:
        return None
    base, growth = histogram
    seen = 0
    for bucket in sorted(buckets, key=int):
        seen += buckets[bucket]
        if seen >= q * total:
            return round(base * growth ** int(bucket), 3)
    return None


def chain_columns(record: dict) -> dict:
    """The round's record along the chain as the columns every row of the round carries (CHAIN_COLUMNS),
    so reports and `rbl diff` compare them like any metric."""
    return {"chainAmplification": record["amplification"],
            "chainRefusedCalls": sum(edge.get("sidecarPoolOverflows", 0) for edge in record["edges"]),
            "chainFailedCalls": sum(edge.get("callsFailed", 0) for edge in record["edges"]),
            "chainWastedCpuSeconds": record["wastedCpuSeconds"], "chainCpuSeconds": record["cpuSeconds"]}


def pool_limits(topology: Topology, scenario: dict, client: dict) -> dict[str, int]:
    """The requests-in-flight limit (http2MaxRequests) placed on each service, where it is the pool's
    only limit: a caller's sidecar then refuses only with that many of its calls in flight."""
    if client["service"] != MESH_SERVICE or scenario["pattern"] == BASELINE:
        return {}
    placed = placed_policies(policies_of(scenario["pattern"], scenario["config"]), topology.entry, topology.names)
    limits = {}
    for name, policies in placed.items():
        pool = policies.get("circuit_breaker", {})
        if pool.get("http2MaxRequests") and not any(pool.get(other) for other in
                                                    ("maxConnections", "http1MaxPendingRequests", "maxRetries")):
            limits[name] = pool["http2MaxRequests"]
    return limits


def retry_attempts(topology: Topology, scenario: dict, client: dict) -> dict[str, int]:
    """The retries each service's callers make of a failed call of it, under this scenario: the
    placed retry's attempts, Istio's default retry's where none is placed, none for the baseline."""
    mesh = client["service"] == MESH_SERVICE
    if mesh and scenario["pattern"] == BASELINE:
        return {name: 0 for name in topology.names}
    policies = policies_of(scenario["pattern"], scenario["config"]) if mesh else {}
    placed = placed_policies(policies, topology.entry, topology.names)
    return {name: placed[name].get("retry", {}).get("attempts", DEFAULT_ATTEMPTS) for name in topology.names}


def highest(peaks: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    return {name: max(peaks.get(name, 0), more.get(name, 0)) for name in {*peaks, *more}}


def hop_record(topology: Topology, scenario: dict, client: dict, round_number: int, counters: dict,
               series: list[dict] | None = None, peaks: dict[str, int] | None = None) -> dict:
    """One round's record in hops.jsonl: the increase of every edge's and service's counters, and what follows."""
    services, edges = counters["services"], counters["edges"]
    entry_requests = services[topology.entry]["requests"]
    attempts = retry_attempts(topology, scenario, client)
    worst = topology.worst_case_per_entry({name: attempts[name] for name in topology.names if name != topology.entry})
    tiers = topology.tiers()
    nominal = topology.requests_per_entry()
    carried = services[topology.entry]["answeredOk"]
    service_rows = []
    for name in topology.names:
        counts = services[name]
        row = {"service": name, "tier": tiers.get(name), **counts,
               "perEntryRequest": round(counts["requests"] / entry_requests, 4) if entry_requests else None,
               "perEntryRequestNominal": nominal[name], "perEntryRequestWorstCase": worst[name],
               **_waste(counts, carried * nominal[name])}
        service_rows.append(row)
    edge_rows, violations = [], []
    limits = pool_limits(topology, scenario, client)
    for key, edge in edges.items():
        caller, callee = key.split(EDGE_SEPARATOR)
        bound = edge["calls"] * (attempts[callee] + 1)
        peak, limit = (peaks or {}).get(key), limits.get(callee)
        # the caller's calls in flight bound its sidecar's requests in flight from above: a refusal
        # below the limit (halved: a call the caller gave up on may linger in the sidecar) is a pool
        # that does not hold the limit it was given
        if edge.get("sidecarPoolOverflows", 0) > 0 and peak is not None and limit is not None and limit > 2 \
                and peak < limit / 2:
            violations.append(Violation("hop.pool_below_limit",
                                        f"{caller} -> {callee}: its sidecar refused {edge['sidecarPoolOverflows']} "
                                        f"calls as over the limit of {limit} in flight, but {caller} never had more "
                                        f"than {peak} calls of {callee} in flight at once"))
        buckets = edge.pop("successBuckets", {})
        latency = {f"successP{q}Ms": percentile(buckets, q / 100, counters.get("histogram")) for q in (50, 95, 99)}
        edge_rows.append({"caller": caller, "callee": callee, **edge, **latency, "attempts": attempts[callee],
                          "peakCallsInFlight": peak})
        if edge["sidecarUpstreamRequests"] > bound:
            violations.append(Violation("hop.amplification",
                                        f"{caller} -> {callee}: its sidecar sent {edge['sidecarUpstreamRequests']} "
                                        f"requests for {edge['calls']} calls, more than calls x (attempts "
                                        f"{attempts[callee]} + 1) = {bound}"))
    internal = sum(services[name]["requests"] for name in topology.names if name != topology.entry)
    return {"scenarioId": scenario["id"], "scenarioIndex": scenario["index"], "round": round_number,
            "client": scenario["client"], "entryRequests": entry_requests, "entryCarried": carried,
            "wastedCpuSeconds": round(sum(row["wastedCpuSeconds"] for row in service_rows), 6),
            "cpuSeconds": round(sum(row["cpuSeconds"] for row in service_rows), 6),
            "amplification": round((entry_requests + internal) / entry_requests, 4) if entry_requests else None,
            "services": service_rows, "edges": edge_rows, "series": series or [],
            "oracleViolations": as_records(violations)}
