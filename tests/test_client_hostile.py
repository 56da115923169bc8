"""What the conformance suite cannot see from outside a client service: its thread count under a
flood of jobs, its start-up flags, and that the runner's metrics read a call cut short."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from rbl.store.metrics import vu_metrics
from rbl.clients.protocol import MAX_JOBS, CallLog

from .conformance import hostile
from .conformance.conftest import client_command, start_client
from .conformance.profiles import PROFILES


def threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line")


@pytest.mark.parametrize("name, spare", [("tenacity", 8), ("resilience4j", 80)])   # the JVM has threads of its own
def test_a_thousand_concurrent_jobs_do_not_start_a_thousand_threads(start_proxy, name, spare):
    proxy = start_proxy()
    proxy.set_fault(abort__abort_percent=100, abort__http_status=503)
    profile = PROFILES[name]
    process, url = start_client(profile, proxy.data_port)
    try:
        job = hostile.job_for(proxy, strategy=[{"pattern": "retry", "params": profile.retry_fixed(2, 10**9)}],
                              max_requests=10, max_duration_ms=10_000)
        peak = [threads(process.pid)]
        import threading
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak.append(threads(process.pid))
                time.sleep(0.05)
        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            statuses = hostile._concurrent_statuses(url, hostile.post_raw(json.dumps(job).encode()), 1000, timeout=40)
        finally:
            done.set()
            sampler.join()
        assert None not in statuses and set(statuses) <= {200, 503}
        assert statuses.count(503) >= 1000 - MAX_JOBS
        assert max(peak) <= MAX_JOBS + spare, f"{max(peak)} threads for 1000 concurrent jobs"
        hostile.assert_healthy(url)
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.parametrize("name", ["tenacity", "resilience4j"])
@pytest.mark.parametrize("flags", [[], ["--target", "nowhere"], ["--target", "127.0.0.1:99999"]])
def test_a_client_service_needs_a_valid_target(name, flags):
    done = subprocess.run(client_command(PROFILES[name]) + ["--listen", "127.0.0.1:0", *flags],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--target" in done.stderr and "Traceback" not in done.stderr


def test_a_cut_short_call_counts_as_a_failed_call_in_the_metrics():
    log = CallLog()
    log.add(True, [[0, 100, 200]])
    log.add(False, [[200, 100, 503], [400, 100, 0]], cut_short=True)
    assert log.calls[-1] == {"ok": False, "requests": [[200, 100, 503], [400, 100, 0]], "cut_short": True}
    metrics = vu_metrics({"calls": log.calls, "total_us": 1000})
    assert metrics["successfulCalls"] == 1 and metrics["unsuccessfulCalls"] == 1
    assert metrics["totalRequests"] == 3 and metrics["unsuccessfulRequests"] == 2


def test_request_less_calls_are_not_merged_into_a_cut_short_one():
    log = CallLog()
    log.add(False, [], cut_short=True)
    log.add(False, [])
    assert log.calls == [{"ok": False, "requests": [], "cut_short": True}, {"ok": False, "requests": []}]
