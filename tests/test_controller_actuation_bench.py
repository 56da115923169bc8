"""bench/controller_actuation.py with a few switches: on the wheel's real Envoy, a pool limit put in force
through the watched files and through the runtime override each refuses the requests over it, and the
bench leaves its Envoy stopped. Its timings are the bench's to report, not checked here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_both_actuators_act_on_the_sidecar_s_pool():
    done = subprocess.run([sys.executable, str(REPO / "bench" / "controller_actuation.py"), "--switches", "4"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "both ways act on the pool" in done.stdout
    assert re.search(r"refused 3 \(files\), 3 \(runtime\); limit 1024: refused 0", done.stdout), done.stdout
    for way in ("files", "runtime"):
        assert re.search(rf"{way}\s+median\s+[0-9.]+ ms", done.stdout), done.stdout
