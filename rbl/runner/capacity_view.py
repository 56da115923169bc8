"""`rbl calibrate --show`: a stored capacity as a reviewer reads it: when and how it was measured,
under how much other work, and every step of the search (rate, success share, p95), each drawn as a
bar of its p95 against the bound."""

from __future__ import annotations

BAR_WIDTH = 30              # characters of a bar at twice the bound (the bound is at its middle)


def _bar(p95: float | None, slo_ms: float) -> str:
    if p95 is None:
        return "(no success)".ljust(BAR_WIDTH + 2)
    filled = min(BAR_WIDTH, round(p95 / (2 * slo_ms) * BAR_WIDTH))
    cells = ["#"] * filled + [" "] * (BAR_WIDTH - filled)
    middle = BAR_WIDTH // 2
    cells[middle] = "|" if cells[middle] == " " else "+"
    return "[" + "".join(cells) + ("]" if p95 < 2 * slo_ms else ">")


def describe_record(record: dict) -> list[str]:
    """The lines `rbl calibrate --show` prints for one stored record."""
    slo_ms = record.get("slo_ms", 100.0)
    lines = [f"capacity: {record['capacity_rps']:g} req/s with p95 under {slo_ms:g} ms",
             f"measured {record['measured_at']}" + (f" in {record['seconds']:g} s" if "seconds" in record else "")]
    machine = record.get("machine") or {}
    if machine:
        lines.append(f"machine: {machine.get('host', '?')}, {machine.get('cores', '?')} cores, "
                     f"{machine.get('cpu') or 'CPU model unknown'}")
    method = record.get("method")
    if method:
        lines.append(f"method: constant-rate steps from {method.get('start_rps', '?')} req/s, "
                     f"{method.get('search', '?')} to {method.get('precision', 0):.0%}; a step passes with "
                     f"{method.get('min_success_share', 0):.0%} successful and p{method.get('percentile', 95)} "
                     "under the bound; a failure that sets the bracket is measured twice")
    other = record.get("otherWork")
    if other:
        verdict = "BUSY: the capacity is likely low" if record.get("busy") else "quiet enough"
        lines.append(f"other work while measuring: {other.get('otherCores', 0):.2g} of {other.get('cores', '?')} cores "
                     f"on average, at most {other.get('otherCoresPeak', 0):.2g} ({verdict})")
    else:
        lines.append("other work while measuring: not recorded (measured before rbl recorded it, or not on Linux)")
    steps = record.get("steps") or []
    if steps:
        lines.append(f"steps (bar: p95, the bound at `|`, {2 * slo_ms:g} ms at the right end):")
        for step in steps:
            p95 = step.get("successP95Ms")
            verdict = "pass" if step.get("passed") else "FAIL"
            notes = [note for note, on in (("repeated", step.get("repeated")), ("ended early", step.get("endedEarly")))
                     if on]
            served = step.get("servedRps")
            if served is not None:
                notes.append(f"{served:.0f} req/s served")
            lines.append(f"  {step.get('rps', 0):>8g} req/s  {step.get('successShare', 0):>6.1%} ok  "
                         f"p95 {'-' if p95 is None else format(p95, '.1f'):>7} ms  {_bar(p95, slo_ms)} {verdict}"
                         + (f" ({', '.join(notes)})" if notes else ""))
    return lines
