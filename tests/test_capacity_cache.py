"""The capacity cache (~/.cache/rbl/capacity.json, rbl/runner/capacity_cache.py) read as untrusted
input and written under a lock: every stored value that once crashed, hung or misled a run or
`rbl calibrate`, and two calibrations storing at once."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from rbl.runner.capacity import MAX_RPS, _key, machine_fingerprint, store_capacity, stored_capacity, target_key

TARGET = target_key({"path": "/status/200"}, "builtin", 100.0)
GOOD = {"capacity_rps": 400.0, "slo_ms": 100.0, "machine": {}, "measured_at": "2025-01-31T12:00:00+00:00",
        "steps": []}


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (tmp_path / "rbl").mkdir()
    return tmp_path / "rbl" / "capacity.json"


def key(target: dict = TARGET) -> str:
    return _key(machine_fingerprint(), target)


def notes() -> tuple[list[str], callable]:
    said: list[str] = []
    return said, said.append


def test_a_good_record_is_read_back(cache):
    said, say = notes()
    store_capacity(TARGET, GOOD, say)
    assert stored_capacity(TARGET, say) == GOOD and said == []


@pytest.mark.parametrize("change, problem", [
    ({"capacity_rps": 1e300}, "capacity_rps 1e+300, not within"),
    ({"capacity_rps": 1e7}, "capacity_rps 10000000.0, not within"),
    ({"capacity_rps": 0}, "capacity_rps 0, not within"),
    ({"capacity_rps": -5}, "capacity_rps -5, not within"),
    ({"capacity_rps": "400"}, "no number capacity_rps"),
    ({"capacity_rps": True}, "no number capacity_rps"),
    ({"slo_ms": 0}, "slo_ms 0, not within"),
    ({"measured_at": None}, "no measured_at"),
    ({"measured_at": "[/bogus]"}, "no measured_at"),
    ({"measured_at": "2025-02-31T12:00:00"}, "no measured_at"),
])
def test_a_record_out_of_bounds_or_incomplete_is_measured_again(cache, change, problem):
    """Before: 1e300 or 1e7 built a gigantic schedule, a missing measured_at was a KeyError (exit 70)
    and "[/bogus]" a rich MarkupError."""
    record = {**GOOD, **change}
    record = {k: v for k, v in record.items() if v is not None}
    cache.write_text(json.dumps({key(): record, "other": GOOD}))
    said, say = notes()
    assert stored_capacity(TARGET, say) is None
    assert len(said) == 1 and problem in said[0] and "measured again" in said[0]
    assert json.loads(cache.read_text())["other"] == GOOD        # the rest of the cache is kept


@pytest.mark.parametrize("text, problem", [
    ('{K: {"capacity_rps": NaN}}', "NaN"),
    ('{K: {"capacity_rps": Infinity}}', "Infinity"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("\xff", "not UTF-8"),
    ("[]", "not a JSON object"),
    ("{", "not JSON"),
])
def test_an_unreadable_cache_is_moved_aside_with_a_note(cache, text, problem):
    """Before: NaN let a run exit 0 with a row no reader accepts, deep nesting was a RecursionError,
    and an unreadable file was replaced by {} (every other entry lost)."""
    cache.write_bytes(text.replace("K", json.dumps(key())).encode() if text != "\xff" else b"\xff")
    before = cache.read_bytes()
    said, say = notes()
    assert stored_capacity(TARGET, say) is None
    (aside,) = cache.parent.glob("capacity.json.unreadable-*")
    assert aside.read_bytes() == before and problem in said[0] and aside.name in said[0]
    store_capacity(TARGET, GOOD, say)
    assert stored_capacity(TARGET, say) == GOOD


def test_a_cache_larger_than_the_bound_is_not_read_whole(cache):
    cache.write_text(json.dumps({"x": "y" * (5 << 20)}))
    said, say = notes()
    assert stored_capacity(TARGET, say) is None and "larger than 4 MB" in said[0]


@pytest.mark.parametrize("kind", ["directory", "fifo", "link", "device"])
def test_a_cache_that_is_not_a_regular_file_is_moved_aside_not_followed(cache, tmp_path, kind):
    """Before: capacity.json as a directory lost a 40-s calibration when it was stored, and a FIFO hung."""
    victim = tmp_path / "victim"
    victim.write_text(json.dumps({key(): GOOD}))
    if kind == "directory":
        cache.mkdir()
    elif kind == "fifo":
        os.mkfifo(cache)
    elif kind == "link":
        cache.symlink_to(victim)
    else:
        cache.symlink_to("/dev/zero") if os.geteuid() else os.mknod(cache, 0o600 | 0o020000, os.makedev(1, 5))
    said, say = notes()
    assert stored_capacity(TARGET, say) is None and "moved aside" in said[0]
    store_capacity(TARGET, GOOD, say)
    assert json.loads(cache.read_text()) == {key(): GOOD} and cache.is_file() and not cache.is_symlink()
    assert victim.read_text() == json.dumps({key(): GOOD})
    assert len(list(cache.parent.glob("capacity.json.unreadable-*"))) == 1


def test_a_bad_record_is_never_stored():
    with pytest.raises(ValueError, match="capacity_rps"):
        store_capacity(TARGET, {**GOOD, "capacity_rps": float("nan")})
    assert MAX_RPS >= GOOD["capacity_rps"]


def _store_many(cache_home: str, worker: int) -> None:
    os.environ["XDG_CACHE_HOME"] = cache_home
    for i in range(25):
        store_capacity(target_key({"path": f"/w{worker}/{i}"}, "builtin", 100.0), GOOD)


def test_calibrations_storing_at_once_lose_no_update(cache):
    """Before: each read the file, added its record and replaced it, so concurrent stores lost updates."""
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_store_many, args=(str(cache.parent.parent), w)) for w in range(6)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(60)
        assert process.exitcode == 0
    assert len(json.loads(cache.read_text())) == 6 * 25
