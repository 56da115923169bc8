"""Pass: the equivalence lint. When a space compares clients of one pattern across libraries,
their native configurations should behave alike; warn (W0501) with both behaviours when they do
not, e.g. the seed paper's Listing 4 retry pair (Polly waits pow^k * s, Resilience4j s * m^(k-1)
truncated step by step). Behaviours come from each library's formulas (rbl/neutral/semantics.py)."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations, islice

from ...neutral.semantics import Behaviour, behaviour_of, equivalent
from .. import ast
from ..expand import configurations
from ..space import ClientSpec
from .context import CheckContext

# Configurations compared per client; a space with more compares its first ones.
COMPARED_CONFIGURATIONS = 1000


def check_equivalence(ctx: CheckContext) -> None:
    if ctx.space is None or ctx.diags.has_errors:
        return
    blocks = [item for item in ctx.space.body if isinstance(item, ast.Client)]
    headers = {spec.label: block.library.span.to(block.pattern.span) for spec, block in zip(ctx.clients, blocks)}
    delay_ms = fault_delay_ms(ctx.settings)
    pairs = [(a, b) for a, b in combinations(ctx.clients, 2)
             if a.pattern.name == b.pattern.name and a.library.name != b.library.name]
    compared = {client.label: client for pair in pairs for client in pair}
    behaviours = {label: client_behaviours(client, delay_ms) for label, client in compared.items()}
    for a, b in pairs:
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
            help="configure both from one neutral value (`let r = retry(...)`, then `use r` in each client); "
                 "`rbl plan --mapping` shows every configuration side by side")


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
