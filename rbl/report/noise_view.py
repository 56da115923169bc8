"""The report's "noise floor" section: the verdict (in one line at the top, in full in its section),
the table of A/A groups and a small figure of how far cells that behave alike fall from each other
(rbl/report/noise.py)."""

from __future__ import annotations

from pathlib import Path

from .labels import METRIC_TITLES
from .noise import SHARED_MACHINE_CORES, TOO_NOISY, NoiseCheck, allowed_significant
from .stats import FEW_ROUNDS

# The same advice in a clause, for the one-line verdict in the terminal.
SHORT_ADVICE = "more rounds (`--rounds`), or `order = randomized` or `order = blocked`"
ADVICE = ("add rounds (`--rounds`), or run in `order = randomized` or `order = blocked` so that drift "
          "and neighbours spread over every configuration instead of landing on some")


def percent(fraction: float | None) -> str:
    return "-" if fraction is None else f"{fraction * 100:.3g}%"


def verdict(check: NoiseCheck) -> dict:
    """{"level": ok | warning | unknown, "headline": ..., "details": [...]} for the top of the report."""
    if not check.grouping.groups:
        return unmeasured(check, "The plan has no cells that must behave alike (A/A cells come from a 0% fault "
                                 "rate or short delay faults).")
    if not check.measurable:
        return unmeasured(check, "The A/A cells have too few rounds or observations for an interval (at least "
                                 "2 rounds).")
    worst = check.worst_metric
    title = METRIC_TITLES.get(worst.metric, worst.metric)
    unit = " ms" if "(ms)" in title else ""
    headline = (f"Noise floor: {percent(check.floor)} ({title}, about {worst.floor_absolute:.3g}{unit}): differences "
                f"between cells smaller than this are not resolved by this run.")
    details = []
    for metric in check.metrics.values():
        if metric.floor is None:
            continue
        largest = metric.largest
        allowed = allowed_significant(len(metric.judged))
        chance = ("more than" if metric.excess else "within") + f" the {allowed} that 95% intervals give by chance"
        details.append(f"{METRIC_TITLES.get(metric.metric, metric.metric)}: {len(metric.judged)} A/A pairs, "
                       f"resolvable difference {percent(metric.resolvable)}, largest A/A difference "
                       f"{percent(largest.relative)}, {len(metric.significant)} significant ({chance}).")
    if check.few_rounds:
        details.append(f"{check.few_rounds} A/A cells have {FEW_ROUNDS} rounds or fewer: a bootstrap over so few "
                       "rounds cannot see how much a round's conditions move the median"
                       + ("; their intervals are t-intervals on the round medians, which widen as they should."
                          if check.method != "bootstrap" else " (the intervals asked for are bootstrap ones)."))
    for metric in check.metrics.values():
        if metric.cell_effects is not None:
            details.append(cell_effects_line(metric))
    if check.other_work is not None:
        details.append(other_work_line(check.other_work))
    if not check.passed:
        reasons = ([shared_machine_reason(check)] if check.shared_machine else []) \
            + ([failure_reason(check)] if not check.cells_passed else [])
        consequence = ("The intervals understate this run's variance" if not check.cells_passed
                       else "Its numbers hold for a machine under that load, not for the libraries alone")
        advice = ADVICE + ("; give the run a machine of its own (stop the other work)" if check.shared_machine else "")
        return {"level": "warning",
                "headline": (f"A/A check failed: {' '.join(reasons)} {consequence}; do not read differences of "
                             f"about {percent(check.floor)} or less as effects. {headline}"),
                "details": details + [f"What to do: {advice}."]}
    if check.too_noisy:
        return {"level": "warning",
                "headline": (f"A/A check passed, but too noisy to compare: the intervals hold, yet this run cannot "
                             f"tell cells apart by less than {percent(check.floor)} of their value (at least "
                             f"{percent(TOO_NOISY)} is too noisy). {headline}"),
                "details": details + [f"What to do: {ADVICE}; run on a quieter machine."]}
    return {"level": "ok", "headline": f"A/A check passed. {headline}", "details": details}


def summary(check: NoiseCheck) -> dict:
    """The verdict in one line for the top of the report and the terminal: {"status": pass | noisy |
    fail | not measured | shared (not measured, beside other work), "line": ..., "why": short reasons
    a failed or shared check gives (else []), "advice": what to do ('' when nothing is to be done)}.
    The full verdict is `verdict`."""
    if check.floor is None:
        # what the plan lacks is not the machine's fault: said apart from the other work beside the run
        why = ("the plan has no cells that must behave alike" if not check.grouping.groups else
               "its cells have too few rounds for an interval")
        line = f"A/A check: not measured, no noise floor ({why})."
        if check.shared_machine:
            return {"status": "shared", "line": line[:-1] + "; and this run shared its machine.",
                    "why": [_short_shared(check)], "advice": "give the run a machine of its own"}
        return {"status": "not measured", "line": line, "why": [], "advice": ""}
    worst = check.worst_metric
    title = METRIC_TITLES.get(worst.metric, worst.metric)
    unit = " ms" if "(ms)" in title else ""
    floor = (f"noise floor {percent(check.floor)} ({title.removesuffix(' (ms)')}, about "
             f"{worst.floor_absolute:.3g}{unit})")
    if not check.passed:
        why = ([_short_shared(check)] if check.shared_machine else []) + _short_cells(check)
        return {"status": "fail", "line": f"A/A check: fail, {floor}: differences of about {percent(check.floor)} or "
                                          "less are not effects.",
                "why": why, "advice": SHORT_ADVICE + ("; give the run a machine of its own" if check.shared_machine
                                                      else "")}
    if check.too_noisy:
        return {"status": "noisy", "line": f"A/A check: noisy, {floor}: the intervals hold, but cells closer than "
                                           f"that cannot be told apart.", "why": [], "advice": SHORT_ADVICE}
    return {"status": "pass", "line": f"A/A check: pass, {floor}: smaller differences between cells are not "
                                      "resolved by this run.", "why": [], "advice": ""}


def _short_shared(check: NoiseCheck) -> str:
    work = check.other_work
    return (f"this run shared its machine (other processes used {work['otherCores']:.2g} of its {work['cores']} "
            "cores while the rounds ran)")


def _short_cells(check: NoiseCheck) -> list[str]:
    """Why the cells failed the check, in a clause each (failure_reason says it at length)."""
    out = []
    drifted = [m for m in check.metrics.values() if m.drifted]
    if drifted:
        effects = max((m.cell_effects for m in drifted), key=lambda e: e.ratio)
        out.append(f"cells that cannot differ in behaviour differ {effects.ratio:.1f} times more than their rounds "
                   f"vary (p = {effects.p_value:.2g}): conditions changed during the run")
    excess = [m for m in check.metrics.values() if m.excess]
    if excess:
        metric = excess[0]
        out.append(f"{len(metric.significant)} of {len(metric.judged)} A/A pairs differ significantly "
                   f"({METRIC_TITLES.get(metric.metric, metric.metric).removesuffix(' (ms)')}; chance gives at most "
                   f"{allowed_significant(len(metric.judged))})")
    return out


def unmeasured(check: NoiseCheck, why: str) -> dict:
    """The verdict without A/A cells to judge: what the other work beside the run says still stands."""
    headline = f"Noise floor: not measured. {why}"
    if check.shared_machine:
        return {"level": "warning", "headline": f"{headline} But {shared_machine_reason(check)}",
                "details": ["What to do: give the run a machine of its own (stop the other work)."]}
    return {"level": "unknown", "headline": headline,
            "details": [other_work_line(check.other_work)] if check.other_work else []}


def shared_machine_reason(check: NoiseCheck) -> str:
    work = check.other_work
    spread = max((m.cell_effects.round_spread for m in check.metrics.values() if m.cell_effects is not None),
                 default=None)
    moved = "" if spread is None else f"; a cell's median moved by about {percent(spread)} from round to round"
    return (f"this run shared its machine: other processes used {work['otherCores']:.2g} of its {work['cores']} "
            f"cores on average while the rounds ran (at most {work['otherCoresPeak']:.2g}), so its cells measured "
            f"their neighbours as well as the libraries{moved}.")


def other_work_line(work: dict) -> str:
    return (f"Other work on the machine while the rounds ran: {work['otherCores']:.2g} of {work['cores']} cores on "
            f"average, at most {work['otherCoresPeak']:.2g} over {work['seconds']:g} s (a run counts as sharing its "
            f"machine from {SHARED_MACHINE_CORES:g} cores).")


def failure_reason(check: NoiseCheck) -> str:
    """Why the check failed, in the order a reader can act on: cells apart by more than their
    rounds vary (conditions changed during the run), then too many significant pairs."""
    drifted = [m for m in check.metrics.values() if m.drifted]
    if drifted:
        effects = max((m.cell_effects for m in drifted), key=lambda e: e.ratio)
        order = check.order
        where = ("every round of a cell ran back to back (order = sequential), so a change landed on some "
                 "cells only" if order == "sequential" else f"even in order = {order}")
        return (f"cells that cannot differ in behaviour differ {effects.ratio:.1f} times more than their own rounds "
                f"vary ({METRIC_TITLES.get(effects.metric, effects.metric)}, p = {effects.p_value:.2g}). The "
                f"machine's conditions changed during the run (drift, or other work on the machine), and "
                f"{where}.")
    significant = sum(len(m.significant) for m in check.metrics.values())
    judged = sum(len(m.judged) for m in check.metrics.values())
    return (f"{significant} of {judged} comparisons between cells that cannot differ in behaviour are "
            f"significant (too few rounds, drift over the run, or other work on the machine).")


def cell_effects_line(metric) -> str:
    effects = metric.cell_effects
    verdict_text = ("more than their rounds vary" if effects.significant
                    else "no more than their rounds vary")
    return (f"{METRIC_TITLES.get(metric.metric, metric.metric)}: {effects.cells} alike cells differ {verdict_text} "
            f"(F = {effects.ratio:.2f} on {effects.df_between} and {effects.df_within} degrees of freedom, "
            f"p = {effects.p_value:.2g}; a round's median moves by about {percent(effects.round_spread)}).")


def rows(check: NoiseCheck, labels: dict[str, str]) -> list[dict]:
    """One row per A/A pair and metric for the section's table (labels: scenario id -> label)."""
    out = []
    for metric in check.metrics.values():
        for pair in metric.pairs:
            r = pair.result
            out.append({"metric": METRIC_TITLES.get(metric.metric, metric.metric),
                        "group": f"{pair.group.library}, {pair.group.users} users, {pair.group.fault}",
                        "a": labels.get(pair.a, pair.a), "b": labels.get(pair.b, pair.b),
                        "medians": "-" if r.a.median is None or r.b.median is None
                        else f"{r.a.median:.4g} / {r.b.median:.4g}",
                        "difference": "-" if r.difference is None else f"{r.difference:+.3g}",
                        "interval": "-" if r.low is None else f"[{r.low:.3g}, {r.high:.3g}]",
                        "relative": percent(pair.relative), "method": pair.method,
                        "significant": pair.significant})
    return out


def cell_effects_rows(check: NoiseCheck) -> list[dict]:
    """One row per metric of the between-cell analysis (rbl/report/cell_effects.py)."""
    out = []
    for metric in check.metrics.values():
        effects = metric.cell_effects
        if effects is not None:
            out.append({"metric": METRIC_TITLES.get(metric.metric, metric.metric), "cells": effects.cells,
                        "F": f"{effects.ratio:.3g}", "df": f"{effects.df_between}, {effects.df_within}",
                        "p": f"{effects.p_value:.2g}", "spread": percent(effects.round_spread),
                        "significant": effects.significant})
    return out


def build_noise_figure(check: NoiseCheck):
    """Per metric, each A/A pair's difference as a percentage of its scale with its interval; the
    band is the noise floor. Points outside 0's reach are the pairs that differ significantly."""
    from .chart.model import Chart, Ticks

    measured = [m for m in check.metrics.values() if m.judged]
    columns = min(3, max(1, len(measured)))          # at most three across: legible at 1280 px
    rows = -(-len(measured) // columns)
    figure = Chart(3.2 * columns, 2.6 * max(1, rows))
    figure.grid(max(1, rows), columns)
    for ax in figure.panels[len(measured):]:
        ax.visible = False
    for ax, metric in zip(figure.panels, measured):
        pairs = metric.judged
        for y, pair in enumerate(pairs):
            r, scale = pair.result, pair.scale
            colour = "#d55e00" if pair.significant else "#0072b2"
            ax.interval([r.low / scale * 100], [r.high / scale * 100], [y], colour, width=1.2)
            ax.points([r.difference / scale * 100], [y], colour, marker="o", size=3)
        ax.span(-metric.floor * 100, metric.floor * 100, fill="#999999", opacity=0.15)
        ax.rule("x", 0)
        ax.yticks = Ticks([], [])
        ax.invert_y = True                 # top to bottom in the order of the section's table
        ax.xlabel = "A/A difference, % of the median"
        ax.title = (f"{METRIC_TITLES.get(metric.metric, metric.metric)}\n{len(metric.significant)} of "
                    f"{len(pairs)} pairs significant")
    return figure


def write_noise_figure(check: NoiseCheck, out_dir: Path) -> tuple[Path, dict] | None:
    """noise-floor.svg and what the report says of it (rbl/report/chart/model.py facts)."""
    if not check.measurable:
        return None
    from .figures import figure_facts, write_figure
    figure = build_noise_figure(check)
    (path,) = write_figure(figure, out_dir, "noise-floor")
    return path, figure_facts(figure)
