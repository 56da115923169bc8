"""Pass: the equivalence lint. When a space compares clients of one pattern across libraries,
their native configurations should behave alike; warn (W0501) with both behaviours when they do
not, e.g. the seed paper's Listing 4 retry pair (Polly waits pow^k * s, Resilience4j s * m^(k-1)
truncated step by step). Behaviours come from each library's formulas (rbl/neutral/semantics.py)."""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from fractions import Fraction
from itertools import islice
from typing import Iterator

from ...neutral.semantics import Behaviour, behaviour_of, equivalent
from ...lang import ast
from ..expand import configurations
from ..space import ClientSpec
from .context import CheckContext

# Configurations compared per client; a space with more compares its first ones.
COMPARED_CONFIGURATIONS = 1000
# Client pairs compared; a space with more compares its first ones (at most 50 warnings show).
COMPARED_PAIRS = 100


def check_equivalence(ctx: CheckContext) -> None:
    if ctx.space is None or ctx.diags.has_errors:
        return
    blocks = [item for item in ctx.space.body if isinstance(item, ast.Client)]
    headers = {spec.label: block.library.span.to(block.pattern.span) for spec, block in zip(ctx.clients, blocks)}
    delay_ms = fault_delay_ms(ctx.settings)
    behaviours: dict[str, list[Behaviour] | None] = {}
    for a, b in islice(compared_pairs(ctx.clients), COMPARED_PAIRS):
        if _approximated(a) or _approximated(b):
            continue                      # the spec accepted the difference (W0503 said what it is)
        for client in (a, b):
            if client.label not in behaviours:
                behaviours[client.label] = client_behaviours(client, delay_ms)
        if behaviours[a.label] is None or behaviours[b.label] is None:
            continue                      # a library rbl has no formulas for
        mismatch = first_mismatch(behaviours[a.label], behaviours[b.label])
        if mismatch is None:
            continue
        (i, left), (j, right) = mismatch
        ctx.diags.warning(
            "W0501", f"`{a.label}` and `{b.label}` are compared but do not behave alike", headers[b.label],
            f"compared with `{a.label}`", secondary=((headers[a.label], "this client"),),
            notes=(f"{a.label}, configuration {i + 1}: {left.describe()}",
                   f"{b.label}, configuration {j + 1}: {right.describe()}"),
            help=f"configure both from one neutral value (`let v = {a.pattern.name}(...)`, then `use v` in each "
                 "client); `rbl plan --mapping` shows every configuration side by side")


def _approximated(client: ClientSpec) -> bool:
    return client.neutral is not None and bool(client.neutral.approximations)


def compared_pairs(clients: list[ClientSpec]) -> Iterator[tuple[ClientSpec, ClientSpec]]:
    """Pairs (a, b), a declared before b, of one pattern in different libraries, in order of a.
    Lazy, and never scans clients of a's own library, so the first pairs of 10^4 clients come
    at once (all pairs, with itertools.combinations, were quadratic)."""
    later: dict[tuple[str, str], list[tuple[int, ClientSpec]]] = defaultdict(list)
    libraries: dict[str, list[str]] = defaultdict(list)         # pattern -> its libraries, in order
    for index, client in enumerate(clients):
        key = (client.pattern.name, client.library.name)
        if key not in later:
            libraries[client.pattern.name].append(client.library.name)
        later[key].append((index, client))
    for index, a in enumerate(clients):
        for library in libraries[a.pattern.name]:
            if library == a.library.name:
                continue
            members = later[(a.pattern.name, library)]
            start = bisect_right(members, index, key=lambda member: member[0])
            for _, b in members[start:]:
                yield a, b


def fault_delay_ms(settings: dict) -> float | None:
    """The injected delay in ms when the space injects delays (it can make calls slow)."""
    kind = settings.get("fault.kind")
    duration = settings.get("fault.duration")
    if kind is None or kind.v != "delay" or duration is None:
        return None
    return float(Fraction(duration.v) / 1_000_000)


def client_behaviours(client: ClientSpec, delay_ms: float | None = None,
                      limit: int = COMPARED_CONFIGURATIONS) -> list[Behaviour] | None:
    behaviours = [behaviour_of(client.library.name, client.pattern.name, config, delay_ms)
                  for config in islice(configurations(client), limit)]
    return None if any(b is None for b in behaviours) else behaviours


def first_mismatch(left: list[Behaviour], right: list[Behaviour]):
    """The first configuration pair that differs: pairwise when both clients have as many
    configurations (axes compared in order), otherwise one without any equivalent on the other side."""
    if len(left) == len(right):
        for i, (x, y) in enumerate(zip(left, right)):
            if not equivalent(x, y):
                return (i, x), (i, y)
        return None
    for mine, theirs, swap in ((left, right, False), (right, left, True)):
        for i, x in enumerate(mine):
            if not any(equivalent(x, y) for y in theirs):
                j = min(i, len(theirs) - 1)
                pair = ((i, x), (j, theirs[j]))
                return pair[::-1] if swap else pair
    return None
