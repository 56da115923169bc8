"""Axes: the values one dimension of a test space takes, with exact length and indexing,
so a range of 10^12 values is never enumerated to be counted."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Iterator, Union

from ..lang.source import Span
from ..lang.units import Value


@dataclass(frozen=True, slots=True)
class ListAxis:
    values: tuple[Value, ...]
    span: Span | None = field(default=None, compare=False)

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[Value]:
        return iter(self.values)

    def __getitem__(self, index: int) -> Value:
        return self.values[index]


@dataclass(frozen=True, slots=True)
class RangeAxis:
    """start, start+step, ... up to and including the last value <= end (exact arithmetic)."""

    type: str
    start: Fraction
    step: Fraction
    count: int
    span: Span | None = field(default=None, compare=False)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> Value:
        if not 0 <= index < self.count:
            raise IndexError(index)
        return _typed(self.type, self.start + index * self.step)

    def __iter__(self) -> Iterator[Value]:
        for index in range(self.count):
            yield _typed(self.type, self.start + index * self.step)

    @property
    def last(self) -> Value:
        return self[self.count - 1]


def _typed(type_: str, amount: Fraction) -> Value:
    if type_ == "int":
        return Value("int", int(amount))
    return Value(type_, amount)


def range_count(start: Fraction, end: Fraction, step: Fraction) -> int:
    """How many values start + k*step (k >= 0) are <= end; step > 0."""
    if end < start:
        return 0
    return int((end - start) // step) + 1


Axis = Union[ListAxis, RangeAxis]


def single(value: Value, span: Span | None = None) -> ListAxis:
    return ListAxis((value,), span)


def iter_product(axes: list) -> Iterator[tuple]:
    """The cross product of axes, first varying slowest, without materialising any axis
    (itertools.product would list a 10^6-value range before yielding the first tuple)."""
    if any(len(axis) == 0 for axis in axes):
        return
    index = [0] * len(axes)
    current = [axis[0] for axis in axes]
    while True:
        yield tuple(current)
        position = len(axes) - 1
        while position >= 0:
            index[position] += 1
            if index[position] < len(axes[position]):
                current[position] = axes[position][index[position]]
                break
            index[position] = 0
            current[position] = axes[position][0]
            position -= 1
        if position < 0:
            return
