"""Oracle violations of a run (oracles.py): counted from results.jsonl (and a topology's hops.jsonl,
whose rounds have oracles of their own), so a resumed run counts every session's rows; shown after
the summary, and they make `rbl run` exit 3."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from rich.console import Console

from ..store.hops import read_hops
from ..store.results import RunDirectory

SHOWN_EXAMPLES = 3


def violation_counts(run: RunDirectory) -> tuple[Counter, dict[str, list[str]]]:
    """Rows breaking each oracle, and a few example messages of each."""
    counts: Counter = Counter()
    examples: dict[str, list[str]] = {}
    for row in [*run.rows(), *read_hops(run.path)]:
        found = row.get("oracleViolations") or []
        for oracle in dict.fromkeys(v.get("oracle") for v in found if isinstance(v, dict)):
            if not isinstance(oracle, str):
                continue
            counts[oracle] += 1
            shown = examples.setdefault(oracle, [])
            if len(shown) < SHOWN_EXAMPLES:
                message = next(v.get("message") for v in found if isinstance(v, dict) and v.get("oracle") == oracle)
                who = f"user {row['userId']}" if "userId" in row else "along the chain"
                shown.append(f"scenario {row['scenarioIndex'] + 1} ({row['client']}) round {row['round']} "
                             f"{who}: {message}")
    return counts, examples


def print_violations(counts: Counter, examples: dict[str, list[str]], console: Console, run_path: Path,
                     allowed: bool) -> None:
    total = sum(counts.values())
    console.print(f"{total} oracle violation(s): the client did not do what its configuration says "
                  f"(rows' oracleViolations in {run_path / 'results.jsonl'}):", highlight=False)
    for oracle, count in counts.most_common():
        console.print(f"  - {oracle}: {count} row(s)", highlight=False, markup=False)
        for example in examples.get(oracle, []):
            console.print(f"      {example}", highlight=False, markup=False)
    if not allowed:
        console.print("  = help: check how the client maps its parameters (`rbl plan --mapping`, the conformance "
                      "suite); `--allow-violations` keeps the exit code 0", highlight=False)
