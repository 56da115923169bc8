"""What follows a finished run: the plan's noise assertion, then the report or how to make it."""

from __future__ import annotations

from pathlib import Path


def maybe_report(run_dir: Path, console, code: int, wanted: bool) -> int:
    """After a run that finished (even with failed rounds, which the report marks): the report,
    or how to make it. The plan's `assert noise < N%` is checked here (exit 3 when it fails)."""
    from ..report.noise_assert import check_noise_assertion
    code = check_noise_assertion(run_dir, code, lambda text: console.print(text, highlight=False, markup=False))
    if wanted:
        from ..report.build import build_report
        made = build_report(run_dir, None, None, console)
        console.print(f"report: {made.out_dir / 'report.html'}", highlight=False)
    else:
        if _until_resolved(run_dir):        # the question it ran for is answered here, the rest by the report
            import sys
            from rich.console import Console
            from ..report.answer import print_answer
            from ..report.keyed_table import output_width
            # on stdout, after the summary table: the run's result, as the summary is
            print_answer(run_dir, Console(file=sys.stdout, width=output_width(sys.stdout, 160)))
        console.print(f"next: `rbl report {run_dir}` for medians with 95% CIs, figures and an HTML report",
                      highlight=False, markup=False)
    return code


def _until_resolved(run_dir: Path) -> bool:
    import json
    try:
        return "until_resolved" in json.loads((run_dir / "plan.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
