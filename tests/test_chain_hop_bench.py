"""bench/chain_hop.py in its quick mode, with wrk when it is installed and with its Python load: it starts
the three setups on real rbl-chain processes and Envoys, prints each with positive figures, exits 0
and leaves nothing running. Quick mode's numbers are not the benchmark; only their shape is checked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "bench" / "chain_hop.py"
SETUPS = ("(a) leaf", "(b) Envoy -> leaf", "(c) 3-tier chain")


def still_running(marker: str) -> list[str]:
    """Command lines of processes that name `marker` (the bench's directory holds their configurations)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                command = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in command:
                found.append(command)
    return found


@pytest.mark.parametrize("load", ["wrk if installed", "python"])
def test_quick_mode_prints_the_three_setups(tmp_path: Path, load: str) -> None:
    args = [sys.executable, str(SCRIPT), "--quick", "--seconds", "1", "--repeat", "1"]
    if load == "python":
        args += ["--wrk", ""]                    # as on a machine without wrk
    # the bench's directory under tmp_path, so its processes can be told from anyone else's
    done = subprocess.run(args, capture_output=True, text=True, timeout=180, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "quick mode: a smoke run, not the benchmark" in out
    if load == "python":
        assert "a Python keep-alive loop" in out
    for setup in SETUPS:
        row = re.search(rf"^  {re.escape(setup)}\s+([0-9.]+)\s+([0-9.]+)\s+", out, re.MULTILINE)
        assert row is not None, f"no row for {setup}:\n{out}"
        assert float(row[1]) > 0 and float(row[2]) > 0, row[0]
    hop = re.search(r"one hop\s+\(\(c\) - \(a\)\) / 2\s+(-?[0-9.]+) us", out)
    envoy = re.search(r"one Envoy's forwarding\s+\(b\) - \(a\)\s+(-?[0-9.]+) us", out)
    assert hop and envoy, out
    assert "goal: a hop" in out
    assert still_running(str(tmp_path)) == []
