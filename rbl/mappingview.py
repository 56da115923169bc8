"""`rbl plan --mapping`: per pattern and configuration, what each client's library really runs:
its native parameters and the behaviour they produce (attempts and waits, or when a breaker
opens), side by side across libraries, so non-equivalent comparisons are visible."""

from __future__ import annotations

from itertools import islice

from .compiler.checks.equivalence import client_behaviours, fault_delay_ms
from .compiler.expand import configurations, mapped_configurations
from .compiler.plan import spec_spelling
from .compiler.space import ClientSpec, TestSpace
from .lang.units import Value
from .neutral.semantics import equivalent

SHOWN_CONFIGURATIONS = 20


def mapping_rows(space: TestSpace) -> list[dict]:
    """One row per client and configuration (up to SHOWN_CONFIGURATIONS each)."""
    delay = fault_delay_ms({"fault.kind": Value("enum", space.fault.kind), "fault.duration": space.fault.duration})
    rows = []
    for client in space.clients:
        behaviours = client_behaviours(client, delay, SHOWN_CONFIGURATIONS)
        for index, native in enumerate(islice(_shown_parameters(client), SHOWN_CONFIGURATIONS)):
            behaviour = behaviours[index] if behaviours else None
            rows.append({"client": client.label, "library": client.library.name, "pattern": client.pattern.name,
                         "configuration": index + 1, "native": native,
                         "neutral": client.neutral.text if client.neutral else None,
                         "approximations": list(client.neutral.approximations) if client.neutral else [],
                         "behaviour": behaviour.describe() if behaviour else None,
                         "_behaviour": behaviour})
    return rows


def _shown_parameters(client: ClientSpec):
    """Per configuration, the native parameters worth reading: those the spec set, or those the
    neutral value was mapped to (the rest are catalogue defaults)."""
    if client.neutral is not None:
        for mapped in mapped_configurations(client):
            yield {name: mapped.native[name] for name in mapped.mapped}
        return
    explicit = [p.name for p in client.params if p.explicit]
    for config in configurations(client):
        yield {name: config[name] for name in explicit}


def mapping_text(space: TestSpace) -> str:
    rows = mapping_rows(space)
    width = max([len(r["client"]) for r in rows] + [10])
    lines = [f"mapping of {space.name}: what each library runs, per configuration "
             "(waits are before retry 1, 2, ...)"]
    for pattern in dict.fromkeys(r["pattern"] for r in rows):
        group = [r for r in rows if r["pattern"] == pattern]
        lines += ["", pattern]
        for client in dict.fromkeys(r["client"] for r in group):
            neutral = next(r for r in group if r["client"] == client)
            if neutral["neutral"]:
                lines.append(f"  {client:<{width}}  from {neutral['neutral']}")
                lines += [f"  {'':<{width}}  approximated: {a}" for a in neutral["approximations"]]
        for number in sorted({r["configuration"] for r in group}):
            same = [r for r in group if r["configuration"] == number]
            lines.append(f"  configuration {number}")
            for row in same:
                native = " ".join(f"{k}={spec_spelling(v)}" for k, v in row["native"].items()) or "(defaults)"
                lines.append(f"    {row['client']:<{width}}  {native}")
                lines.append(f"    {'':<{width}}  {_behaviour_text(row)}")
            lines += _verdict(same)
    total = max((c.configurations for c in space.clients), default=0)
    if total > SHOWN_CONFIGURATIONS:
        lines += ["", f"(the first {SHOWN_CONFIGURATIONS} configurations of each client are shown)"]
    return "\n".join(lines)


def _behaviour_text(row: dict) -> str:
    if row["pattern"] == "baseline":
        return "no pattern: one request per call"
    return row["behaviour"] or f"rbl has no formulas for {row['library']}.{row['pattern']}"


def _verdict(rows: list[dict]) -> list[str]:
    libraries = {r["library"] for r in rows}
    behaviours = [r["_behaviour"] for r in rows]
    if len(libraries) < 2 or any(b is None for b in behaviours) or rows[0]["pattern"] == "baseline":
        return []
    random = sorted(r["client"] for r, b in zip(rows, behaviours) if getattr(b, "waits", ()) is None)
    if random:
        return [f"    => NOT alike across {', '.join(sorted(libraries))}: {', '.join(random)} "
                f"wait{'s' if len(random) == 1 else ''} a random time, so no fixed sequence can match"]
    alike = all(equivalent(behaviours[0], b) for b in behaviours[1:])
    return [f"    => {'alike' if alike else 'NOT alike'} across {', '.join(sorted(libraries))}"]


def mapping_json(space: TestSpace) -> list[dict]:
    return [{k: v for k, v in row.items() if not k.startswith("_")} for row in mapping_rows(space)]
