"""An open-loop round's send times (rbl/runner/load_schedule.py): rates, profiles and arrivals."""

from __future__ import annotations

import pytest

from rbl.runner.load_schedule import NS, expected_requests, rate_function, send_offsets
from rbl.plan_records import Load


def load(rate, duration=10, arrivals="constant", profile=None):
    return Load.from_record({"kind": "open", "rate": rate, "arrivals": arrivals, "duration_s": duration, "warmup_s": 0,
                             "profile": profile or {"kind": "constant"}, "timeout_s": 10, "window_s": 5, "slo_ms": 100})


def test_a_constant_rate_sends_evenly_spaced_requests_for_the_duration():
    offsets = list(send_offsets(load({"rps": 50}, duration=2), None, "s"))
    assert len(offsets) == 100
    assert offsets[0] == 0 and offsets[-1] < 2 * NS
    gaps = {b - a for a, b in zip(offsets, offsets[1:])}
    assert max(gaps) - min(gaps) <= 1                  # 20 ms apart, to the rounding of a nanosecond


def test_a_share_of_capacity_needs_the_capacity_and_scales_with_it():
    with pytest.raises(ValueError, match="capacity"):
        list(send_offsets(load({"share": 1.2}), None, "s"))
    assert len(list(send_offsets(load({"share": 1.2}, duration=5), 100, "s"))) == 600


def test_spikes_run_at_the_peak_in_the_last_part_of_every_period():
    spikes = {"kind": "spikes", "peak": {"rps": 300}, "period_s": 10, "length_s": 2}
    rate_at, highest = rate_function(load({"rps": 100}, duration=30, profile=spikes), None)
    assert highest == 300
    assert [rate_at(t) for t in (0, 7.9, 8.0, 9.9, 10.0, 18.5, 25)] == [100, 100, 300, 300, 100, 300, 100]
    offsets = list(send_offsets(load({"rps": 100}, duration=30, profile=spikes), None, "s"))
    in_spikes = sum(1 for o in offsets if (o / NS) % 10 >= 8)
    assert in_spikes == pytest.approx(3 * 2 * 300, abs=3)
    assert len(offsets) == pytest.approx(3 * (8 * 100 + 2 * 300), abs=3)


def test_steps_climb_evenly_from_the_rate_to_the_peak():
    steps = {"kind": "steps", "peak": {"share": 1.4}, "period_s": 10}
    rate_at, _ = rate_function(load({"share": 0.6}, duration=50, profile=steps), 100)
    assert [round(rate_at(t)) for t in (0, 10, 20, 30, 45)] == [60, 80, 100, 120, 140]


def test_a_ramp_is_linear_from_the_rate_to_the_peak():
    ramp = {"kind": "ramp", "peak": {"rps": 200}}
    rate_at, _ = rate_function(load({"rps": 100}, duration=10, profile=ramp), None)
    assert (rate_at(0), rate_at(5), rate_at(10)) == (100, 150, 200)
    assert expected_requests(load({"rps": 100}, duration=10, profile=ramp), None) == pytest.approx(1500, rel=1e-3)


def test_poisson_arrivals_are_seeded_by_scenario_and_round_and_have_the_rate():
    poisson = load({"rps": 200}, duration=20, arrivals="poisson")
    first = list(send_offsets(poisson, None, "abc/1"))
    assert first == list(send_offsets(poisson, None, "abc/1"))
    assert first != list(send_offsets(poisson, None, "abc/2"))
    assert len(first) == pytest.approx(4000, rel=0.06)              # +-5 sigma of a Poisson count
    gaps = [b - a for a, b in zip(first, first[1:])]
    assert max(gaps) > 3 * NS / 200 and min(gaps) < NS / 2000       # exponential, not even


def test_poisson_arrivals_follow_a_profile_by_thinning():
    spikes = {"kind": "spikes", "peak": {"rps": 400}, "period_s": 10, "length_s": 5}
    offsets = list(send_offsets(load({"rps": 100}, duration=40, arrivals="poisson", profile=spikes), None, "x"))
    base = sum(1 for o in offsets if (o / NS) % 10 < 5)
    peak = len(offsets) - base
    assert base == pytest.approx(2000, rel=0.12) and peak == pytest.approx(8000, rel=0.06)


# -- what one round may ask for (rbl/plan_records.py) --------------------------------------------------
def test_a_round_beyond_the_bounds_fails_once_its_capacity_is_known(tmp_path):
    """A share of a calibrated capacity cannot be bounded at compile time: the runner refuses the round
    (before: 100x a capacity of 10^6 for 30 s built the schedule as a Python list)."""
    from types import SimpleNamespace
    from rbl.plan_records import ClientKind
    from rbl.runner.backend import RoundFailed
    from rbl.runner.open_loop import OpenLoopDriver
    driver = OpenLoopDriver(tmp_path / "rbl-load", 1_000_000, tmp_path, 1, lambda library: None)
    setup = SimpleNamespace(scenario={"id": "s1"}, round_number=1, client_kind=ClientKind.MESH,
                            load=load({"share": 100.0}, duration=30), target_url="http://127.0.0.1:1/",
                            entry_url="http://127.0.0.1:1/")
    with pytest.raises(RoundFailed, match="100,000,000 req/s for 30 s is 3,000,000,000 requests in a round, more than"):
        driver.start(setup)
    assert not (tmp_path / "requests").exists()


def test_the_schedule_is_written_as_it_is_drawn_and_refused_beyond_the_bound(tmp_path, monkeypatch):
    import rbl.runner.load_generator as load_generator
    monkeypatch.setattr(load_generator, "MAX_ROUND_REQUESTS", 100_000)
    drawn = send_offsets(load({"rps": 1_000_000}, duration=1), None, "s")
    with pytest.raises(load_generator.LoadFailed, match="more than 100,000 requests"):
        load_generator.LoadRun(tmp_path / "rbl-load", "http://127.0.0.1:1/", drawn, tmp_path / "w", 1.0, 1.0)
    with pytest.raises(load_generator.LoadFailed, match="empty"):
        load_generator.LoadRun(tmp_path / "rbl-load", "http://127.0.0.1:1/", iter(()), tmp_path / "w", 1.0, 1.0)


def test_a_steps_profile_holds_no_list_of_its_steps():
    """Before: `load.period = 1ns` with steps built a list of duration/period levels (3 GB in 20 s)."""
    import tracemalloc
    steps = {"kind": "steps", "peak": {"rps": 300}, "period_s": 1e-6}
    tracemalloc.start()
    rate_at, highest = rate_function(load({"rps": 100}, duration=10, profile=steps), None)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1 << 20 and highest == 300 and rate_at(0) == 100 and rate_at(10) == 300
