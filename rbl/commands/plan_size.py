"""The plan-size policy of `rbl compile -o DIR`: which plans a directory (or a ConfigMap) can hold."""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError


def check_plan_fits(space, spec: Path, output: Path, fmt: str, target: str) -> None:
    """Refuse, before anything is written, a plan -o DIR would never finish writing (or, for
    --target kubernetes, one no ConfigMap holds: the pods read the plan from one)."""
    import shlex

    from ..compiler.plan import MAX_WRITTEN_SCENARIOS, approximate_bytes, byte_text
    from ..report.labels import plural
    smaller = ("or compile a smaller space: --users 1,5, --set 'fault.rate in [0%, 50%]' or "
               "--set 'LABEL.param in [a, b]'")
    if space.size > MAX_WRITTEN_SCENARIOS:
        size = f"{space.size:,}" if space.size < 10**15 else f"about 10^{len(str(space.size)) - 1}"
        written = byte_text(approximate_bytes(space, fmt))
        raise UsageError(f"the plan has {size} scenarios (about {written} of {fmt}); -o DIR writes plans of up to "
                         f"{MAX_WRITTEN_SCENARIOS:,} scenarios: nothing was written to {output}",
                         hint=f"stream the scenarios instead, in constant memory: `rbl compile "
                              f"{shlex.quote(str(spec))} -o - --format jsonl` (the first arrive at once); {smaller}")
    if target == "kubernetes":
        from ..targets.kubernetes.manifests import CONFIGMAP_LIMIT
        from ..compiler.expand import iter_scenario_lines
        total = 0
        for count, line in enumerate(iter_scenario_lines(space), 1):      # stops past the limit
            total += len(line.encode("utf-8")) + 1
            if total > CONFIGMAP_LIMIT:
                raise UsageError(f"the plan of {plural(space.size, 'scenario')} is larger than a ConfigMap holds "
                                 f"({CONFIGMAP_LIMIT // 1000} kB; its first {count} scenarios take {total // 1000} kB)",
                                 hint=f"the pods read the plan from a ConfigMap: split the spec into smaller ones, "
                                      f"{smaller}")
