"""How a configuration is named in the summary, the report's tables and the figures' legends: the
client and the values of its axes in the spec's spelling, with units (`tenacity.retry
multiplier=5ms`, not `multiplier=0.005`), from the labels the plan records for each axis value.
Plans without them (older ones) fall back to the native values."""

from __future__ import annotations

import json

# One wording everywhere: the summary, the report's table, CSV headers and figure axes.
METRIC_TITLES = {
    "successTimePerRequest": "average success time (ms)",
    "totalExecutionTime": "total execution time (ms)",
    "circuitBrokenRequests": "circuit-broken requests (sidecar 503 UO)",
    "sidecarRetries": "sidecar retries in the round",
    # library patterns (rbl/store/metrics.py PATTERN_COLUMNS)
    "timedOutCalls": "calls a timeout ended",
    "breakerRejectedCalls": "calls a circuit breaker refused",
    "bulkheadRejectedCalls": "calls a bulkhead refused",
    "rateLimitedCalls": "calls a rate limiter refused",
    "rejectionWaitTime": "mean time of a refused call until its refusal (ms)",
    "hedgedRequests": "hedged requests",
    "fallbackCalls": "calls a fallback answered",
    # open-loop rounds (rbl/store/open_metrics.py)
    "carriedThroughput": "carried throughput (successes / offered)",
    "carriedRate": "carried rate (successes/s)",
    "offeredRate": "offered rate (requests/s)",
    "successP99Ms": "p99 of successful response time (ms)",
    "successP95Ms": "p95 of successful response time (ms)",
    "successP50Ms": "median successful response time (ms)",
    "p95UnderSloShare": "share of windows with p95 under the SLO",
    "windowP50Ms": "RT50: windows' median successful response time, averaged (ms)",
    "windowP95Ms": "RT95: windows' p95 of successful response time, averaged (ms)",
    # a topology's round along its chain (rbl/store/metrics.py CHAIN_COLUMNS)
    "chainAmplification": "requests along the chain per entry request",
    "chainRefusedCalls": "calls refused along the chain (UO)",
    "chainFailedCalls": "calls failed along the chain",
    "chainWastedCpuSeconds": "CPU wasted along the chain (s)",
    "chainCpuSeconds": "CPU spent along the chain (s)",
}


class Labeller:
    """Labels for the scenarios of one plan."""

    def __init__(self, header: dict):
        self._axes: dict[str, list[str]] = {}
        self._texts: dict[tuple[str, str], dict[str, str]] = {}
        for client in header.get("clients", []):
            label = client["label"]
            self._axes[label] = list(client.get("axes", []))
            for axis in self._axes[label]:
                record = client.get("parameters", {}).get(axis, {})
                values, labels = record.get("values"), record.get("labels")
                if isinstance(values, list) and isinstance(labels, list) and len(labels) == len(values):
                    self._texts[label, axis] = {_key(v): text for v, text in zip(values, labels)}

    def axes(self, client: str) -> list[str]:
        return self._axes.get(client, [])

    def configuration(self, scenario: dict) -> str:
        """The varying part alone, e.g. `initialIntervalMillis=20ms` ('' for a client without axes)."""
        client, config = scenario["client"], scenario.get("config", {})
        parts: list[str] = []
        for axis in self.axes(client):
            value = config.get(axis)
            text = self._texts.get((client, axis), {}).get(_key(value)) or f"{axis}={_native(value)}"
            if text not in parts:          # a neutral axis can drive several native ones
                parts.append(text)
        return " ".join(parts)

    def label(self, scenario: dict) -> str:
        """Client and configuration, e.g. `resilience4j.retry initialIntervalMillis=20ms`."""
        return f"{scenario['client']} {self.configuration(scenario)}".strip()


def _key(value) -> str:
    return json.dumps(value, sort_keys=True)


def _native(value) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    return str(value)


def plural(count: int, word: str, many: str | None = None) -> str:
    """`1 round`, `2 rounds`."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


def load_of(scenario: dict) -> dict:
    """An open-loop scenario's load record (rbl/compiler/workload.py); {} for a closed-loop one."""
    load = scenario.get("load")
    return load if isinstance(load, dict) else {}


def number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _rate_text(rate) -> str | None:
    """A rate in the language's spelling: `120% of capacity` (load.rate) or `200 req/s` (load.rps)."""
    if not isinstance(rate, dict):
        return None
    if number(rate.get("share")) is not None:
        return f"{rate['share'] * 100:g}% of capacity"
    if number(rate.get("rps")) is not None:
        return f"{rate['rps']:g} req/s"
    return None


def load_text(scenario: dict) -> str:
    """`load 120% of capacity, poisson, spikes to 140% of capacity`; '' for a closed-loop scenario.
    Keys a plan lacks are left out (the runner's record may grow)."""
    if "load" not in scenario:
        return ""
    load = load_of(scenario)
    if load.get("kind") == "users":
        profile = load.get("profile") if isinstance(load.get("profile"), dict) else {}
        trace = f", active by trace {profile.get('source')}" if profile.get("kind") == "trace" else ""
        return f"load {load.get('users', '?')} users thinking {number(load.get('think_ms')) or 0:g} ms{trace}"
    parts = [f"load {_rate_text(load.get('rate')) or '?'}"]
    if isinstance(load.get("arrivals"), str):
        parts.append(load["arrivals"])
    profile = load.get("profile")
    if isinstance(profile, dict) and isinstance(profile.get("kind"), str) and profile["kind"] != "constant":
        peak = _rate_text(profile.get("peak"))
        parts.append(f"{profile['kind']} to {peak}" if peak else profile["kind"])
    return ", ".join(parts)


def target_phrase(scenario: dict) -> str:
    """`, on /factorial/5000 with 0.5 CPU`: a scenario's point of a varying target; '' for a plan
    whose target does not vary."""
    target = scenario.get("target")
    if not isinstance(target, dict):
        return ""
    cpus = number(target.get("cpus"))
    return f", on {target.get('path', '?')}" + (f" with {cpus:g} CPU" if cpus is not None else "")
