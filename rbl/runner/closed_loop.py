"""The closed-loop driver: a round's `u` virtual users start at once, each one POST /run to the
client service (protocol v1), which loops through the library's strategy until the user's successes,
its request budget or its time is used up; each user's observations become one row of metrics
(store/metrics.py), with the oracles' verdicts on them (oracles.py, pattern_oracles.py, and
mesh_oracles.py for a mesh client's sidecar)."""

from __future__ import annotations

import http.client
import json
from concurrent.futures import Future, ThreadPoolExecutor, wait
from datetime import datetime, timezone

from ..libraries.composition import policies_of
from ..store.metrics import runs_measured_patterns, vu_metrics
from ..plan_records import ClientKind
from . import mesh_oracles
from .backend import RoundFailed
from .fault_control import fault_counts
from .oracles import Violation, as_records, fault_rate_violation, request_count_violation, user_violations
from .pattern_oracles import pattern_violations
from .round import Counters, RoundSetup

VU_TIME_SHARE = 0.9       # of the round timeout, given to a virtual user's loop (see protocol.py)


def strategy_for(scenario: dict) -> list[dict]:
    """The protocol's strategy list: empty for the baseline, else each pattern (several for a composed
    client, outermost first, as written) with its part of the configuration."""
    return [{"pattern": name, "params": params}
            for name, params in policies_of(scenario["pattern"], scenario["config"]).items()]


def post_job(address: tuple[str, int], job: dict, timeout: float) -> tuple[dict, str, str]:
    """One virtual user: POST /run and wait for its observations (with start/end timestamps)."""
    started = _now()
    connection = http.client.HTTPConnection(*address, timeout=timeout)
    try:
        connection.request("POST", "/run", body=json.dumps(job), headers={"content-type": "application/json"})
        response = connection.getresponse()
        body = response.read()
    except TimeoutError as error:
        raise RoundFailed(f"virtual user {job['vu']}: no answer from the client service within {timeout:g} s") from error
    except (OSError, http.client.HTTPException) as error:
        raise RoundFailed(f"virtual user {job['vu']}: the client service connection failed: {error}") from error
    finally:
        connection.close()
    if response.status != 200:
        raise RoundFailed(f"virtual user {job['vu']}: the client service answered HTTP {response.status}: "
                          f"{body.decode(errors='replace')[:300]}")
    try:
        observation = json.loads(body)
    except (ValueError, RecursionError):
        observation = None
    if not isinstance(observation, dict):
        raise RoundFailed(f"virtual user {job['vu']}: the client service answered something that is not "
                          f"a JSON object: {body[:100]!r}")
    return observation, started, _now()


class VirtualUsers:
    """The round's virtual users while they run: one future per user."""

    def __init__(self, futures: list[Future]):
        self.futures = futures

    def wait(self, timeout_s: float) -> bool:
        _, pending = wait(self.futures, timeout=timeout_s)
        return not pending

    def result(self) -> list[tuple[dict, str, str]]:
        results, errors = [], []
        for future in self.futures:
            try:
                results.append(future.result())
            except RoundFailed as error:
                errors.append(str(error))
        if errors:
            raise RoundFailed(errors[0] + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
        return results

    def stop(self) -> None:
        for future in self.futures:
            future.cancel()             # users not started yet; a started one ends at its own timeout


class ClosedLoopDriver:
    """Drives a round with virtual users (DESIGN: the paper's closed loop)."""

    def __init__(self, pool: ThreadPoolExecutor, round_timeout: float, rounds_in_run: int):
        self.pool = pool
        self.round_timeout = round_timeout
        self.rounds_in_run = rounds_in_run

    def start(self, setup: RoundSetup) -> VirtualUsers:
        scenario = setup.scenario
        base_job = {"strategy": strategy_for(scenario), "target_url": setup.target_url,
                    "successes": scenario["successes"], "max_requests": scenario["max_requests"],
                    "share": setup.client.get("share", "user"), "instance": setup.instance,
                    # the client ends a virtual user's loop itself before the runner gives up on it
                    "max_duration_ms": int(self.round_timeout * 1000 * VU_TIME_SHARE)}
        return VirtualUsers([self.pool.submit(post_job, setup.client_address, {**base_job, "vu": vu}, self.round_timeout)
                             for vu in range(1, scenario["users"] + 1)])

    def settle_s(self, setup: RoundSetup) -> None:
        return None                     # each user waited for its answers: nothing is left queued

    def busy_s(self, setup: RoundSetup, driven: list) -> float:
        return max((observation["total_us"] for observation, _, _ in driven), default=0) / 1e6

    def rows(self, setup: RoundSetup, driven: list, counters: Counters, times: tuple[str, str]) -> list[dict]:
        try:
            rows = [user_row(setup, counters, observation, started, ended) for observation, started, ended in driven]
            self._check_oracles(setup, rows, [observation for observation, _, _ in driven], counters)
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise RoundFailed(f"the client service answered an observation rbl cannot read "
                              f"({type(error).__name__}: {error})") from error
        return rows

    def _check_oracles(self, setup: RoundSetup, rows: list[dict], observations: list[dict],
                       counters: Counters) -> None:
        """Each row's oracleViolations: its user's, then the round's (every user shares them)."""
        scenario, fault = setup.scenario, setup.scenario["fault"]
        seen = counters.proxy.get("downstream_rq_total", 0)
        met, injected = fault_counts(fault, counters.proxy)
        shared: list[Violation] = []
        rate = fault_rate_violation(fault["rate"], injected, met, self.rounds_in_run)
        shared += [rate] if rate else []
        uncertain = any(call.get("cut_short") or any(request[2] == 0 for request in call["requests"])
                        for o in observations for call in o["calls"])
        mesh = setup.client_kind is ClientKind.MESH
        if mesh:
            shared += mesh_oracles.round_violations(scenario, rows, seen, counters.sidecar, uncertain)
        else:
            count = request_count_violation(sum(row["totalRequests"] for row in rows), seen, uncertain)
            shared += [count] if count else []
        share = setup.client.get("share", "user")
        for row, observation in zip(rows, observations):
            own = (mesh_oracles.call_violations(observation["calls"]) if mesh
                   else user_violations(scenario, share, observation) + pattern_violations(scenario, share, observation))
            row["oracleViolations"] = as_records(own + shared)


def user_row(setup: RoundSetup, counters: Counters, observation: dict, started: str, ended: str) -> dict:
    """One virtual user's row of results.jsonl: the scenario's keys and its Table 2 metrics."""
    scenario, fault = setup.scenario, setup.scenario["fault"]
    met, injected = fault_counts(fault, counters.proxy)
    sidecar = counters.sidecar
    return {
        "userId": observation["vu"], "startTime": started, "endTime": ended,
        "users": scenario["users"], "round": setup.round_number,
        "lib": scenario["library"], "strategy": scenario["pattern"],
        "faultPercentage": fault["rate"], "faultType": fault["kind"],
        "faultStatus": fault.get("status"), "faultDuration": fault.get("duration_ms"),
        **vu_metrics(observation, sidecar=setup.client_kind is ClientKind.MESH,
                     patterns=runs_measured_patterns(scenario["pattern"])),
        "config": scenario["config"],
        "scenarioId": scenario["id"], "scenarioIndex": scenario["index"],
        "client": scenario["client"], "share": setup.client.get("share", "user"),
        "libraryVersion": observation.get("version"),
        "stoppedBy": observation.get("stopped_by"),
        "faultRateApplied": round(100 * injected / met, 4) if met else None,
        "proxyRequests": counters.proxy.get("downstream_rq_total", 0),
        "warmup": setup.warmup,
        **(sidecar or {}),
    }


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")
