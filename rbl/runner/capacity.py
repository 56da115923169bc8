"""The target's capacity, as the service-mesh papers define it: the highest rate of successful
requests whose p95 response time stays under a bound (100 ms unless said otherwise), measured with
the open-loop load generator through the fault proxy (no fault) on this machine.

Search: constant-rate steps, doubling from START_RPS until a step fails, then halving the gap
between the last passing and the first failing rate BISECTIONS times. A step passes when at least
MIN_SUCCESS_SHARE of its measured requests succeeded and their p95 is under the bound.

Measurements are kept in ~/.cache/rbl/capacity.json (capacity_cache.py), keyed by the machine (host name, CPU model,
cores) and the target (path, replicas, CPU budgets, proxy, bound): a plan giving rates as shares of
capacity uses the stored one, or calibrates first.
"""

from __future__ import annotations

import json
import os
import platform
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ..plan_records import LOAD_KEY, load_of
from ..store.open_metrics import open_loop_metrics
from .capacity_cache import read_record, write_record
from .load_generator import classify, run_load

START_RPS = 25
MAX_RPS = 20_000
BISECTIONS = 3
STEP_S = 4.0
STEP_WARMUP_S = 1.0
MIN_SUCCESS_SHARE = 0.99
DEFAULT_SLO_MS = 100.0


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


def target_key(target: dict, proxy_kind: str, slo_ms: float, topology: dict | None = None) -> dict:
    """What a capacity is the capacity of: the target (or the topology whose entry the load reaches)."""
    key = {"path": target["path"], "replicas": target.get("replicas", 1), "cpus": target.get("cpus"),
           "noisy_cpus": target.get("noisy_cpus"), "proxy": proxy_kind, "slo_ms": slo_ms}
    return key if topology is None else {**key, "topology": topology}


def _key(machine: dict, target: dict) -> str:
    return json.dumps({"machine": machine, "target": target}, sort_keys=True)


def stored_capacity(target: dict, say: Callable[[str], None] = lambda _: None) -> dict | None:
    """This machine's stored measurement of `target` (a target_key), if there is a usable one."""
    return read_record(_key(machine_fingerprint(), target), MAX_RPS, say)


def store_capacity(target: dict, record: dict, say: Callable[[str], None] = lambda _: None) -> Path:
    return write_record(_key(machine_fingerprint(), target), record, MAX_RPS, say)


def _step(binary: Path, url: str, rps: float, slo_ms: float, work: Path) -> dict:
    count = int(rps * STEP_S)
    offsets = [round(i * 1e9 / rps) for i in range(count)]
    csv_path, summary = run_load(binary, url, offsets, work, timeout_s=max(2.0, slo_ms / 100), duration_s=STEP_S)
    table = classify(csv_path, STEP_WARMUP_S, mesh=True)
    metrics = open_loop_metrics(table, window_s=STEP_S, slo_ms=slo_ms, measured_s=STEP_S - STEP_WARMUP_S,
                                start_s=STEP_WARMUP_S)
    share, p95 = metrics["successShare"] or 0.0, metrics["successP95Ms"]
    passed = share >= MIN_SUCCESS_SHARE and p95 is not None and p95 < slo_ms
    return {"rps": round(rps, 1), "successShare": round(share, 4), "successP95Ms": p95,
            "lagP99Ms": metrics["lagP99Ms"], "passed": passed}


def calibrate(binary: Path, url: str, slo_ms: float, work: Path, say: Callable[[str], None] = lambda _: None) -> dict:
    """Measure the capacity at `url` (GET through the fault proxy); returns the record to store."""
    steps: list[dict] = []

    def passes(rps: float) -> bool:
        step = _step(binary, url, rps, slo_ms, work)
        steps.append(step)
        say(f"  {step['rps']:>8g} req/s: {step['successShare']:.1%} successful, p95 "
            f"{'-' if step['successP95Ms'] is None else format(step['successP95Ms'], '.1f')} ms "
            f"-> {'under' if step['passed'] else 'NOT under'} {slo_ms:g} ms")
        return step["passed"]

    good, bad = 0.0, None
    rps = float(START_RPS)
    while rps <= MAX_RPS:
        if not passes(rps):
            bad = rps
            break
        good, rps = rps, rps * 2
    if bad is not None:
        for _ in range(BISECTIONS):
            middle = (good + bad) / 2
            if passes(middle):
                good = middle
            else:
                bad = middle
    return {"capacity_rps": round(good, 1), "slo_ms": slo_ms, "machine": machine_fingerprint(),
            "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "steps": steps}


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
                     say: Callable[[str], None]) -> dict | None:
    """The capacity record an open-loop run uses: stored for this machine and target, or measured
    now (and stored); None when no scenario needs one."""
    if not needs_capacity(scenarios):
        return None
    slo_ms = slo_of(scenarios)
    key = target_key(header["target"], services.proxy_kind, slo_ms, header.get("topology"))
    record = stored_capacity(key, say)
    if record is not None:
        say(f"target capacity: {record['capacity_rps']:g} req/s with p95 under {slo_ms:g} ms "
            f"(calibrated {record['measured_at']}; `rbl calibrate --force` measures it again)")
        return record
    say(f"no capacity of this target is stored for this machine: calibrating first "
        f"(p95 under {slo_ms:g} ms; {STEP_S:g} s per step)")
    services.fault.apply({"kind": "abort", "rate": 0, "status": 503})
    record = calibrate(binary, services.target_url(header["target"]["path"]), slo_ms, work, say)
    if record["capacity_rps"] <= 0:
        raise CapacityError(f"the target did not serve {START_RPS} req/s with p95 under {slo_ms:g} ms")
    path = store_capacity(key, record, say)
    say(f"target capacity: {record['capacity_rps']:g} req/s (stored in {path})")
    return record


class CapacityError(Exception):
    """The target's capacity could not be measured."""
