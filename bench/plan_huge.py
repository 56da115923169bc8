"""Benchmark: `rbl plan` on a space of >= 10^12 scenarios must take < 1 s of process time.

Runs the real CLI in a subprocess and reports its user+system CPU time (resource.getrusage)."""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
from pathlib import Path

SPEC = """space huge {
  rounds = 10
  users in 1..1000
  fault.rate in 0%..100% step 0.1%
  client resilience4j.retry {
    maxAttempts in 1..1000
    initialIntervalMillis in 1ms..1000ms step 1ms
  }
  client pybreaker.circuit_breaker {
    fail_max in 1..100
    reset_timeout in 1ms..10000ms step 1ms
  }
}
"""
TARGET_SECONDS = 1.0


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "huge.rbl"
        spec.write_text(SPEC)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run([sys.executable, "-m", "rbl", "plan", str(spec)], capture_output=True, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        print(done.stderr)
        return 1
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    size_line = next(line for line in done.stdout.splitlines() if line.startswith("Size(S)"))
    size = int(size_line.split("=")[-1].split()[0])
    print(size_line)
    print(f"scenarios: {size:.3e} (>= 1e12: {size >= 10**12})")
    print(f"process time of `rbl plan`: {cpu:.3f} s (target < {TARGET_SECONDS} s): "
          f"{'PASS' if cpu < TARGET_SECONDS and size >= 10**12 else 'FAIL'}")
    return 0 if cpu < TARGET_SECONDS and size >= 10**12 else 1


if __name__ == "__main__":
    sys.exit(main())
