"""The compiler pipeline: parse -> lower -> checks (in PASSES order) -> typed test space."""

from __future__ import annotations

import gc
import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

from .checks.assertions import check_assertions
from .checks.clients import check_clients
from .checks.context import CheckContext
from .checks.equivalence import check_equivalence
from .checks.istio_release import check_istio_release
from .checks.libraries import check_libraries
from .checks.mesh import check_mesh_policies
from .checks.relations import check_relations
from .checks.neutral import check_lets, check_unused_lets
from .checks.objective import check_objective
from .checks.settings import SPACE_SETTINGS, check_settings
from .checks.structure import check_structure
from .checks.topology import check_placements, check_topology
from ..lang.diagnostics import Diagnostic, Diagnostics
from ..lang.frontend import parse_program
from .overrides import Override, apply_overrides, describe
from ..lang.reading import check_text, decode, read_limited, strip_bom
from ..lang.source import SourceFile
from .space import Fault, TestSpace
from .target_dimension import target_dimension

TOPOLOGY_PATH = "/"         # what the load asks of a topology's entry service (any path costs the same)

# The checker passes, in the order they run. Each takes the context and reports into it.
PASSES = (
    check_structure,
    check_libraries,
    check_settings,
    check_objective,
    check_topology,
    check_lets,
    check_clients,
    check_placements,
    check_relations,
    check_mesh_policies,
    check_istio_release,
    check_unused_lets,
    check_equivalence,
    check_assertions,
)


@dataclass
class CompileResult:
    space: TestSpace | None
    diagnostics: list[Diagnostic]

    @property
    def ok(self) -> bool:
        return self.space is not None


def compile_source(text: str, name: str = "<spec>", overrides: list[Override] = ()) -> CompileResult:
    """Compile spec text; never raises for bad input, returns diagnostics instead. `overrides`
    (command-line settings) replace the spec's statements before the checks."""
    # A big spec makes millions of small objects and no reference cycles: the cycle collector's
    # passes over them cost more than the compile itself (a third of it on 1 MB of clients,
    # bench/hostile_specs.py), so it waits until the compile is done.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _compile(text, name, overrides)
    finally:
        if collecting:
            gc.enable()


def _compile(text: str, name: str, overrides: list[Override]) -> CompileResult:
    text = strip_bom(text)
    source = SourceFile(name, text)
    diags = Diagnostics()
    if not check_text(source, diags):
        return CompileResult(None, diags.sorted())
    program = parse_program(source, diags)
    if program is None or diags.has_errors:
        return CompileResult(None, diags.sorted())
    program, size_overridden = apply_overrides(program, list(overrides), diags, SPACE_SETTINGS)
    if diags.has_errors:
        return CompileResult(None, diags.sorted())
    ctx = CheckContext(program, source, diags, size_overridden=size_overridden)
    for check in PASSES:
        check(ctx)
    if diags.has_errors:
        return CompileResult(None, diags.sorted())
    space = _test_space(ctx, text, name)
    if overrides:
        space = replace(space, overrides=tuple(describe(list(overrides))))
    return CompileResult(space, diags.sorted())


def compile_bytes(data: bytes, name: str = "<spec>", overrides: list[Override] = ()) -> CompileResult:
    """Compile a spec's bytes: as compile_source, with encoding errors and the size limit
    reported as located diagnostics."""
    diags = Diagnostics()
    text = decode(data, name, diags)
    if text is None:
        return CompileResult(None, diags.sorted())
    return compile_source(text, name, overrides)


def compile_file(path: str | Path) -> CompileResult:
    path = Path(path)
    with path.open("rb") as spec:
        return compile_bytes(read_limited(spec), str(path))


def _test_space(ctx: CheckContext, text: str, name: str) -> TestSpace:
    s = ctx.settings
    kind = s["fault.kind"].v
    fault = Fault(kind, s["fault.status"].v if kind == "abort" else None,
                  s.get("fault.duration") if kind == "delay" else None, s["fault.rate"],
                  s["fault.at"].v if "fault.at" in s else None, s["fault.by"].v if "fault.by" in s else "service",
                  s["fault.from"].v if "fault.from" in s else None)
    space_name = ctx.space.name.name if ctx.space.name else Path(name).stem
    return TestSpace(
        name=space_name,
        source_name=name,
        source_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        rounds=s["rounds"].v,
        users=s["users"],
        successes=s["successes"].v,
        max_requests=s["max_requests"].v,
        target=s["target"][0].v if ctx.topology is None else TOPOLOGY_PATH,
        fault=fault,
        clients=tuple(ctx.clients),
        assertions=tuple(ctx.assertions),
        noise=ctx.noise,
        order=s["order"].v,
        order_seed=s["order.seed"].v if "order.seed" in s else None,
        warmup=s["warmup"].v,
        workload=ctx.workload,
        target_resources=_target_resources(s),
        targets=target_dimension(s["target"], s.get("target.cpus")) if ctx.topology is None else None,
        topology=ctx.topology,
        istio_version=str(s["istio.version"].v) if "istio.version" in s else None,
        objective=ctx.objective,
    )


def _target_resources(settings: dict) -> dict | None:
    resources = {"cpus": float(settings["target.cpus"][0].v)} if "target.cpus" in settings else {}
    if "target.noisy_cpus" in settings:
        resources["noisy_cpus"] = float(settings["target.noisy_cpus"].v)
    if settings["target.replicas"].v != 1:
        resources["replicas"] = settings["target.replicas"].v
    if settings["target.drop_abandoned"].v:
        resources["drop_abandoned"] = True
    return resources or None
