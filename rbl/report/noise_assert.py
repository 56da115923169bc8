"""`assert noise < N%` after a run: measure the run's noise floor (the report's A/A check with its
default intervals and metrics) and fail the run (exit 3) when it is not below the bound."""

from __future__ import annotations

from pathlib import Path

from ..errors import EXIT_OK, EXIT_RUN_FAILED


def noise_assertion_result(run_dir: Path) -> tuple[bool, str] | None:
    """(held, message) for the plan's `assert noise`, None when the plan has none."""
    from ..store.results import RunDirectory
    header = RunDirectory(run_dir).plan_header()
    wanted = header.get("assert_noise")
    if not wanted:
        return None
    shard = _shard_of(run_dir)
    if shard:
        # one shard holds some of the A/A cells: its floor is not the run's
        return True, (f"assert noise {wanted['op']} {wanted['percent']:g}% is checked on the whole run, not on "
                      f"shard {shard}: `rbl merge` checks it on the merged run")
    from .cells import DEFAULT_METRICS, load_cells
    from .noise import noise_check
    from .noise_view import ADVICE, failure_reason, percent, verdict
    header, cells = load_cells(run_dir, list(DEFAULT_METRICS))
    check = noise_check(header, cells, list(DEFAULT_METRICS), manifest=_manifest(run_dir))
    bound = f"noise {wanted['op']} {wanted['percent']:g}%"
    if check.floor is None:
        return False, f"assert {bound} cannot be checked: {verdict(check)['headline']}"
    limit = wanted["percent"] / 100
    held = check.floor < limit if wanted["op"] == "<" else check.floor <= limit
    worst = check.worst_metric
    measured = (f"the noise floor is {percent(check.floor)} ({worst.metric}: resolvable difference "
                f"{percent(worst.resolvable)}, largest difference between cells that behave alike "
                f"{percent(worst.largest.relative)}, {len(worst.significant)} of {len(worst.judged)} A/A pairs significant)")
    if held:
        return True, f"assert {bound} holds: {measured}"
    few = f"; {check.few_rounds} A/A cells have 3 rounds or fewer" if check.few_rounds else ""
    why = "" if check.passed else f" The A/A check failed: {failure_reason(check)}"
    return False, f"assert {bound} failed: {measured}{few}.{why} To lower it: {ADVICE}."


def _manifest(run_dir: Path) -> dict | None:
    """The run's manifest, None when it has none or a damaged one (read as untrusted input)."""
    from ..store.results import RunDirectory
    manifest, _ = RunDirectory(run_dir).manifest()
    return manifest or None


def _shard_of(run_dir: Path) -> str | None:
    """`I/N` when the run directory is one shard of a plan (its manifest says so)."""
    from ..store.shards import recorded_shard
    manifest = _manifest(run_dir)
    shard = recorded_shard(manifest) if manifest else None
    return None if shard is None else str(shard)


def check_noise_assertion(run_dir: Path, code: int, say) -> int:
    """The run's exit code after the plan's noise assertion (a run that already failed keeps its code)."""
    if code != EXIT_OK or not (run_dir / "plan.json").is_file():
        return code
    result = noise_assertion_result(run_dir)
    if result is None:
        return code
    held, message = result
    say(message)
    return EXIT_OK if held else EXIT_RUN_FAILED
