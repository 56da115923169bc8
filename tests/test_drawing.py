"""The report's figures drawn side by side (rbl/report/drawing.py): in forked workers, results in the
plans' order, a plan's error raised here, one figure drawn in this process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rbl.report.drawing import Drawing
from rbl.report.figures import subplots


def plan(name: str, seen: Path, fail: bool = False):
    def make():
        (seen / f"{name}.pid").write_text(str(os.getpid()))         # who drew it
        if fail:
            raise ValueError(f"{name} cannot be drawn")
        figure, grid = subplots(1, 1, figsize=(2, 2), squeeze=False)
        grid[0][0].plot([0, 1], [0, 1])
        return f"title {name}", name, figure
    return make


def test_figures_are_drawn_by_workers_and_returned_in_order(tmp_path):
    results = Drawing([plan(f"f{i}", tmp_path) for i in range(5)], tmp_path / "out").results()
    assert [title for title, _, _ in results] == [f"title f{i}" for i in range(5)]
    for i, (_, paths, facts) in enumerate(results):
        assert [p.name for p in paths] == [f"f{i}.png", f"f{i}.svg"]
        assert facts["panels"] == [{"x_label": "", "x_scale": "linear", "x_values": 2}] and facts["width_in"] == 2
        assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and b"<svg" in paths[1].read_bytes()
    drawers = {int(p.read_text()) for p in tmp_path.glob("*.pid")}
    if (os.cpu_count() or 1) > 1:
        # the last plan is drawn here once this process's own work is done, the others by workers
        assert int((tmp_path / "f4.pid").read_text()) == os.getpid()
        workers = drawers - {os.getpid()}
        assert {int((tmp_path / f"f{i}.pid").read_text()) for i in range(4)} == workers
        assert 1 <= len(workers) <= os.cpu_count()


def test_a_plans_error_is_raised_here(tmp_path):
    drawing = Drawing([plan("good", tmp_path), plan("bad", tmp_path, fail=True), plan("later", tmp_path)],
                      tmp_path / "out")
    with pytest.raises(ValueError, match="bad cannot be drawn"):
        drawing.results()
    drawing.close()                                                  # again: nothing left to stop


def test_one_figure_is_drawn_in_this_process(tmp_path):
    ((title, paths, _),) = Drawing([plan("only", tmp_path)], tmp_path / "out").results()
    assert title == "title only" and paths[0].is_file()
    assert int((tmp_path / "only.pid").read_text()) == os.getpid()
