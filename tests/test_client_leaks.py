"""A client service lets go of what a job built once the job is over: run a leaking job many times,
then look at what is still alive (the JVM's live breakers after a full collection, its resident
memory) and what an idle service still spends (CPU of the Node service between jobs)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from .conformance import checks, hostile
from .conformance.conftest import start_client
from .conformance.profiles import PROFILES

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS line")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S          # utime, stime


def run_jobs(url: str, job: dict, count: int, expected: int = 200) -> None:
    """`count` jobs, a few at a time (as virtual users send them), each answered `expected`."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(4) as pool:
        statuses = [status for status, _ in pool.map(lambda _: checks.post(url, "/run", job), range(count))]
    assert statuses == [expected] * count, sorted(set(statuses))


@pytest.fixture
def started(start_proxy):
    """start(name) -> (process, url, proxy): a client service behind a proxy that answers 503 to all."""
    proxy = start_proxy()
    proxy.set_fault(abort__abort_percent=100, abort__http_status=503)
    processes = []

    def start(name: str):
        process, url = start_client(PROFILES[name], proxy.data_port)
        processes.append(process)
        return process, url, proxy
    yield start
    for process in processes:
        process.terminate()
        process.wait(timeout=10)


def live_instances(pid: int, class_name: str) -> int:
    """Instances of class_name alive after a full collection (jcmd's class histogram forces one)."""
    histogram = subprocess.run(["jcmd", str(pid), "GC.class_histogram"], capture_output=True, text=True,
                               timeout=60, check=True).stdout
    for line in histogram.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[3] == class_name:
            return int(fields[1])
    return 0


def test_resilience4j_breakers_that_opened_are_let_go_when_their_job_ends(started):
    # a breaker that opens with the automatic move to half-open queues that move on Resilience4j's
    # one scheduler for waitDurationInOpenState; the task held the breaker and its window (here
    # 20,000 measurements, about a megabyte) for that long after its job was over
    process, url, proxy = started("resilience4j")
    breaker = {"automaticTransitionFromOpenToHalfOpenEnabled": True, "waitDurationInOpenState": 600_000,
               "slidingWindowSize": 20_000, "minimumNumberOfCalls": 1, "failureRateThreshold": 50}
    job = hostile.job_for(proxy, strategy=[{"pattern": "circuit_breaker", "params": breaker}], max_requests=1,
                          successes=1, max_duration_ms=10_000)
    run_jobs(url, job, 20)                                       # the JVM warmed up
    live_instances(process.pid, "x")                            # a full collection before the baseline
    before = rss_mb(process.pid)
    run_jobs(url, job, 400)
    live = live_instances(process.pid, "io.github.resilience4j.circuitbreaker.internal.CircuitBreakerStateMachine")
    assert live == 0, f"{live} breakers of finished jobs still alive"
    grown = rss_mb(process.pid) - before                        # after that full collection
    print(f"resident memory {before:.0f} MB -> {before + grown:.0f} MB over 400 jobs")
    hostile.assert_healthy(url)


def test_a_node_job_refused_at_a_later_step_leaves_no_breaker_running(started):
    # opossum's rolling window turns on an interval timer from the breaker's construction: a job
    # refused at its second step left the first step's breaker ticking for ever
    process, url, proxy = started("opossum")
    ticking = {"rollingCountTimeout": 10, "rollingCountBuckets": 10}             # a tick every millisecond
    refused = {"rollingCountTimeout": 10, "rollingCountBuckets": 3}              # 3 does not divide 10
    job = hostile.job_for(proxy, strategy=[{"pattern": "circuit_breaker", "params": ticking},
                                           {"pattern": "circuit_breaker", "params": refused}])
    run_jobs(url, job, 300, expected=400)
    # and jobs that run (an open breaker's calls send nothing: the job ends at its deadline)
    run_jobs(url, hostile.job_for(proxy, strategy=[{"pattern": "circuit_breaker", "params": ticking}],
                                  max_duration_ms=50), 100)
    time.sleep(0.5)
    start, idle_s = cpu_s(process.pid), 3.0
    time.sleep(idle_s)
    share = (cpu_s(process.pid) - start) / idle_s
    # 400 breakers ticking at 1 kHz keep a core busy; an idle service spends next to nothing
    assert share < 0.05, f"the idle service used {share:.0%} of a core"
    hostile.assert_healthy(url)

