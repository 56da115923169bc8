"""One open-loop round: the load generator (rbl-load, on vegeta's library) sends requests on the
round's schedule (load_schedule.py) whatever the answers, and records each one with its scheduled
send time, so a slow target cannot hold the load back (no coordinated omission).

Where the requests go: a library client's `POST /call` (protocol v1: one call through the
library's pattern per request, one pattern instance for the whole round, as production code shares
one), or straight to a mesh client's sidecar Envoy (the client is plain HTTP; the sidecar holds the
policies). Each request gets one response class:
  success         the call succeeded (library), or a 2xx came back (mesh);
  circuit_broken  the sidecar refused it locally (Envoy flag UO: a connection-pool limit);
  timed_out       no answer within the load's timeout, the sidecar's timeout fired (UT), or a
                  library's timeout ended the call;
  rejected        a library policy refused the call (a breaker, bulkhead or rate limiter: the call
                  says which, or sent no request);
  failed          anything else (a call a library's fallback answered included: not a success).
The round's requests go to RUN_DIR/requests/SCENARIO/round-N.parquet and its metrics
(store/open_metrics.py) into the round's row of results.jsonl.
"""

from __future__ import annotations

import ctypes
import json
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.compute as pc

from ..store.open_metrics import open_loop_metrics
from ..store.requests import write_round_requests
from .load_schedule import send_offsets
from .oracles import as_records, fault_rate_violation, request_count_violation

LOADGEN_CONNECTIONS = 2048          # the backends let a client hold this many calls (OPEN_LOOP_CONNECTIONS)
STOP_GRACE_S = 30.0                 # beyond duration + timeout, before the generator is stopped
CALL_TIMEOUT_ERRORS = ("timeout", "deadline exceeded", "Client.Timeout")
PR_SET_PDEATHSIG = 1


class LoadFailed(Exception):
    """The load generator could not run the round; the message says why."""


def run_load(binary: Path, url: str, offsets: list[int], work_dir: Path, timeout_s: float, duration_s: float,
             body: dict | None = None, max_connections: int = LOADGEN_CONNECTIONS) -> tuple[Path, dict]:
    """Send the schedule to `url`; returns the CSV of its requests and the generator's summary."""
    work_dir.mkdir(parents=True, exist_ok=True)
    schedule = work_dir / "schedule.txt"
    schedule.write_text("".join(f"{offset}\n" for offset in offsets))
    out = work_dir / "requests.csv"
    argv = [str(binary), "--url", url, "--schedule", str(schedule), "--out", str(out),
            "--timeout", f"{timeout_s:g}s", "--max-connections", str(max_connections)]
    if body is not None:
        body_file = work_dir / "body.json"
        body_file.write_text(json.dumps(body))
        argv += ["--method", "POST", "--body-file", str(body_file)]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=_stop_with_runner)
    try:
        stdout, stderr = process.communicate(timeout=duration_s + timeout_s + STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    if process.returncode != 0:
        raise LoadFailed(f"the load generator exited with code {process.returncode}: {stderr.strip()[-400:]}")
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    summary = json.loads(lines[-1]) if lines else {}
    return out, summary


def _stop_with_runner() -> None:
    """In the child: SIGTERM when the runner dies, even by kill -9 (Linux), so no load outlives it."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        except (OSError, AttributeError):
            pass


def classify(csv_path: Path, warmup_s: float, mesh: bool) -> pa.Table:
    """The generator's CSV as the per-request table (store/requests.py's REQUEST_SCHEMA)."""
    text_columns = ("flags", "error", "ok", "requests", "last_status", "ending")
    table = pacsv.read_csv(csv_path, convert_options=pacsv.ConvertOptions(
        column_types={name: pa.string() for name in text_columns}, strings_can_be_null=False))
    scheduled_ns = pc.cast(table["scheduled_ns"], pa.float64())
    sent_ns = pc.cast(table["sent_ns"], pa.float64())
    latency_ns = pc.cast(table["latency_ns"], pa.float64())
    status = table["status"].to_pylist()
    answered = [code != 0 for code in status]
    response_ms = [(s - sch + lat) / 1e6 if ok else None
                   for sch, s, lat, ok in zip(scheduled_ns.to_pylist(), sent_ns.to_pylist(), latency_ns.to_pylist(),
                                              answered)]
    flags = table["flags"].to_pylist()
    errors = table["error"].to_pylist()
    oks = table["ok"].to_pylist()
    requests = [int(r) if r else None for r in table["requests"].to_pylist()]
    endings = table["ending"].to_pylist()
    classes = [_response_class(code, flag, error, ok, sent, mesh, ending)
               for code, flag, error, ok, sent, ending in zip(status, flags, errors, oks, requests, endings)]
    scheduled_s = pc.divide(scheduled_ns, 1e9)
    return pa.table({
        "seq": table["seq"], "scheduled_s": scheduled_s,
        "lag_ms": pc.divide(pc.subtract(sent_ns, scheduled_ns), 1e6),
        "response_ms": pa.array(response_ms, pa.float64()), "status": pa.array(status, pa.int32()),
        "cls": pa.array(classes, pa.string()), "requests": pa.array(requests, pa.int32()),
        "flags": pa.array(flags, pa.string()),
        "warmup": pc.less(scheduled_s, warmup_s),
    })


def _response_class(status: int, flags: str, error: str, ok: str, requests: int | None, mesh: bool,
                    ending: str = "") -> str:
    if status == 0:
        return "timed_out" if any(word in error for word in CALL_TIMEOUT_ERRORS) else "failed"
    if mesh:
        if 200 <= status < 300:
            return "success"
        if "UO" in flags.split(","):
            return "circuit_broken"
        return "timed_out" if "UT" in flags.split(",") else "failed"
    if status != 200 or ok == "":
        return "failed"               # the client service itself refused or broke the call
    if ok == "1":
        return "success"
    if ending == "timed_out":
        return "timed_out"            # the library's timeout ended the call
    if ending.startswith("rejected:"):
        return "rejected"             # a breaker, bulkhead or rate limiter refused it
    if ending == "fallback":
        return "failed"               # the fallback answered: the target did not succeed
    return "rejected" if requests == 0 else "failed"


def open_round(binary: Path, scenario: dict, round_number: int, run_dir: Path, url: str, body: dict | None,
               capacity_rps: float | None) -> tuple[pa.Table, dict, Path]:
    """Run the round's schedule; returns its request table, the generator's summary and the
    Parquet file the table was written to."""
    load = scenario["load"]
    offsets = list(send_offsets(load, capacity_rps, seed=f"{scenario['id']}/{round_number}"))
    if not offsets:
        raise LoadFailed("the round's schedule is empty (a rate too low for its duration)")
    work = run_dir / "requests" / scenario["id"] / f"round-{round_number}.work"
    csv_path, summary = run_load(binary, url, offsets, work, float(load["timeout_s"]), float(load["duration_s"]),
                                 body)
    table = classify(csv_path, float(load["warmup_s"]), mesh=body is None)
    path = write_round_requests(run_dir, scenario["id"], round_number, table)
    for leftover in work.iterdir():
        leftover.unlink()
    work.rmdir()
    return table, summary, path


def open_round_row(scenario: dict, round_number: int, table: pa.Table, counters: dict, sidecar: dict | None,
                   run_facts: dict, rounds_in_run: int) -> dict:
    """The round's row of results.jsonl: the scenario's keys, the overload metrics over the measured
    part, the proxy's (and sidecar's) counters, `run_facts` (times, capacity, versions, warm-up) and
    the round's oracle violations."""
    load, fault = scenario["load"], scenario["fault"]
    seen = counters.get("downstream_rq_total", 0)
    injected = counters.get("fault.aborts_injected" if fault["kind"] == "abort" else "fault.delays_injected", 0)
    row = {
        "userId": 1, "users": 1, "round": round_number, "lib": scenario["library"], "strategy": scenario["pattern"],
        "faultPercentage": fault["rate"], "faultType": fault["kind"],
        "faultStatus": fault.get("status"), "faultDuration": fault.get("duration_ms"),
        **open_loop_metrics(table, float(load["window_s"]), float(load["slo_ms"]),
                            measured_s=float(load["duration_s"]) - float(load["warmup_s"]),
                            start_s=float(load["warmup_s"])),
        "load": load, "config": scenario["config"], "scenarioId": scenario["id"], "scenarioIndex": scenario["index"],
        "client": scenario["client"], "share": "client", "stoppedBy": "duration",
        "faultRateApplied": round(100 * injected / seen, 4) if seen else None, "proxyRequests": seen,
        **run_facts, **(sidecar or {}),
    }
    found = [v for v in [fault_rate_violation(fault["rate"], injected, seen, rounds_in_run)] if v]
    # a library call reports its requests; the proxy must have seen exactly those (unless a call
    # timed out at the generator, whose requests may still arrive after the round)
    known = table.filter(pc.is_valid(table["requests"]))
    timed_out = pc.sum(pc.equal(table["cls"], "timed_out")).as_py() or 0
    if sidecar is None and known.num_rows == table.num_rows and timed_out == 0:
        count = request_count_violation(pc.sum(known["requests"]).as_py() or 0, seen, uncertain=False)
        found += [count] if count else []
    row["oracleViolations"] = as_records(found)
    return row
