"""The target as a dimension of the space, |T|: `target in [...]` (the path called, so the work
per request) and `target.cpus in [...]` (each replica's CPU budget). 004's design space is CPUs x
factorial x TRT; with these axes it is one spec.

The dimension is outermost in the scenario order, CPU budget slowest: a new budget restarts the
target's replicas, a new path does not, so the order restarts the target as seldom as it can.
A space whose target does not vary has no dimension (None): its plan and scenario ids stay as
they were, and its scenarios carry no `target` record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from .axes import Axis


@dataclass(frozen=True)
class TargetDimension:
    paths: Axis                 # `target`'s values (strings)
    cpus: Axis | None           # `target.cpus`'s values (floats); None: no budget

    @property
    def size(self) -> int:
        return len(self.paths) * (len(self.cpus) if self.cpus is not None else 1)

    @property
    def axes(self) -> tuple[str, ...]:
        """The settings that vary, in the spec's spelling."""
        return tuple(key for key, axis in (("target.cpus", self.cpus), ("target", self.paths))
                     if axis is not None and len(axis) > 1)

    def records(self) -> Iterator[dict]:
        """Every point as a scenario's `target` record, the CPU budget varying slowest."""
        for cpus in (self.cpus if self.cpus is not None else (None,)):
            for path in self.paths:
                yield {"path": str(path.v), **({} if cpus is None else {"cpus": float(cpus.v)})}


def target_dimension(paths: Axis, cpus: Axis | None) -> TargetDimension | None:
    """The dimension, or None when the target takes one value (|T| = 1)."""
    dimension = TargetDimension(paths, cpus)
    return dimension if dimension.size > 1 else None
