"""The plan: the compiler's output document (rbl/schemas/plan-v1.schema.json), written as JSON, JSON Lines or CSV."""

from __future__ import annotations

import csv
import io
import json
from itertools import islice
from pathlib import Path
from typing import IO, Iterator

from .. import __version__
from .axes import RangeAxis
from .expand import (configurations, fault_record, iter_scenario_lines, iter_scenarios, native, native_parameters,
                     neutral_values)
from .space import TestSpace
from ..lang.units import format_value, native_number

PLAN_VERSION = 1
FORMATS = ("json", "jsonl", "csv")
INLINE_AXIS_LIMIT = 1000
SCENARIO_COLUMNS = ("index", "id", "fault_kind", "fault_rate", "fault_status", "fault_duration_ms",
                    "users", "client", "library", "pattern", "successes", "max_requests")


def _axis(axis, to_native) -> object:
    """Short axes as lists; long ranges as their description (never enumerated)."""
    if isinstance(axis, RangeAxis) and len(axis) > INLINE_AXIS_LIMIT:
        return {"from": to_native(axis[0]), "to": to_native(axis.last),
                "step_count": len(axis), "text": f"{format_value(axis[0])}..{format_value(axis.last)}"}
    return [to_native(v) for v in axis]


def axis_largest(record) -> int:
    """The largest value of a numeric axis as _axis wrote it (a list, or a long range's description)."""
    if isinstance(record, dict):
        return max(record["from"], record["to"])
    return max(record, default=0)


def breakdown(space: TestSpace) -> dict:
    return {
        "faults": len(space.fault.rates),
        "users": len(space.users),
        **({"loads": space.loads} if space.workload is not None else {}),
        **({"targets": space.targets.size} if space.targets is not None else {}),
        "clients": [{"label": c.label, "configurations": c.configurations} for c in space.clients],
        "text": space.breakdown(),
    }


def plan_header(space: TestSpace) -> dict:
    """Everything in the plan except the scenario list."""
    fault = fault_record(space, space.fault.rates[0])
    del fault["rate"]
    fault["rates"] = _axis(space.fault.rates, lambda v: native_number(v.v))
    return {
        "rbl_plan": PLAN_VERSION,
        "rbl_version": __version__,
        "name": space.name,
        "source": {"path": space.source_name, "sha256": space.source_sha256,
                   **({"overrides": list(space.overrides)} if space.overrides else {})},
        "size": space.size,
        "rounds": space.rounds,
        "runs": space.runs,
        "breakdown": breakdown(space),
        "target": _target_header(space),
        **({"topology": space.topology.record()} if space.topology is not None else {}),
        **({"istio": {"version": space.istio_version}} if space.istio_version is not None else {}),
        "fault": fault,
        "users": _axis(space.users, lambda v: v.v),
        **({"load": _load_header(space)} if space.workload is not None else {}),
        "successes": space.successes,
        "max_requests": space.max_requests,
        "clients": [_client(c) for c in space.clients],
        **_design(space),
        **({"assert_noise": {"op": space.noise.op, "percent": space.noise.percent}} if space.noise else {}),
        **({"objective": space.objective.record()} if space.objective is not None else {}),
    }


def _target_header(space: TestSpace) -> dict:
    """The target the run starts on (path and resources) and, when it varies, the values of each
    of its axes (each scenario then says which point it runs on)."""
    record = {"path": space.target, **(space.target_resources or {})}
    if space.targets is not None:
        dimension = space.targets
        axes = {"path": _axis(dimension.paths, lambda v: str(v.v))}
        if dimension.cpus is not None:
            axes["cpus"] = _axis(dimension.cpus, lambda v: float(v.v))
        record["axes"] = {key: values for key, values in axes.items() if _axis_size(values) > 1}
    return record


def _axis_size(record) -> int:
    return record["step_count"] if isinstance(record, dict) else len(record)


def _load_header(space: TestSpace) -> dict:
    """The load generator's settings as the spec gave them (axes as lists of their spelling)."""
    return {"kind": space.workload.kind, "axes": list(space.workload.axes),
            "settings": {key: [format_value(v) for v in values] for key, values in space.workload.settings}}


def _design(space: TestSpace) -> dict:
    """The run order and warm-up, only when the spec departs from the defaults (Algorithm 1's
    order, no warm-up), so plans of specs that say nothing about them stay as they were."""
    design: dict = {}
    if space.order != "sequential":
        design["order"] = {"kind": space.order, **({} if space.order_seed is None else {"seed": space.order_seed})}
    if space.warmup:
        design["warmup"] = space.warmup
    return design


def _client(client) -> dict:
    record = {
        "label": client.label,
        "library": client.library.name,
        "pattern": client.pattern.name,
        "platform": client.library.platform,
        "service": client.library.client,
        "requires": client.library.requires,
        "configurations": client.configurations,
        "share": client.share,
    }
    if client.neutral is not None:
        return {**record, **_neutral_parameters(client)}
    record["axes"] = [p.name for p in client.axes]
    record["parameters"] = {
        p.name: ({"values": _axis(p.values, lambda v, p=p: native(p, v)), **_labels(p)} if p.is_axis
                 else {"value": native(p, p.values[0]), **({} if p.explicit else {"default": True})})
        for p in client.params
    }
    return record


def _labels(param) -> dict:
    """How tables and figures label each value of a short axis: the spec's spelling, with units
    (`multiplier=5ms`, where the client is handed 0.005)."""
    if isinstance(param.values, RangeAxis) and len(param.values) > INLINE_AXIS_LIMIT:
        return {}
    return {"labels": [f"{param.name}={format_value(v)}" for v in param.values]}


def _neutral_labels(client, natives: dict[str, list]) -> dict[str, list[str]]:
    """For each native axis of a `use` client, a label per value in the neutral value's terms:
    the neutral axes that stay fixed over every configuration with that native value
    (`initialIntervalMillis` 20 -> `backoff.initial=20ms`). Left out for very large clients."""
    axes = [name for name, values in natives.items() if len(values) > 1]
    if not axes or client.configurations > 10 * INLINE_AXIS_LIMIT:
        return {}
    neutral_axes = [p.name for p in client.params if p.is_axis]
    seen: dict[tuple[str, str], list[dict]] = {}
    for values, config in zip(neutral_values(client.params), configurations(client)):
        for name in axes:
            seen.setdefault((name, json.dumps(config[name])), []).append(values)
    labels: dict[str, list[str]] = {}
    for name in axes:
        for value in natives[name]:
            combos = seen.get((name, json.dumps(value)), [])
            fixed = [a for a in neutral_axes if combos and all(c[a] == combos[0][a] for c in combos)]
            text = " ".join(f"{a}={format_value(combos[0][a])}" for a in fixed) or f"{name}={value}"
            labels.setdefault(name, []).append(text)
    return labels


def _neutral_parameters(client) -> dict:
    """A client configured from a neutral value: the native parameters it maps to (those that vary
    are its axes, as for any client) and the neutral value itself, with any approximation taken."""
    natives = native_parameters(client)
    neutral = client.neutral
    labels = _neutral_labels(client, natives)
    return {
        "axes": [name for name, values in natives.items() if len(values) > 1],
        "parameters": {name: {"values": values, **({"labels": labels[name]} if name in labels else {})}
                       if len(values) > 1 else {"value": values[0]} for name, values in natives.items()},
        "neutral": {
            "pattern": neutral.pattern,
            "value": neutral.text,
            **({"name": neutral.name} if neutral.name else {}),
            "parameters": {p.name: ({"values": [format_value(v) for v in p.values]} if p.is_axis
                                    else {"value": format_value(p.values[0])}) for p in client.params},
            "approximate": neutral.approximate,
            "approximations": list(neutral.approximations),
        },
    }


# The most scenarios `rbl compile -o DIR` writes into files: a plan.json of a few GB, written in
# about a minute. A larger plan would not end (10^18 scenarios) or fill the disk first, and no
# run gets through it; `-o -` streams any plan in constant memory for whoever wants it anyway.
MAX_WRITTEN_SCENARIOS = 10_000_000


def approximate_bytes(space: TestSpace, fmt: str = "json") -> int:
    """About how many bytes the scenario list takes: the first scenario's length times the size
    (the first scenario only is made, so this costs nothing for 10^18 scenarios)."""
    first = next(iter_scenario_lines(space), "")
    per_scenario = len(first.encode("utf-8")) + (6 if fmt == "json" else 1)
    if fmt == "csv":
        per_scenario = per_scenario // 3               # no keys, no quotes: about a third of the JSON
    return space.size * per_scenario


def byte_text(count: int) -> str:
    """1234567 -> '1.2 MB' (decimal units, up to YB; beyond that as a power of ten)."""
    for unit in ("B", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"):
        if count < 1000:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"10^{len(str(int(count))) + 23} B"


def write_plan(space: TestSpace, out_dir: Path, fmt: str = "json") -> list[Path]:
    """Write plan.json (and the scenario list beside it for jsonl/csv); returns the files."""
    out_dir.mkdir(parents=True, exist_ok=True)
    header = plan_header(space)
    plan_path = out_dir / "plan.json"
    if fmt == "json":
        with plan_path.open("w", encoding="utf-8") as out:
            write_json_plan(header, iter_scenario_lines(space), out)
        return [plan_path]
    name = "scenarios.jsonl" if fmt == "jsonl" else "scenarios.csv"
    header["scenarios_file"] = name
    with (out_dir / name).open("w", encoding="utf-8", newline="") as out:
        write_scenarios(space, fmt, out)
    plan_path.write_text(json.dumps(header, indent=2) + "\n", encoding="utf-8")
    return [plan_path, out_dir / name]


def write_json_plan(header: dict, lines: Iterator[str], out: IO[str]) -> None:
    """The header with a "scenarios" array, streamed one scenario per line."""
    text = json.dumps(header, indent=2)
    out.write(text[:-2] + ',\n  "scenarios": [')
    first = True
    for line in lines:
        out.write(("\n    " if first else ",\n    ") + line)
        first = False
    out.write("\n  ]\n}\n")


# Lines per write of the JSON Lines scenario list: a few hundred lines (about 100 KB) stay below
# malloc's mmap threshold, so each joined batch reuses heap memory instead of mapping fresh pages
# (4096 lines cost 175k minor page faults per 10^6 scenarios). Tuned with bench/compile_stream.py.
JSONL_BATCH_LINES = 256


def write_scenarios(space: TestSpace, fmt: str, out: IO[str]) -> int:
    """Stream the scenario list as JSON Lines or CSV; returns how many were written."""
    count = 0
    if fmt == "jsonl":
        lines = iter_scenario_lines(space)
        while batch := list(islice(lines, JSONL_BATCH_LINES)):
            batch.append("")                         # the last line's newline, without another copy
            out.write("\n".join(batch))
            count += len(batch) - 1
        return count
    params = list(dict.fromkeys(name for c in space.clients for name in native_parameters(c, limit=1)))
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*SCENARIO_COLUMNS, *params])
    for s in iter_scenarios(space):
        fault = s["fault"]
        row = [s["index"], s["id"], fault["kind"], fault["rate"], fault.get("status", ""),
               fault.get("duration_ms", ""), s["users"], s["client"], s["library"], s["pattern"],
               s["successes"], s["max_requests"]]
        row += [spec_spelling(s["config"].get(name, "")) for name in params]
        writer.writerow(row)
        count += 1
    return count


def spec_spelling(value) -> object:
    """A native value as rbl writes it: booleans `true`/`false`, everything else unchanged."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    return value


def scenarios_text(space: TestSpace, fmt: str) -> str:
    out = io.StringIO()
    write_scenarios(space, fmt, out)
    return out.getvalue()
