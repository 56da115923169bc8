"""The recommendation in words: one sentence per condition for the terminal, report.html and
recommendations.json, the answer first (rbl/report/recommendation.py decides it)."""

from __future__ import annotations

from rich.console import Console

from ..metric_directions import objective_text
from .findings_view import (_comparison, _escaped, _interval, _medians, _percent, difference_text, fault_phrase,
                            html, times)
from .labels import METRIC_TITLES, Labeller, plural
from .recommendation import MAX_ROUNDS_SAID, Recommendation
from .terminal_text import print_indented


def headline(objective: dict) -> str:
    how = ("the default for this kind of run; set `objective` in the spec to ask another question"
           if objective.get("default") else "the spec's objective")
    return f"Which configuration to deploy, for {objective_text(objective, METRIC_TITLES)} ({how})"


def rounds_option(rounds: int, until_resolved: bool) -> str:
    """The option that runs `rounds` rounds per cell again: a run until resolved is capped by --max-rounds."""
    return f"--until-resolved --max-rounds {rounds}" if until_resolved else f"--rounds {rounds}"


def sentence(rec: Recommendation, labeller: Labeller, until_resolved: bool = False) -> str:
    group = rec.group
    where = fault_phrase(group.fault, group.users, {**({"load": group.load} if group.load is not None else {}),
                                                    **({"target": group.target} if group.target is not None else {})})
    status = rec.status
    if status == "none eligible":
        reasons = "; ".join(f"`{labeller.label(cell.scenario)}` {why}" for cell, why in rec.excluded[:3])
        more = f" (and {len(rec.excluded) - 3} more)" if len(rec.excluded) > 3 else ""
        return f"{where}, no configuration is eligible: {reasons}{more}."
    leader = f"`{labeller.label(rec.leader.scenario)}`"
    outside = (f" ({plural(len(rec.excluded), 'other configuration')} not eligible: "
               + "; ".join(f"`{labeller.label(c.scenario)}` {why}" for c, why in rec.excluded[:2])
               + (" ..." if len(rec.excluded) > 2 else "") + ")") if rec.excluded else ""
    if status == "only eligible":
        rounds = len(rec.leader.rounds)
        once = f", from {plural(rounds, 'round')}: run 3 or more to see it hold" if rounds < 3 else ""
        return f"{where}, deploy {leader}: the only eligible configuration{once}{outside}."
    finding = rec.finding
    runner_up = f"`{labeller.label(finding.worst.scenario)}`"
    ratio = finding.ratio
    if ratio is None:
        comparison = f"it differs from the runner-up {runner_up} by {difference_text(finding)}"
    else:
        comparison = f"it {_comparison(finding.metric, times(ratio))[0]} the runner-up {runner_up}"
    evidence = f"{comparison}{_interval(finding)} ({_medians(finding)})"
    if status == "deploy":
        return f"{where}, deploy {leader}: {evidence}, above the noise floor of {_percent(finding.floor)}{outside}."
    if status == "deploy unchecked":
        return (f"{where}, deploy {leader}: {evidence}; its interval excludes no difference, but this run "
                f"measured no noise floor to check it against{outside}.")
    rounds = min(len(finding.best.rounds), len(finding.worst.rounds))
    if finding.result.a.median == finding.result.b.median:
        return (f"{where}, cannot tell: {leader} and the runner-up {runner_up} tie ({_medians(finding)}); to choose "
                f"between them, bound another metric (`objective.METRIC = ...`) or optimise it{outside}.")
    lead = f"{where}, cannot tell yet: {leader} leads, {evidence}"
    if finding.reason in ("alike", "identical"):
        why = "the same setup measured twice" if finding.reason == "identical" else \
            "configurations that cannot differ in behaviour here"
        return f"{where}, any will do: {why}, so {leader} leading ({evidence}) is noise{outside}."
    if rec.more_rounds is None:
        return f"{lead}; more rounds would not separate them{outside}."
    if rec.more_rounds > MAX_ROUNDS_SAID:
        return (f"{lead}; it would take more than {MAX_ROUNDS_SAID} rounds per cell to tell them apart: under this "
                f"objective they are about equal{outside}.")
    if finding.reason == "no interval":
        return (f"{lead}; {plural(rounds, 'round')} per cell give{'s' if rounds == 1 else ''} no interval: run "
                f"{rec.more_rounds} or more (`{rounds_option(rec.more_rounds, until_resolved)}`){outside}.")
    return (f"{lead}; about {rec.more_rounds} rounds per cell (this run has {rounds}) would likely tell "
            f"(`{rounds_option(rec.more_rounds, until_resolved)}`){outside}.")


def view(recommendations: list[Recommendation], labeller: Labeller, objective: dict,
         until_resolved: bool = False) -> dict:
    """What report.html and the terminal say, and recommendations.json's sentences."""
    items = [{"status": rec.status, "text": sentence(rec, labeller, until_resolved)} for rec in recommendations]
    for item in items:
        item["html"] = html(item["text"])
    return {"headline": headline(objective), "headline_html": html(headline(objective)), "items": items}


def print_recommendations(shown: dict, console: Console) -> None:
    if not shown["items"]:
        return
    console.print("[bold]" + _escaped(shown["headline"]) + "[/bold]:", highlight=False)
    for item in shown["items"]:
        print_indented(console, item["text"], bullet="- ")
