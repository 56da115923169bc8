"""How long a plan will take, before it runs: `rbl plan` and `rbl run --dry-run` print it.

A model, not a measurement: each virtual user calls until `successes` successful calls (or
`max_requests` requests). Under an abort fault at rate f a retry with waits w_1..w_{a-1} makes
sum f^k requests per call and waits sum f^k w_k, and a call succeeds with probability 1 - f^a; a
breaker adds its open time each time it opens. A request takes the request time (measured by
`rbl run --dry-run`, or `--request-time`), longer when more users share this machine's cores.
Users run concurrently, rounds one after another, each with a fixed overhead (setting and reading
back the fault, starting the users)."""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass
from typing import Iterable, Iterator

from .neutral.semantics import BreakerBehaviour, RetryBehaviour, behaviour_of
from .plan_records import load_of

DEFAULT_REQUEST_MS = 1.6        # one request through the proxy to httpbin, one user (measured here)
ROUND_OVERHEAD_S = 0.12         # per round: fault set and read back, jobs sent, results stored
STARTUP_S = 4.0                 # target, proxy and client services start (a JVM client included)
SAMPLE = 20_000                 # scenarios modelled; larger plans are sampled evenly
TARGET_RESTART_S = 2.0          # a varying target's new CPU budget: its replicas stop and start again


@dataclass(frozen=True)
class Estimate:
    seconds: float
    request_ms: float
    measured: bool

    def text(self) -> str:
        source = "measured" if self.measured else "assumed"
        return f"about {duration_text(self.seconds)} (estimated with {self.request_ms:.1f} ms per request, {source})"


def duration_text(seconds: float) -> str:
    """`45 s`, `12 min`, `3.5 h`, `4.2 days`."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds < 730 * 86400:
        return f"{seconds / 86400:.1f} days"
    years = seconds / (365.25 * 86400)
    return f"{years:.0f} years" if years < 1e6 else "over a million years"


def request_time_ms(base_ms: float, users: int, cpus: int | None = None) -> float:
    """Past one user per core, users queue for the same cores: a request takes proportionally longer."""
    cpus = cpus or os.cpu_count() or 1
    return base_ms * max(1.0, users / cpus)


def user_seconds(scenario: dict, base_ms: float) -> float:
    """The expected time one virtual user of the scenario takes, in seconds (an open-loop round
    takes its load's duration, plus the timeout of the last requests at worst)."""
    load = load_of(scenario)
    if load is not None:
        return load.duration_s
    fault = scenario["fault"]
    rate = min(max(float(fault["rate"]) / 100.0, 0.0), 1.0)
    request = request_time_ms(base_ms, scenario["users"])
    delay_ms = fault.get("duration_ms") if fault["kind"] == "delay" else None
    if delay_ms is not None:
        request += rate * delay_ms                  # delayed requests still succeed
        rate = 0.0
    successes, cap = scenario["successes"], scenario["max_requests"]
    behaviour = None
    if scenario["pattern"] != "baseline":
        try:
            behaviour = behaviour_of(scenario["library"], scenario["pattern"], scenario["config"], delay_ms)
        except (KeyError, TypeError, ValueError, OverflowError):
            behaviour = None                        # a custom library: modelled as a baseline
    if isinstance(behaviour, RetryBehaviour) and behaviour.attempts > 1:
        attempts = behaviour.attempts
        waits = list(behaviour.waits or [0.0] * (attempts - 1))[:attempts - 1]
        per_call = sum(rate ** k for k in range(attempts))
        wait_ms = sum(rate ** (k + 1) * w for k, w in enumerate(waits))
        success = 1.0 - rate ** attempts
        calls = successes / success if success > 0 else cap
        requests = min(cap, calls * per_call)
        return requests * request / 1000.0 + (requests / per_call) * wait_ms / 1000.0
    requests = min(cap, successes / (1.0 - rate)) if rate < 1.0 else cap
    seconds = requests * request / 1000.0
    if isinstance(behaviour, BreakerBehaviour):
        n = behaviour.consecutive or 1
        # a run of n failures in a row opens it: about requests * f^n * (1 - f) times
        openings = requests * rate ** n * (1.0 - rate) if rate < 1.0 else 1.0
        seconds += min(openings, requests) * behaviour.open_for_ms / 1000.0
    return seconds


def target_restarts(header: dict) -> float:
    """How often a run of the plan restarts its target for a new CPU budget: between budgets in
    the sequential order, at most every round but the first in a shuffled or blocked one."""
    cpus = (header.get("target") or {}).get("axes", {}).get("cpus")
    budgets = cpus["step_count"] if isinstance(cpus, dict) else len(cpus or [None])
    if budgets < 2:
        return 0.0
    if (header.get("order") or {}).get("kind", "sequential") == "sequential":
        return budgets - 1.0
    runs = header["size"] * (header["rounds"] + header.get("warmup", 0))
    return runs * (1 - 1 / budgets)


def estimate(scenarios: Iterable[tuple[dict, float]], size: int, rounds: int, base_ms: float | None = None,
             restarts: float = 0.0) -> Estimate:
    """The expected duration of a plan of `size` scenarios from an even sample of them, each
    with its weight (the share of the plan it stands for), and `restarts` of its target."""
    measured = base_ms is not None
    base = base_ms if base_ms is not None else DEFAULT_REQUEST_MS
    total, weights = 0.0, 0.0
    for scenario, weight in scenarios:
        total += weight * user_seconds(scenario, base)
        weights += weight
    per_scenario = total / weights if weights else 0.0
    seconds = STARTUP_S + size * rounds * (per_scenario + ROUND_OVERHEAD_S) + restarts * TARGET_RESTART_S
    return Estimate(seconds, base, measured)


def sample_lines(lines: Iterable[str], size: int) -> Iterator[tuple[dict, float]]:
    """An even sample of a plan file's scenario lines (every k-th)."""
    stride = max(1, size // SAMPLE)
    for index, line in enumerate(lines):
        if index % stride == 0:
            yield json.loads(line), 1.0


def sample_space(space) -> Iterator[dict]:
    """An even sample of a compiled space's scenarios, without expanding it (a space of 10^16
    scenarios is sampled as fast as a small one): evenly spaced fault rates and user counts,
    and each client's first configurations, weighted by the client's share of sum |CONF_i|."""
    from .compiler.expand import configurations, fault_record

    def spaced(axis, count: int) -> list:
        n = len(axis)
        count = min(n, count)
        return [axis[i * n // count] for i in range(count)]

    rates, users = spaced(space.fault.rates, 5), spaced(space.users, 5)
    loads = list(itertools.islice(space.workload.records(), 50)) if space.workload is not None else [None]
    total = sum(c.configurations for c in space.clients)
    for client in space.clients:
        configs = list(itertools.islice(configurations(client), 200))
        weight = client.configurations / total / len(configs)    # the client's share of sum |CONF_i|
        for rate in rates:
            fault = fault_record(space, rate)
            for user in users:
                for config, load in itertools.product(configs, loads):
                    yield ({"fault": fault, "users": user.v, **({"load": load} if load else {}),
                            "library": client.library.name, "pattern": client.pattern.name, "config": config,
                            "successes": space.successes, "max_requests": space.max_requests}, weight / len(loads))
