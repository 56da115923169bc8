"""`rbl plan`'s estimate of what a first run on this machine adds before its rounds: the builds of the
clients and tools it needs that are not cached, and a calibration when its rates are shares of a
capacity none is stored for (rbl/commands/first_run.py)."""

from __future__ import annotations

import json

from rbl.commands.first_run import BUILD_S, CALIBRATION_S

from .conftest import REPO, run_rbl


def plan(tmp_path, example: str, cache) -> tuple[str, dict]:
    env = {"XDG_CACHE_HOME": str(cache)}
    text = run_rbl("plan", str(REPO / "examples" / example), cwd=tmp_path, env=env)
    data = run_rbl("plan", str(REPO / "examples" / example), "--json", cwd=tmp_path, env=env)
    assert text.returncode == 0 and data.returncode == 0, text.stderr + data.stderr
    return text.stdout, json.loads(data.stdout)


def test_an_open_loop_plan_on_a_fresh_machine_adds_its_tools_builds_and_a_calibration(tmp_path):
    text, data = plan(tmp_path, "boutique-cart.rbl", tmp_path / "empty-cache")
    assert data["first_run_seconds"] == BUILD_S["chain"] + BUILD_S["loadgen"] + CALIBRATION_S
    assert "building chain, building loadgen, calibrating the target's capacity (none stored)" in text
    assert "each round its load's duration" in text and "ms per request" not in text
    assert not (tmp_path / "empty-cache").exists()                 # planning builds and stores nothing


def test_a_closed_loop_plan_adds_the_builds_of_its_clients_only(tmp_path):
    text, data = plan(tmp_path, "polyglot.rbl", tmp_path / "empty-cache")
    assert data["first_run_seconds"] == BUILD_S["go"] + BUILD_S["node"] + BUILD_S["resilience4j"]
    assert "calibrat" not in text and "ms per request" in text
    _, python_only = plan(tmp_path, "quickstart.rbl", tmp_path / "empty-cache")
    assert python_only["first_run_seconds"] == 0


def test_a_stored_capacity_is_no_calibration(tmp_path, monkeypatch):
    from rbl.compiler.pipeline import compile_file
    from rbl.compiler.plan import plan_header
    from rbl.runner.capacity import store_capacity, target_key
    from rbl.targets.envoy_binary import envoy_binary
    cache = tmp_path / "cache"
    first = plan(tmp_path, "retry-storm.rbl", cache)[1]["first_run_seconds"]
    header = plan_header(compile_file(REPO / "examples" / "retry-storm.rbl").space)
    key = target_key(header["target"], "envoy" if envoy_binary() else "builtin", 100.0, header["topology"])
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    store_capacity(key, {"capacity_rps": 40.0, "slo_ms": 100.0, "measured_at": "2026-11-27T12:00:00+00:00"})
    assert plan(tmp_path, "retry-storm.rbl", cache)[1]["first_run_seconds"] == first - CALIBRATION_S
