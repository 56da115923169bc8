"""The findings (rbl/report/findings.py) in words: a sentence a reader can quote for each, grouped
for the top of report.html and for the terminal."""

from __future__ import annotations

import re

from markupsafe import Markup, escape
from rich.console import Console

from ..metric_directions import is_share
from .findings import EFFECT, UNCHECKED, UNRESOLVED, Finding, direction
from .labels import METRIC_TITLES, Labeller, load_text, plural, target_phrase
from .terminal_text import print_indented


def fault_phrase(fault: dict, users: int, scenario: dict | None = None) -> str:
    """`At 50% aborts and 10 users`, `With no faults and 5 users`, `At 20% delays of 200 ms and 1 user`;
    for a scenario whose load generator sends, its load in the users' place (`With no faults and
    load 40 req/s`), and a varying target's point after it (`, on /factorial/5000 with 0.5 CPU`)."""
    scenario = scenario or {}
    people = (load_text(scenario) if "load" in scenario else plural(users, "user")) + target_phrase(scenario)
    rate = fault.get("rate", 0)
    if not rate:
        return f"With no faults and {people}"
    kind = fault.get("kind")
    if kind == "abort":
        what = "aborts"
    elif kind == "delay" and fault.get("duration_ms") is not None:
        what = f"delays of {fault['duration_ms']:g} ms"
    else:
        what = f"{kind} faults"
    return f"At {rate:g}% {what} and {people}"


def times(value: float) -> str:
    """2.3x, 1.04x, 12x; 0x for an interval's end cut at 0. Near 1 two decimals: "1.0x faster" says
    nothing of a 4% difference."""
    if value < 0.05:
        return "0x"
    if 0.895 <= value < 1.095:
        return f"{value:.2f}x"
    return f"{value:.1f}x" if value < 9.95 else f"{value:.0f}x"


def _title(metric: str) -> str:
    return METRIC_TITLES.get(metric, metric)


def _unit(metric: str) -> str:
    return " ms" if "(ms)" in _title(metric) else ""


def _noun(metric: str) -> str:
    """The metric's title without its unit: `total execution time`."""
    return re.sub(r"\s*\([^)]*\)$", "", _title(metric))


def _comparison(metric: str, ratio: str) -> tuple[str, str, str]:
    """(phrase between the two labels, the better end's superlative, the other end's) for `metric`."""
    if metric == "totalExecutionTime":
        return f"finished {ratio} faster than", "fastest", "slowest"
    if direction(metric) == "lower":
        return f"had a {ratio} {'shorter' if _unit(metric) else 'lower'} {_noun(metric)} than", "best", "worst"
    top, bottom = ("best", "worst") if direction(metric) == "higher" else ("highest", "lowest")
    return f"had a {ratio} higher {_noun(metric)} than", top, bottom


def _family(pattern: str, count: int) -> str:
    return f"{count} {pattern.replace('_', ' ')} configurations"


def _labels(finding: Finding, labeller: Labeller) -> tuple[str, str]:
    """The two ends' labels, the higher median's first where no end is better. The second keeps only
    its configuration when both are one client's (`multiplier=10ms`)."""
    first, second = finding.best, finding.worst
    if direction(finding.metric) == "none":
        first, second = second, first            # "had a 2.0x higher ... than"
    one, other = labeller.label(first.scenario), labeller.label(second.scenario)
    if first.client == second.client and labeller.configuration(second.scenario):
        other = labeller.configuration(second.scenario)
    return one, other


def _interval(finding: Finding) -> str:
    ends = finding.ratio_interval
    return "" if ends is None else f" [{times(ends[0])}, {times(ends[1])}]"


def _medians(finding: Finding) -> str:
    """The two medians in the order the sentence names the cells."""
    first, second = finding.result.a.median, finding.result.b.median
    if direction(finding.metric) == "none":
        first, second = second, first
    if is_share(finding.metric):                 # 91.4% and 100%, not 0.914 and 1
        return f"medians {_percent(first)} and {_percent(second)}"
    return f"medians {_number(first)} and {_number(second)}{_unit(finding.metric)}"


def difference_text(finding: Finding) -> str:
    """How far apart the two medians are: `184`, `12.5 ms`, or for a share `66.7 points`."""
    difference = abs(finding.result.difference)
    if is_share(finding.metric):
        return f"{difference * 100:.3g} points"
    return f"{_number(difference)}{_unit(finding.metric)}"


def _number(value: float) -> str:
    """3 significant digits, without an exponent: 0.0123, 192, 1,650."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.3g}%"


def sentence(finding: Finding, labeller: Labeller) -> str:
    """One finding as a sentence to quote, e.g. "At 50% aborts and 10 users, `tenacity.retry
    multiplier=5ms` finished 2.3x faster than `multiplier=10ms` [1.6x, 3.1x] (medians 41 and 95 ms);
    above the noise floor of 40%." Labels are in backticks. Cells of the group left out of the
    comparison (failed rounds, no data) are counted at its end."""
    text = _sentence(finding, labeller)
    if finding.left_out:
        text = f"{text[:-1]} ({plural(finding.left_out, 'other configuration')} left out: failed rounds or no data)."
    return text


def _sentence(finding: Finding, labeller: Labeller) -> str:
    group = finding.group
    where = fault_phrase(group.fault, group.users, {**({"load": group.load} if group.load is not None else {}),
                                                    **({"target": group.target} if group.target is not None else {})})
    one, other = _labels(finding, labeller)
    ratio = finding.ratio
    if ratio is None:                                    # a median of 0: no ratio to speak of
        verdict = {EFFECT: f"above the noise floor of {_percent(finding.floor or 0)}",
                   UNCHECKED: "no noise floor to check it against"}.get(finding.status, "unresolved")
        return (f"{where}, `{one}` and `{other}` differ by {difference_text(finding)}"
                f"{_unit(finding.metric)} in {_noun(finding.metric)} ({_medians(finding)}); {verdict}.")
    phrase, top, bottom = _comparison(finding.metric, times(ratio))
    many = finding.configurations > 2
    family = _family(finding.group.pattern, finding.configurations)
    if finding.status != UNRESOLVED:
        subject = f"`{one}`, the {top} of {family}," if many else f"`{one}`"
        target = f"the {bottom}, `{other}`" if many else f"`{other}`"
        claim = f"{where}, {subject} {phrase} {target}{_interval(finding)} ({_medians(finding)})"
        if finding.status == EFFECT:
            return f"{claim}; above the noise floor of {_percent(finding.floor)}."
        return (f"{claim}; its interval excludes no difference, but this run measured no noise floor to check "
                f"it against (it has no cells that must behave alike, such as a 0% fault rate).")
    pair = f"the {top} and {bottom} of {family}, `{one}` and `{other}`," if many else f"`{one}` and `{other}`"
    apart = f"{where}, {pair} are {times(ratio)} apart in {_noun(finding.metric)}"
    reason = finding.reason
    if reason == "identical":
        return f"{apart}: unresolved, noise between clients with the same configuration."
    if reason == "alike":
        fault = "without faults" if not finding.group.fault.get("rate") else "under these delays"
        return f"{apart}: unresolved, noise between cells that cannot differ in behaviour {fault} (A/A cells)."
    if reason == "no interval":
        rounds = min(len(finding.best.rounds), len(finding.worst.rounds))
        return (f"{apart}: unresolved, " + ("one round gives no interval." if rounds < 2
                                            else "too few observations for an interval."))
    if reason == "includes none":
        return f"{apart}{_interval(finding)}: unresolved, the interval includes no difference."
    return f"{apart}{_interval(finding)}: unresolved, within the noise floor of {_percent(finding.floor)}."


def view(findings: list[Finding], labeller: Labeller, metrics: list[str], rounds: int) -> dict:
    """What report.html and the terminal say: the sentences by status and metric, a headline, and a
    line on what more rounds would add (rounds: the most any cell has)."""
    by_status: dict[str, list[dict]] = {EFFECT: [], UNCHECKED: [], UNRESOLVED: []}
    for finding in findings:
        by_status[finding.status].append({"metric": finding.metric, "title": _title(finding.metric),
                                          "text": sentence(finding, labeller), "reason": finding.reason})
    order = {metric: i for i, metric in enumerate(metrics)}
    for items in by_status.values():
        items.sort(key=lambda item: order.get(item["metric"], len(order)))      # stable: plan order within
    total = len(findings)
    effects, unchecked, unresolved = by_status[EFFECT], by_status[UNCHECKED], by_status[UNRESOLVED]
    if not total:
        headline = "The plan compares no configurations with each other (each group has one configuration)."
    elif rounds <= 1:
        headline = f"With one round per cell, none of the {plural(total, 'comparison')} can be resolved."
    elif effects:
        headline = (f"{plural(len(effects), 'difference')} between configurations "
                    f"{'clears' if len(effects) == 1 else 'clear'} the noise floor, out of "
                    f"{plural(total, 'comparison')} (the best and worst configuration of each group, per metric).")
    elif unchecked:
        headline = (f"{plural(len(unchecked), 'difference')} of {total} {'has' if len(unchecked) == 1 else 'have'} "
                    f"an interval that excludes no difference, but this run measured no noise floor.")
    else:
        headline = f"No difference between configurations clears the noise floor: all {total} comparisons are unresolved."
    reasons = {}
    for item in unresolved:
        reasons[item["reason"]] = reasons.get(item["reason"], 0) + 1
    wording = {"alike": "between cells that cannot differ in behaviour", "no interval": "without an interval",
               "identical": "between clients with the same configuration",
               "includes none": "with an interval that includes no difference",
               "within the floor": "within the noise floor"}
    breakdown = "; ".join(f"{count} {wording[reason]}" for reason, count in reasons.items())
    # differences under faults first; comparisons between cells that cannot differ are the noise floor's
    unresolved.sort(key=lambda item: item["reason"] in ("alike", "identical"))
    return {"headline": headline, "effects": effects, "unchecked": unchecked, "unresolved": unresolved,
            "unresolved_line": (f"{plural(len(unresolved), 'comparison')} unresolved ({breakdown})"
                                if unresolved else ""),
            "rounds_line": rounds_line(rounds, bool(unresolved))}


def rounds_line(rounds: int, unresolved: bool) -> str:
    """What more rounds would add, for runs with few of them."""
    if rounds <= 1:
        return ("This run has one round per cell: its medians are single measurements, with no interval and no "
                "noise floor, so no difference can be resolved. Run it again with `--rounds 3` or more (each cell "
                "then gets a 95% interval, the A/A check measures the noise floor, and each comparison is checked "
                "against both).")
    if rounds <= 3 and unresolved:
        return (f"This run has {rounds} rounds per cell: intervals from so few rounds are wide. More rounds "
                "(`--rounds 6`) narrow them and lower the noise floor, and may resolve what is unresolved here.")
    return ""


def html(text: str) -> Markup:
    """A sentence for report.html: escaped, with its `labels` as <code>."""
    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", str(escape(text))))


def print_findings(shown: dict, console: Console, explain: bool) -> None:
    """The findings for the terminal: the effects (and unchecked differences) whole, the unresolved
    comparisons as one line unless `explain`."""
    console.print("[bold]Findings[/bold]: " + _escaped(shown["headline"]), highlight=False)
    for item in shown["effects"] + shown["unchecked"]:
        print_indented(console, item["text"], bullet="- ")
    if shown["unresolved"]:
        if explain:
            print_indented(console, f"{shown['unresolved_line']}:")
            for item in shown["unresolved"]:
                print_indented(console, item["text"], bullet="- ")
        else:
            print_indented(console, f"{shown['unresolved_line']}: listed with `--explain` and in report.html.")
    if shown["rounds_line"]:
        print_indented(console, shown["rounds_line"])


def _escaped(text: str) -> str:
    from rich.markup import escape as rich_escape
    return rich_escape(text)
