"""A stored capacity measured long ago is named as such when it is used (rbl/runner/capacity.py):
the same machine drifts, and every rate given as a share of the capacity with it."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from rbl.runner.capacity import STALE_AFTER_DAYS, machine_fingerprint, stale_note, target_key

from .conftest import run_rbl

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=timezone.utc)
SPEC = """space stale {
  load = open
  load.rate = 50%
  target = "/factorial/1234"
  client istio.circuit_breaker { http2MaxRequests = 4 }
}
"""


def _at(days: float) -> str:
    return (NOW - timedelta(days=days)).isoformat(timespec="seconds")


def test_a_capacity_older_than_the_limit_gets_a_note_and_a_recent_one_none():
    assert stale_note({"measured_at": _at(STALE_AFTER_DAYS - 1)}, NOW) is None
    note = stale_note({"measured_at": _at(45)}, NOW)
    assert note is not None and "measured 45 days ago" in note and "rbl calibrate SPEC --force" in note
    assert "45 days" in stale_note({"measured_at": _at(45).replace("+00:00", "Z")}, NOW)
    assert stale_note({"measured_at": "yesterday"}, NOW) is None and stale_note({}, NOW) is None


def test_calibrate_says_a_stored_capacity_is_old(tmp_path):
    """`rbl calibrate` on a stored entry of 40 days ago prints it, and the note on stderr."""
    cache = tmp_path / "cache"
    (cache / "rbl").mkdir(parents=True)
    old = (datetime.now(timezone.utc) - timedelta(days=40)).isoformat(timespec="seconds")
    record = {"capacity_rps": 123.0, "slo_ms": 100.0, "measured_at": old}
    target = {"path": "/factorial/1234", "replicas": 1, "cpus": None}
    entries = {json.dumps({"machine": machine_fingerprint(), "target": target_key(target, proxy, 100.0)},
                          sort_keys=True): record for proxy in ("envoy", "builtin")}
    (cache / "rbl" / "capacity.json").write_text(json.dumps(entries))
    (tmp_path / "stale.rbl").write_text(SPEC)
    done = run_rbl("calibrate", "stale.rbl", cwd=tmp_path, env={"XDG_CACHE_HOME": str(cache)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "123"
    assert "measured 40 days ago" in " ".join(done.stderr.split()), done.stderr
