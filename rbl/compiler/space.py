"""The typed test space: what the checker produces and expansion consumes (the seed paper's Definitions 1-3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

from ..libraries.catalogue import LibraryDef, PatternDef
from .axes import Axis
from ..lang.source import Span
from ..lang.types import ParamDef
from ..lang.units import Value
from ..topology import Topology
from .target_dimension import TargetDimension
from .workload import Workload


@dataclass(frozen=True)
class Param:
    """A client parameter: one value (`=`, or a default) or an axis (`in`)."""

    definition: ParamDef
    values: Axis
    is_axis: bool
    explicit: bool                 # written in the spec (False: the catalogue default)
    span: Span | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return self.definition.name


@dataclass(frozen=True)
class NeutralUse:
    """A client configured from a library-neutral value (`use ...`): its params are the neutral
    ones (`attempts`, `backoff.initial`, ...), mapped to native parameters per configuration."""

    pattern: str                     # the neutral pattern: retry or circuit_breaker
    text: str                        # the value as the spec wrote it (or the `let` name's value)
    approximate: bool = False        # the spec accepts the closest native setting where needed
    approximations: tuple[str, ...] = ()   # what was approximated, and how (empty when exact)
    name: str | None = None          # the `let` name, when used by name


@dataclass(frozen=True)
class ClientSpec:
    label: str
    library: LibraryDef
    pattern: PatternDef
    params: tuple[Param, ...]      # spec order, then defaults in catalogue order
    span: Span | None = field(default=None, compare=False)
    share: str = "user"            # "client": one pattern instance shared by all virtual users
    neutral: NeutralUse | None = None

    @property
    def axes(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.is_axis)

    @property
    def configurations(self) -> int:
        """|CONF_i|: the product of this client's axis lengths."""
        return prod(len(p.values) for p in self.axes)


@dataclass(frozen=True)
class Fault:
    kind: str                      # "abort" or "delay"
    status: int | None             # abort: HTTP status
    duration: Value | None         # delay: fixed delay
    rates: Axis
    at: str | None = None          # a topology's service whose calls meet them; None: the proxy where the load enters
    by: str = "service"            # ... injected by that service, or by its callers' sidecars
    caller: str | None = None      # ... by this caller's sidecar alone (one edge)


@dataclass(frozen=True)
class SizeAssertion:
    op: str
    expected: int
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class NoiseAssertion:
    """`assert noise < 5%`: the run's noise floor (rbl/report/noise.py), checked after the run."""
    op: str                         # < or <=
    percent: float
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ObjectiveBound:
    """`objective.successP99Ms = 500ms`: a configuration is eligible only within it."""
    metric: str
    op: str                         # <= (at most) or >= (at least: a metric better high)
    limit: float                    # in the rows' unit: ms, a fraction, a number
    span: Span | None = field(default=None, compare=False)

    def record(self) -> dict:
        return {"metric": self.metric, "op": self.op, "limit": self.limit}


@dataclass(frozen=True)
class Objective:
    """What "better" means for the report's recommendation: a metric in its own direction, and bounds."""
    metric: str
    direction: str                  # higher | lower
    bounds: tuple[ObjectiveBound, ...] = ()
    explicit: bool = True           # False: the kind of round's default metric (with the spec's bounds)

    def record(self) -> dict:
        return {"metric": self.metric, "direction": self.direction, "bounds": [b.record() for b in self.bounds],
                **({} if self.explicit else {"default": True})}


def space_size(faults: int, users: int, loads: int | None, clients: list[tuple[str, int]],
               targets: int | None = None) -> tuple[int, str]:
    """Equation 1, |F| x |U| x sum_i |CONF_i|, in closed form, and its breakdown (`|F| 5 x |U| 3 x
    (polly.retry 3 + ...) = 90`); an open-loop load's axes (`loads`, None for closed loop) multiply it
    as one more dimension, |L|, and a varying target (`targets`, None when it does not vary) as |T|,
    outermost. The one formula the size assertion, `rbl check` and `rbl plan` use."""
    size = (targets or 1) * faults * users * (loads or 1) * sum(n for _, n in clients)
    terms = " + ".join(f"{label} {n}" for label, n in clients)
    target = f"|T| {targets} x " if targets is not None else ""
    dimension = f" x |L| {loads}" if loads is not None else ""
    return size, f"{target}|F| {faults} x |U| {users}{dimension} x ({terms}) = {size}"


@dataclass(frozen=True)
class TestSpace:
    name: str
    source_name: str
    source_sha256: str
    rounds: int
    users: Axis
    successes: int
    max_requests: int
    target: str
    fault: Fault
    clients: tuple[ClientSpec, ...]
    assertions: tuple[SizeAssertion, ...] = ()
    order: str = "sequential"      # the run order (rbl/store/run_order.py)
    order_seed: int | None = None  # randomized: the seed, when the spec fixes it
    warmup: int = 0                # rounds per scenario before `rounds`, excluded from the report
    overrides: tuple[str, ...] = ()  # command-line overrides applied (rbl/compiler/overrides.py)
    noise: NoiseAssertion | None = None   # `assert noise < N%`, checked after a run
    workload: Workload | None = None      # open-loop load (rbl/compiler/workload.py); None: closed loop
    target_resources: dict | None = None  # target.cpus / replicas / noisy_cpus, when the spec sets them
    targets: TargetDimension | None = None  # the target's points when it varies (|T| > 1); `target` and
                                            # target_resources then hold the first one
    topology: Topology | None = None      # the services the load's requests pass through; None: one target
    istio_version: str | None = None      # the Istio release whose defaults istio clients follow; None: today's
    objective: Objective | None = None    # what "better" means (checks/objective.py); None: the kind's default

    @property
    def loads(self) -> int:
        """|L|: the points of the open-loop load dimension (1 for closed loop)."""
        return self.workload.size if self.workload is not None else 1

    @property
    def size(self) -> int:
        return self._size()[0]

    @property
    def runs(self) -> int:
        return self.size * self.rounds

    def breakdown(self) -> str:
        """`|F| 5 x |U| 3 x (polly.retry 3 + ...) = 90`, the factor breakdown shown everywhere."""
        return self._size()[1]

    def _size(self) -> tuple[int, str]:
        return space_size(len(self.fault.rates), len(self.users), self._loads_or_none(), self._configurations(),
                          self.targets.size if self.targets is not None else None)

    def _loads_or_none(self) -> int | None:
        return self.workload.size if self.workload is not None else None

    def _configurations(self) -> list[tuple[str, int]]:
        return [(c.label, c.configurations) for c in self.clients]
