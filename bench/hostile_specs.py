"""Benchmark: `rbl check` on hostile specs of 100 KB, 1 MB and 10 MB grows at most linearly.

Each kind of hostile input is generated at three sizes and checked by the real CLI in its own
process; the CPU time (user + system: the development machines are shared, so wall time is
noise) and peak RSS of that process are measured with os.wait4. The baseline (a tiny valid
spec: interpreter start-up and imports) is subtracted before taking the ratios 1MB/100KB and
10MB/1MB, which are ~10 for linear growth and ~100 for quadratic growth.

    python3 bench/hostile_specs.py [--sizes 100000,1000000,10000000] [--kinds a,b]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HEAD = ("space hostile {\n  users in [10]\n  fault.rate in [0%]\n"
        "  client tenacity.retry { stop_after_attempt = 3 }\n")
TAIL = "\n}\n"


def _fill(unit: str, size: int, prefix: str = "", suffix: str = "", sep: str = "") -> str:
    """prefix + unit (sep unit)* + suffix, about `size` characters in all."""
    count = max(1, (size - len(HEAD) - len(prefix) - len(suffix)) // (len(unit) + len(sep)))
    return HEAD + prefix + sep.join([unit] * count) + suffix + TAIL


def _distinct(size: int) -> int:
    """How many of 1, 2, 3, ... written ", "-separated take about `size` characters."""
    count, total, width = 1, 0, 1
    while total < size:
        step = min(10 ** width - count, (size - total) // (width + 2) + 1)
        count, total = count + step, total + step * (width + 2)
        width = len(str(count))
    return count


# kind -> spec text of about `size` bytes
KINDS = {
    # 35,000 duplicates made W0302 quadratic (each quoted the whole line)
    "duplicate_users": lambda n: _fill("10", n, "  users in [", "]", sep=", ").replace("  users in [10]\n", "", 1),
    # every diagnostic re-split the whole file
    "unknown_settings": lambda n: _fill("  bogus_setting = 1\n", n),
    "blank_lines": lambda n: _fill("\n", n),
    "comment_lines": lambda n: _fill("  // a comment\n", n),
    "long_string": lambda n: _fill("a", n, '  target = "/', '"'),
    "long_comment": lambda n: _fill("x", n, "  // "),
    "long_sum": lambda n: _fill("1", n, "  assert size >= ", sep=" + "),
    "long_product": lambda n: _fill("1", n, "  assert size >= ", sep=" * "),
    "deep_brackets": lambda n: _fill("(", n, "  assert size >= "),
    "many_clients": lambda n: _fill("  client tenacity.retry { stop_after_attempt = 3 }\n"
                                    "  client pybreaker.circuit_breaker { fail_max = 2 }\n", n),
    "long_list_of_strings": lambda n: _fill('"x"', n, "  target in [", "]", sep=", "),
    "unknown_characters": lambda n: _fill("  x = 1 @\n", n),
    # distinct values: nothing is shared between them
    "distinct_users": lambda n: HEAD.replace("  users in [10]\n", "") + "  users in ["
                                + ", ".join(map(str, range(1, _distinct(n)))) + "]" + TAIL,
    # a syntax error on the last line: the Lark parser reports it, after the statements before it
    "late_syntax_error": lambda n: _fill("  bogus_setting = 1\n", n, suffix="  oops = = 1\n"),
    "late_error_in_a_list": lambda n: _fill("10", n, "  users in [", ", x y]", sep=", ")
                                      .replace("  users in [10]\n", "", 1),
    # a string escape rbl does not know, many times over
    "unknown_escapes": lambda n: _fill('"\\u0000"', n, "  target in [", "]", sep=", "),
}


# Runs `rbl check` and, at exit, writes the process's own peak RSS (VmHWM, in KB): rusage's
# ru_maxrss would also count the RSS of this process at spawn time (it holds 10 MB specs).
_WRAPPER = """
import atexit, re, sys
PEAK = sys.argv[2]
def _peak():
    status = open("/proc/self/status").read()
    open(PEAK, "w").write(re.search(r"VmHWM:\\s+(\\d+)", status).group(1))
atexit.register(_peak)
sys.argv = ["rbl", "check", sys.argv[1]]
from rbl.cli import main
main()
"""


def measure(path: Path) -> tuple[float, float, int, int]:
    """(CPU seconds, peak RSS in MB, exit code, bytes of stderr) of `rbl check path` in a fresh
    process."""
    stderr, peak = path.with_suffix(".stderr"), path.with_suffix(".peak")
    with stderr.open("wb") as err:
        process = subprocess.Popen([sys.executable, "-c", _WRAPPER, str(path), str(peak)],
                                   stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
    output, rss_kb = stderr.stat().st_size, int(peak.read_text())
    stderr.unlink()
    peak.unlink()
    seconds = usage.ru_utime + usage.ru_stime
    return seconds, rss_kb / 1024, os.waitstatus_to_exitcode(status), output


def _ratio(big: float, small: float) -> str:
    return f"{big / small:6.1f}" if small > 0.005 else "   n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000,10000000")
    parser.add_argument("--kinds", default=",".join(KINDS))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp, "base.rbl")
        base.write_text(HEAD + TAIL, encoding="utf-8")
        base_time, base_rss, _, _ = min(measure(base) for _ in range(3))
        print(f"baseline (tiny spec): {base_time:.2f} s CPU, {base_rss:.0f} MB; net = measured - baseline")
        print(f"{'kind':22} {'size':>9} {'exit':>4} {'stderr':>7} {'CPU s':>7} {'net s':>7} {'peak MB':>8} {'net MB':>7}")
        for kind in args.kinds.split(","):
            rows = []
            for size in sizes:
                path = Path(tmp, f"{kind}-{size}.rbl")
                path.write_text(KINDS[kind](size), encoding="utf-8")
                seconds, rss, code, output = measure(path)
                net_time, net_rss = max(seconds - base_time, 0.0), max(rss - base_rss, 0.0)
                rows.append((net_time, net_rss))
                print(f"{kind:22} {path.stat().st_size:>9} {code:>4} {output:>7} {seconds:7.2f} {net_time:7.2f} "
                      f"{rss:8.0f} {net_rss:7.0f}")
                path.unlink()
            ratios = [f"{sizes[i + 1] // sizes[i]}x size: time {_ratio(rows[i + 1][0], rows[i][0])}, "
                      f"memory {_ratio(rows[i + 1][1], rows[i][1])}" for i in range(len(rows) - 1)]
            print(f"{'':22} ratios (net) " + "; ".join(ratios))


if __name__ == "__main__":
    main()
