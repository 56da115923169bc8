"""The target's capacity, as the service-mesh papers define it: the highest rate of successful
requests whose p95 response time stays under a bound (100 ms unless said otherwise), measured with
the open-loop load generator through the fault proxy (no fault) on this machine.

Search: constant-rate steps, doubling from START_RPS until a step fails (or, when the first fails,
going down until one passes, to MIN_RPS at least; a step that fails there is measured again, and
believed only when it fails twice, since it sets the bracket), then halving the gap
between the last passing and the first failing rate until it is under PRECISION of the passing rate
(at most MAX_BISECTIONS times). A step passes when at least MIN_SUCCESS_SHARE of its measured
requests succeeded and their p95 is under the bound. A failing step's successful answers per second
(an overloaded target answers at its most) cap the failing rate, and the next step tries just under
that cap (capacity is often close to it), which ends the search when it passes.

How long a step lasts (step_seconds): STEP_WARMUP_S, then what its verdict needs: MIN_REQUESTS
measured requests (then p95 is interpolated between the 47th and 48th of 50, and one failure
already fails the share), and time for an overload to show: a rate (1 + e) times what the target
serves grows its queue by e seconds of work a second, past the bound after bound / e seconds, so
OVERLOAD_SLOS x the bound lets an overload of 1 / OVERLOAD_SLOS (7%, about PRECISION) show. A failing
step ends as soon as its verdict is certain (more measured requests failed, or slow, than a passing
step may have, whatever the rest do), and the next step waits until the target has worked off its
queue.

Measurements are kept in ~/.cache/rbl/capacity.json (capacity_cache.py), keyed by the machine (host name, CPU model,
cores) and the target (path, replicas, CPU budgets, proxy, bound): a plan giving rates as shares of
capacity uses the stored one, or calibrates first.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import time
import urllib.request
from contextlib import nullcontext
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from ..plan_records import LOAD_KEY, load_of
from ..store.open_metrics import open_loop_metrics
from .capacity_cache import read_record, write_record
from .load_generator import LoadRun, classify, requests_so_far
from .other_work import OtherWork

START_RPS = 25
MIN_RPS = 5                 # below this a step lasts 10 s or more: the target is too slow to calibrate
MAX_RPS = 20_000
PRECISION = 0.05            # the search stops when the gap is under this share of the passing rate
MAX_BISECTIONS = 4
STEP_WARMUP_S = 0.5
MIN_STEP_S = 1.5            # measured seconds at least
MIN_REQUESTS = 50           # measured requests at least
OVERLOAD_SLOS = 15          # measured seconds at least, in multiples of the bound
MIN_SUCCESS_SHARE = 0.99
P95_PERCENT = 95
DEFAULT_SLO_MS = 100.0
POLL_S = 0.1                # how often a running step's records are read
IDLE_TIMEOUT_S = 30.0       # after a failed step, how long the target may take to work off its queue
BUSY_CORES = 0.25           # other work above this many cores on average marks a calibration busy
# how the capacity was measured, kept with it
METHOD = {"search": "doubling, then bisection", "start_rps": START_RPS, "min_rps": MIN_RPS,
          "precision": PRECISION, "min_success_share": MIN_SUCCESS_SHARE, "percentile": P95_PERCENT,
          "failed_bracket_steps_repeated": True}


def machine_fingerprint() -> dict:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        model = platform.processor()
    return {"host": socket.gethostname(), "cpu": model, "cores": os.cpu_count()}


def target_key(target: dict, proxy_kind: str, slo_ms: float, topology: dict | None = None,
               backend: str = "local") -> dict:
    """What a capacity is the capacity of: the target (or the topology whose entry the load reaches),
    where it runs. The same target in containers is another measurement (the engine's CPU limit,
    its network); the local backend's key names no backend, so records stored before there was a
    second one stay found."""
    key = {"path": target["path"], "replicas": target.get("replicas", 1), "cpus": target.get("cpus"),
           "noisy_cpus": target.get("noisy_cpus"), "proxy": proxy_kind, "slo_ms": slo_ms}
    key = key if backend == "local" else {**key, "backend": backend}
    if target.get("drop_abandoned"):       # the calibration's overloaded steps abandon work too
        key = {**key, "drop_abandoned": True}
    return key if topology is None else {**key, "topology": topology}


def _key(machine: dict, target: dict) -> str:
    return json.dumps({"machine": machine, "target": target}, sort_keys=True)


def stored_capacity(target: dict, say: Callable[[str], None] = lambda _: None) -> dict | None:
    """This machine's stored measurement of `target` (a target_key), if there is a usable one."""
    return read_record(_key(machine_fingerprint(), target), MAX_RPS, say)


def store_capacity(target: dict, record: dict, say: Callable[[str], None] = lambda _: None) -> Path:
    return write_record(_key(machine_fingerprint(), target), record, MAX_RPS, say)


def step_seconds(rps: float, slo_ms: float) -> float:
    """A step's measured seconds (the module's docstring says why)."""
    return max(MIN_STEP_S, MIN_REQUESTS / rps, OVERLOAD_SLOS * slo_ms / 1000)


def certainly_failed(table: pa.Table, measured: int, slo_ms: float) -> bool:
    """Whether the records so far fail the step whatever the rest of its `measured` requests do:
    more failed than MIN_SUCCESS_SHARE allows, or so many slow successes that their p95 (linear
    between closest ranks, over at most `measured` successes) is at the bound."""
    rows = table.filter(pc.invert(table["warmup"]))
    success = pc.equal(rows["cls"], "success")
    failed = rows.num_rows - (pc.sum(success).as_py() or 0)
    slow = pc.sum(pc.and_(success, pc.greater_equal(rows["response_ms"], slo_ms))).as_py() or 0
    # the p95 of S values is linear between ranks floor(h) and floor(h) + 1, h = 0.95 (S - 1): at the
    # bound once the top S - floor(h) are, a count that grows with S, so S = measured decides
    slow_enough = measured - int(P95_PERCENT * (measured - 1) // 100)
    return failed > round((1 - MIN_SUCCESS_SHARE) * measured, 9) or slow >= slow_enough


def served_rps(table: pa.Table) -> float | None:
    """Successful answers per second, between the first and the last (None: too few to tell). In an
    overloaded step the target is saturated from its first moments (a queue forms at once), so the
    warm-up counts too: a step that failed early still tells."""
    success = table.filter(pc.equal(table["cls"], "success"))
    if success.num_rows < 20:
        return None
    answered = pc.add(pc.multiply(success["scheduled_s"], 1000), success["response_ms"])
    span_ms = (pc.max(answered).as_py() or 0) - (pc.min(answered).as_py() or 0)
    return (success.num_rows - 1) / span_ms * 1000 if span_ms > 0 else None


def _step(binary: Path, url: str, rps: float, slo_ms: float, work: Path) -> dict:
    measured_s = step_seconds(rps, slo_ms)
    duration_s = STEP_WARMUP_S + measured_s
    offsets = [round(i * 1e9 / rps) for i in range(int(rps * duration_s))]
    measured = sum(offset >= STEP_WARMUP_S * 1e9 for offset in offsets)
    load = LoadRun(binary, url, offsets, work, timeout_s=max(2.0, slo_ms / 100), duration_s=duration_s)
    began = time.monotonic()
    try:
        while not load.wait(POLL_S):
            table = requests_so_far(load.out, STEP_WARMUP_S, mesh=True)
            if table is not None and certainly_failed(table, measured, slo_ms):
                load.stop()                                  # its verdict is in: no need to wait out the rest
                return _verdict(rps, table, measured, slo_ms, time.monotonic() - began, stopped=True)
        csv_path, _ = load.result()
    finally:
        load.stop()
    table = classify(csv_path, STEP_WARMUP_S, mesh=True)
    return _verdict(rps, table, measured, slo_ms, time.monotonic() - began, stopped=False)


def _verdict(rps: float, table: pa.Table, measured: int, slo_ms: float, seconds: float, stopped: bool) -> dict:
    metrics = open_loop_metrics(table, window_s=1.0, slo_ms=slo_ms, start_s=STEP_WARMUP_S)
    share, p95 = metrics["successShare"] or 0.0, metrics["successP95Ms"]
    passed = not stopped and share >= MIN_SUCCESS_SHARE and p95 is not None and p95 < slo_ms \
        and metrics["offeredRequests"] >= measured
    return {"rps": round(rps, 1), "successShare": round(share, 4), "successP95Ms": p95,
            "lagP99Ms": metrics["lagP99Ms"], "passed": passed, "seconds": round(seconds, 2),
            "endedEarly": stopped, "servedRps": None if passed else served_rps(table)}


def search(measure: Callable[[float], dict]) -> tuple[float, list[dict]]:
    """The highest passing rate `measure` (one step at a rate -> its record) finds, and the steps."""
    steps: list[dict] = []

    def passes(rps: float) -> bool:
        steps.append(measure(rps))
        return steps[-1]["passed"]

    def passes_unless_it_fails_twice(rps: float) -> bool:
        """A failure that would set the bracket is believed only when the step fails again: a moment
        of other work on the machine must not cap the capacity for good."""
        if passes(rps):
            return True
        if passes(rps):
            steps[-1]["repeated"] = True
            return True
        steps[-1]["repeated"] = True
        return False

    good, bad, served = 0.0, None, None
    rps = float(START_RPS)
    while MIN_RPS <= rps <= MAX_RPS:
        if passes_unless_it_fails_twice(rps):
            good = rps
            if bad is not None:                 # came down to it: bisect above it
                break
            rps *= 2
            continue
        served = steps[-1]["servedRps"]
        # nothing above what an overloaded target answered can pass, unless it answered hardly more
        # than the rate that passed: a chain whose goodput collapses under overload serves less than
        # it carries at capacity (a 3-tier chain served 48-52 req/s at 100 and carried 50 with a p99
        # of 18 ms), so that is no bound; the bisection below the failing rate finds it
        bad = served if served is not None and good * (1 + 2 * PRECISION) < served < rps else rps
        if good > 0:
            break
        # the first step failed (a slow target, or a busy machine): go down, just under what it
        # served when that is known, else by halves, to MIN_RPS at least, rather than give up
        if rps <= MIN_RPS:
            break
        rps = max(MIN_RPS, bad / (1 + PRECISION) if bad < rps else rps / 2)
        served = None
    for _ in range(MAX_BISECTIONS):
        if bad is None or good <= 0 or bad - good <= PRECISION * good * (1 + 1e-9):     # (float rounding)
            break
        # the capacity is often just under what the target served: try first the rate that would
        # end the search if it passes, then halve the gap
        middle = bad / (1 + PRECISION) if served is not None and bad == served else (good + bad) / 2
        served = None
        if passes(middle):
            good = middle
        else:
            bad = middle
    return good, steps


def calibrate(binary: Path, url: str, slo_ms: float, work: Path, say: Callable[[str], None] = lambda _: None,
              samples_other_work: bool = True) -> dict:
    """Measure the capacity at `url` (GET through the fault proxy); returns the record to store.
    Without `samples_other_work` (a target in containers, whose CPU is not this process tree's), the
    record says nothing of other work rather than count the target as its own neighbour."""
    began = time.monotonic()

    def measure(rps: float) -> dict:
        step = _step(binary, url, rps, slo_ms, work)
        p95, served = step["successP95Ms"], step["servedRps"]
        say(f"  {step['rps']:>8g} req/s: {step['successShare']:.1%} successful, p95 "
            f"{'-' if p95 is None else format(p95, '.1f')} ms -> {'under' if step['passed'] else 'NOT under'} "
            f"{slo_ms:g} ms ({step['seconds']:.1f} s{'' if served is None else f'; {served:.0f} req/s served'})")
        if not step["passed"]:
            _wait_idle(url, slo_ms)
        return step

    with OtherWork() if samples_other_work else nullcontext() as other_work:
        good, steps = search(measure)
    record = {"capacity_rps": round(good, 1), "slo_ms": slo_ms, "machine": machine_fingerprint(),
              "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "steps": steps,
              "seconds": round(time.monotonic() - began, 1), "method": METHOD}
    busy = other_work.record() if other_work is not None else None
    if busy is not None:
        record["otherWork"] = busy
        record["busy"] = busy["otherCores"] >= BUSY_CORES
    return record


def busy_note(record: dict) -> str | None:
    """What to say of a capacity measured while other work took the machine, None otherwise."""
    if not record.get("busy"):
        return None
    other = record.get("otherWork") or {}
    return (f"warning: other processes used {other.get('otherCores', 0):.2g} of {other.get('cores', '?')} cores on "
            f"average while this capacity was measured (at most {other.get('otherCoresPeak', 0):.2g}): it is likely "
            f"lower than on a quiet machine, and every rate given as a share of it with it; the stored entry is "
            f"marked busy. Measure it again when the machine is quiet: `rbl calibrate SPEC --force`")


# A stored capacity older than this is named as such when a run uses it: the same machine drifts (a
# kernel or firmware update, another tenant of the host), and every rate given as a share follows it
STALE_AFTER_DAYS = 30


def stale_note(record: dict, now: datetime | None = None) -> str | None:
    """What to say of a stored capacity measured more than STALE_AFTER_DAYS ago, None otherwise (and
    for a date it cannot read: the cache's own checks refuse those)."""
    try:
        measured = datetime.fromisoformat(record["measured_at"].replace("Z", "+00:00"))
    except (KeyError, AttributeError, ValueError):
        return None
    if measured.tzinfo is None:
        measured = measured.replace(tzinfo=timezone.utc)
    days = ((now or datetime.now(timezone.utc)) - measured).total_seconds() / 86400
    if days <= STALE_AFTER_DAYS:
        return None
    return (f"note: this capacity was measured {days:.0f} days ago; a machine drifts (updates, other tenants), and "
            f"every rate given as a share of it with it: `rbl calibrate SPEC --force` measures it again")


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # never through a proxy setting


def _wait_idle(url: str, slo_ms: float) -> None:
    """After a failed step: until a request is answered within the bound (the target has worked off
    what queued at it), so the next step does not start on this one's backlog."""
    deadline = time.monotonic() + IDLE_TIMEOUT_S
    while time.monotonic() < deadline:
        start = time.monotonic()
        try:
            with _DIRECT.open(url, timeout=IDLE_TIMEOUT_S) as answer:
                answer.read()
            if (time.monotonic() - start) * 1000 < slo_ms:
                return
        except OSError:
            time.sleep(POLL_S)


def calibration_header(header: dict) -> dict:
    """The plan a calibration starts services for: the spec's target alone (no client services),
    driven open loop by the load generator, so a backend prepares exactly that."""
    return {**header, "clients": [], LOAD_KEY: header.get(LOAD_KEY) or {"kind": "open", "axes": [], "settings": {}}}


def needs_capacity(scenarios) -> bool:
    """Whether any open-loop scenario gives a rate as a share without fixing the capacity."""
    for scenario in scenarios:
        load = load_of(scenario)
        if load is not None and load.capacity_rps is None and load.rates_given_as_share():
            return True
    return False


def slo_of(scenarios) -> float:
    """The bound capacity is measured against: the plan's load.slo (the first, when it varies)."""
    for scenario in scenarios:
        load = load_of(scenario)
        if load is not None:
            return load.slo_ms
    return DEFAULT_SLO_MS


def resolve_capacity(header: dict, scenarios, services, binary: Path, work: Path,
                     say: Callable[[str], None], backend: str = "local", samples_other_work: bool = True
                     ) -> dict | None:
    """The capacity record an open-loop run uses: stored for this machine, target and backend, or
    measured now through the backend's services (and stored); None when no scenario needs one."""
    if not needs_capacity(scenarios):
        return None
    slo_ms = slo_of(scenarios)
    key = target_key(header["target"], services.proxy_kind, slo_ms, header.get("topology"), backend)
    record = stored_capacity(key, say)
    if record is not None:
        say(f"target capacity: {record['capacity_rps']:g} req/s with p95 under {slo_ms:g} ms "
            f"(calibrated {record['measured_at']}; `rbl calibrate --force` measures it again)")
        for note in (busy_note(record), stale_note(record)):
            if note:
                say(note)
        return record
    say(f"no capacity of this target is stored for this machine: calibrating first "
        f"(p95 under {slo_ms:g} ms; steps of {STEP_WARMUP_S + step_seconds(MAX_RPS, slo_ms):g} s or more)")
    services.fault.apply({"kind": "abort", "rate": 0, "status": 503})
    record = calibrate(binary, services.target_url(header["target"]["path"]), slo_ms, work, say, samples_other_work)
    if record["capacity_rps"] <= 0:
        raise CapacityError(f"the target did not serve {MIN_RPS} req/s with p95 under {slo_ms:g} ms")
    path = store_capacity(key, record, say)
    say(f"target capacity: {record['capacity_rps']:g} req/s (stored in {path})")
    if busy_note(record):
        say(busy_note(record))
    return record


class CapacityError(Exception):
    """The target's capacity could not be measured."""
