"""No value `rbl check` accepts makes a pattern instance keep more than MIB_PER_INSTANCE alive, in any
client runtime: instances built with every memory-sizing parameter at its catalogue bound (windows of
calls, buckets) are kept alive side by side (share "client", one key each), and what the service holds
grows by at most that much per instance. The bounds are read from the catalogue, so raising one
without its memory is caught here."""

from __future__ import annotations

import subprocess
import time

import pytest

from rbl.libraries.catalogue import builtin_libraries
from rbl.libraries.relations import MAX_BUCKETS

from .conformance.checks import post
from .conformance.conftest import start_client
from .conformance.profiles import PROFILES
from .test_client_leaks import rss_mb

MIB_PER_INSTANCE = 16          # docs/library-semantics.md states it
INSTANCES = 16
CLOSED_PORT = 9                # every request fails at once: breakers open, and (after 1 ms) go half-open


def upper(library: str, pattern: str, name: str) -> int:
    """The catalogue's upper bound of an int parameter."""
    param = builtin_libraries()[library].patterns[pattern].params[name]
    return next(int(b.value.v) for b in param.type.bounds if b.op == "<=")


def heavy(library: str) -> list[dict]:
    """A pattern with every memory-sizing parameter at its bound, set to open and half-open in a job."""
    if library == "resilience4j":
        return [{"pattern": "circuit_breaker", "params": {
            "slidingWindowSize": upper(library, "circuit_breaker", "slidingWindowSize"),
            "permittedNumberOfCallsInHalfOpenState": upper(library, "circuit_breaker",
                                                           "permittedNumberOfCallsInHalfOpenState"),
            "minimumNumberOfCalls": 1, "waitDurationInOpenState": 1}}]
    if library == "failsafe":
        window = upper(library, "circuit_breaker", "failureThresholdingCapacity")
        return [{"pattern": "circuit_breaker", "params": {
            "failureThreshold": 1, "failureThresholdingCapacity": window, "delay": 1,
            "successThreshold": upper(library, "circuit_breaker", "successThreshold"),
            "successThresholdingCapacity": upper(library, "circuit_breaker", "successThresholdingCapacity")}},
            {"pattern": "adaptive_limiter", "params": {   # its baseline and correlation windows at their bounds
                name: upper(library, "adaptive_limiter", name)
                for name in ("baselineWindowAge", "correlationWindowSize", "recentWindowMinSamples", "maxLimit")}}]
    if library == "gobreaker":          # as many buckets as the relation allows: interval / bucketPeriod
        return [{"pattern": "circuit_breaker", "params": {"interval": MAX_BUCKETS * 1000, "bucketPeriod": 1000}}]
    if library == "opossum":
        buckets = upper(library, "circuit_breaker", "rollingCountBuckets")
        return [{"pattern": "circuit_breaker", "params": {"rollingCountBuckets": buckets,
                                                          "rollingCountTimeout": buckets * 1000}}]
    if library == "cockatiel":
        return [{"pattern": "bulkhead", "params": {"limit": upper(library, "bulkhead", "limit"),
                                                   "queue": upper(library, "bulkhead", "queue")}},
                {"pattern": "retry", "params": {"maxAttempts": upper(library, "retry", "maxAttempts")}}]
    if library == "tenacity":
        return [{"pattern": "retry", "params": {"stop_after_attempt": upper(library, "retry", "stop_after_attempt"),
                                                "wait": "none"}}]
    raise AssertionError(library)


LIGHT = {   # the same patterns at their smallest: the service's own growth from building instances at all
    "resilience4j": [{"pattern": "circuit_breaker", "params": {"slidingWindowSize": 1, "minimumNumberOfCalls": 1,
                                                               "permittedNumberOfCallsInHalfOpenState": 1,
                                                               "waitDurationInOpenState": 1}}],
    "failsafe": [{"pattern": "circuit_breaker", "params": {"delay": 1}},
                 {"pattern": "adaptive_limiter", "params": {"baselineWindowAge": 1, "correlationWindowSize": 1}}],
    "gobreaker": [{"pattern": "circuit_breaker", "params": {}}],
    "opossum": [{"pattern": "circuit_breaker", "params": {}}],
    "cockatiel": [{"pattern": "bulkhead", "params": {"limit": 1}}, {"pattern": "retry", "params": {}}],
    "tenacity": [{"pattern": "retry", "params": {"stop_after_attempt": 1, "wait": "none"}}],
}


def job(strategy: list[dict], key: str) -> dict:
    return {"strategy": strategy, "target_url": f"http://127.0.0.1:{CLOSED_PORT}/", "successes": 1, "max_requests": 5,
            "max_duration_ms": 100, "share": "client", "instance": key, "vu": 1}


def live_heap_bytes(pid: int) -> int:
    """Bytes of live objects in a JVM after a full collection (jcmd's class histogram forces one)."""
    histogram = subprocess.run(["jcmd", str(pid), "GC.class_histogram"], capture_output=True, text=True,
                               timeout=60, check=True).stdout
    return int(next(line for line in histogram.splitlines() if line.strip().startswith("Total")).split()[2])


def held_mib(library: str, pid: int) -> float:
    """What the service holds: live heap for the JVM (its resident size also counts the collector's
    headroom, which grows with what was ever allocated), resident memory for the others."""
    if library == "resilience4j":
        return live_heap_bytes(pid) / 2**20
    time.sleep(0.5)                    # a Go or V8 collection after the last job
    return rss_mb(pid)


@pytest.mark.parametrize("library", LIGHT)
def test_no_accepted_value_makes_a_pattern_instance_hold_more_than_the_stated_memory(library):
    process, url = start_client(PROFILES[library], CLOSED_PORT)
    try:
        for i in range(INSTANCES):                          # the service warm, the light instances built
            assert post(url, "/run", job(LIGHT[library], f"light-{i}"))[0] == 200
        before = held_mib(library, process.pid)
        for i in range(INSTANCES):
            status, reply = post(url, "/run", job(heavy(library), f"heavy-{i}"))
            assert status == 200, reply
        per_instance = (held_mib(library, process.pid) - before) / INSTANCES
        assert per_instance <= MIB_PER_INSTANCE, f"{library}: {per_instance:.1f} MiB per instance"
        assert process.poll() is None
    finally:
        process.terminate()
        process.wait(timeout=10)
