"""The answer alone, for the end of `rbl run --until-resolved` without `--report`: which
configuration to deploy per condition, worked out as `rbl report` does (its resamples and seed, so
both say the same), without the figures and tables that take the report its time."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from .cells import estimate_metrics, load_cells
from .labels import Labeller
from .noise import noise_check
from .recommendation import objective_metrics, objective_of, recommend
from .recommendation_view import print_recommendations, view

RESAMPLES, SEED = 2000, 0          # rbl report's defaults


def print_answer(run_dir: Path, console: Console) -> None:
    header, cells = load_cells(run_dir, [], RESAMPLES, SEED)
    if not any(cell.rounds for cell in cells):
        return
    metrics = objective_metrics(header)
    estimate_metrics(cells, metrics, RESAMPLES, SEED)
    check = noise_check(header, cells, metrics, "auto", RESAMPLES, SEED)
    found = recommend(header, cells, check, "auto", RESAMPLES, SEED)
    print_recommendations(view(found, Labeller(header), objective_of(header), "until_resolved" in header), console)
