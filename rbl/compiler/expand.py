"""Expansion in Algorithm 1 order: for f in F, for u in U, for each client, for conf in CONF
(a varying target's points outermost, an open-loop load's inside each user count).

Within a client, axes form a cross product in declaration order, the first declared varying
slowest (as the original tool's expand_config_template). Everything streams: nothing holds the
scenario list, nor lists a long axis, so 10^6 scenarios (or an axis of 10^9 values) expand in
constant memory.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from typing import Iterator

from ..neutral.mapping import Mapped, map_neutral
from ..neutral.model import from_values
from .axes import iter_product
from .space import ClientSpec, Param, TestSpace
from ..lang.units import handoff, native_number

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def native(param: Param, value) -> object:
    return handoff(value, param.definition.handoff)


def fault_record(space: TestSpace, rate) -> dict:
    record = {"kind": space.fault.kind, "rate": native_number(rate.v)}
    if space.fault.at is not None:          # a topology's service injects them (else the proxy at its entry)
        record["at"] = space.fault.at
        if space.fault.by != "service":     # ... or its callers' sidecars do (or one caller's)
            record["by"] = space.fault.by
        if space.fault.caller is not None:
            record["from"] = space.fault.caller
    if space.fault.kind == "abort":
        record["status"] = space.fault.status
    else:
        record["duration_ms"] = handoff(space.fault.duration, "ms")
    return record


def neutral_values(params: tuple[Param, ...]) -> Iterator[dict]:
    """Each combination of a neutral client's parameters, {"backoff.initial": Value, ...}."""
    names = [p.name for p in params]
    for combo in iter_product([p.values for p in params]):
        yield dict(zip(names, combo))


def mapped_configurations(client: ClientSpec) -> Iterator[Mapped]:
    """A neutral client's configurations mapped onto its library, in expansion order."""
    for values in neutral_values(client.params):
        yield map_neutral(client.library.name, client.pattern, from_values(client.neutral.pattern, values))


def configurations(client: ClientSpec) -> Iterator[dict]:
    """Each configuration of a client as a library-native dict, in expansion order."""
    if client.neutral is not None:
        yield from (mapped.native for mapped in mapped_configurations(client))
        return
    names = [p.name for p in client.params]
    for combo in iter_product([p.values for p in client.params]):
        yield {name: native(p, v) for name, p, v in zip(names, client.params, combo)}


def native_parameters(client: ClientSpec, limit: int = 10_000) -> dict[str, list]:
    """Native parameter name -> its distinct values over (at most `limit` of) the configurations."""
    values: dict[str, list] = {}
    for config in itertools.islice(configurations(client), limit):
        for name, value in config.items():
            seen = values.setdefault(name, [])
            if value not in seen:
                seen.append(value)
    return values


# Values per axis whose JSON fragments are made once, up front; a longer axis (a range of 10^9
# values) has each fragment made when it is reached, so the first scenario comes at once and
# memory stays constant however long the axis.
FRAGMENT_LIMIT = 1 << 16


class _Fragments:
    """`"name":value` of each value of a long axis, made on demand (a sequence for iter_product)."""

    __slots__ = ("param", "key")

    def __init__(self, param: Param):
        self.param = param
        self.key = _dumps(param.name) + ":"

    def __len__(self) -> int:
        return len(self.param.values)

    def __getitem__(self, index: int) -> str:
        return self.key + _dumps(native(self.param, self.param.values[index]))


def _configuration_texts(client: ClientSpec) -> Iterator[str]:
    """The same configurations as JSON object texts, built from per-value fragments (fast path)."""
    if client.neutral is not None:
        yield from (_dumps(config) for config in configurations(client))
        return
    fragments = [[f"{_dumps(p.name)}:{_dumps(native(p, v))}" for v in p.values]
                 if len(p.values) <= FRAGMENT_LIMIT else _Fragments(p) for p in client.params]
    # itertools.product is the fast path, but it lists every axis before the first tuple
    combos = itertools.product(*fragments) if all(isinstance(f, list) for f in fragments) else iter_product(fragments)
    for combo in combos:
        yield "{" + ",".join(combo) + "}"


def scenario_id(body: str) -> str:
    """Stable id: a digest of everything that defines the scenario (not its position)."""
    return hashlib.blake2b(body.encode("utf-8"), digest_size=6).hexdigest()


def _client_prefix(client: ClientSpec) -> str:
    return (f'"client":{_dumps(client.label)},"library":{_dumps(client.library.name)},'
            f'"pattern":{_dumps(client.pattern.name)},"config":')


def _loads(space: TestSpace) -> list[dict | None]:
    """The load dimension's records (open loop), or [None]: closed-loop scenarios have no `load`."""
    return list(space.workload.records()) if space.workload is not None else [None]


def _targets(space: TestSpace) -> Iterator[dict | None]:
    """The target dimension's records, or None once: a target that does not vary is the plan's."""
    if space.targets is None:
        yield None
    else:
        yield from space.targets.records()


def iter_scenario_lines(space: TestSpace) -> Iterator[str]:
    """Scenario records as compact JSON texts, one per scenario, in Algorithm 1 order (a varying
    target's points outermost; an open-loop load's points inside each user count, before the clients)."""
    tail = f',"successes":{space.successes},"max_requests":{space.max_requests}}}'
    prefixes = [_client_prefix(client) for client in space.clients]
    loads = [f'"load":{_dumps(load)},' if load is not None else "" for load in _loads(space)]
    index = 0
    for target in _targets(space):
        opening = "{" if target is None else f'{{"target":{_dumps(target)},'
        for rate in space.fault.rates:           # one at a time: a range of 10^9 rates is never listed
            fault = f'{opening}"fault":{_dumps(fault_record(space, rate))},'
            for users in space.users:
                for load in loads:
                    head = f'{fault}"users":{users.v},{load}'
                    for client, prefix in zip(space.clients, prefixes):
                        for config in _configuration_texts(client):
                            body = head + prefix + config + tail
                            yield f'{{"id":"{scenario_id(body)}","index":{index},{body[1:]}'
                            index += 1


def iter_scenarios(space: TestSpace) -> Iterator[dict]:
    """Scenario records as dicts (the runner's view); identical to iter_scenario_lines."""
    index = 0
    loads = _loads(space)
    for target in _targets(space):
        opening = {} if target is None else {"target": target}
        for rate in space.fault.rates:
            fault = fault_record(space, rate)
            for users in space.users:
                for load in loads:
                    for client in space.clients:
                        for config in configurations(client):
                            body = {**opening, "fault": fault, "users": users.v, **({"load": load} if load else {}),
                                    "client": client.label, "library": client.library.name,
                                    "pattern": client.pattern.name, "config": config,
                                    "successes": space.successes, "max_requests": space.max_requests}
                            yield {"id": scenario_id(_dumps(body)), "index": index, **body}
                            index += 1
