"""What a report must say about how its numbers came about: the run order, warm-up rounds left
out, oracle violations, and which metrics depend on how fast a client's loop spins."""

from __future__ import annotations

from ..store.metrics import SPIN_DEPENDENT, SPIN_FREE_COLUMNS
from ..store.run_order import recorded_order


def spin_dependent(metrics: list[str], cells) -> list[str]:
    """The chosen metrics that count calls an open breaker rejected, when the run has a breaker."""
    if not any(cell.pattern == "circuit_breaker" for cell in cells):
        return []
    return [m for m in metrics if m in SPIN_DEPENDENT]


def design_notes(header: dict, manifest: dict, cells, metrics: list[str], include_warmup: bool) -> list[str]:
    notes = []
    order = recorded_order(manifest.get("order")) if manifest else None
    if order is not None:
        notes.append(f"run order: {order.describe()}")
    warmup_rounds = sum(len(cell.warmup_rounds) for cell in cells)
    if header.get("warmup"):
        notes.append(f"warm-up: the first {header['warmup']} round(s) of each scenario "
                     + ("are included in the statistics (--include-warmup)" if include_warmup else
                        f"are left out of the statistics ({warmup_rounds} round(s) stored in results.jsonl)"))
    violating = sum(cell.violation_rows for cell in cells)
    if violating:
        worst = sorted((c for c in cells if c.violation_rows), key=lambda c: -c.violation_rows)[:3]
        notes.append(f"oracle violations: {violating} row(s) in {sum(1 for c in cells if c.violation_rows)} cell(s) "
                     "show a client that did not do what its configuration says (column oracleViolations; "
                     "the rows' messages are in results.jsonl), e.g. "
                     + "; ".join(f"{c.client} at {c.fault_rate:g}% x {c.users} users: {c.violation_rows}" for c in worst))
    elif manifest and "oracleViolations" in manifest:      # the runner checked them (rbl run records it)
        notes.append("oracles: every checked round did what its configuration says")
    marked = spin_dependent(metrics, cells)
    if marked:
        notes.append(f"{', '.join(marked)} (marked ‡ in report.html) count calls an open breaker rejected without a request: "
                     "how many depends on how fast the client's loop spins, not on the library; compare breakers "
                     f"by {', '.join(SPIN_FREE_COLUMNS)} (--metric)")
    return notes
