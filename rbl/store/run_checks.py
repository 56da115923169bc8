"""Shape checks of what a run directory's files hold, so damage gives a message, not a traceback."""

from __future__ import annotations

import math
import re

from .metrics import LATENCY_COLUMNS, METRIC_COLUMNS
from .open_columns import ADDED_LATER, OPEN_LOOP_COLUMNS
from .shards import MAX_SHARDS

FAULT_KINDS = ("abort", "delay")
METRIC_LIMIT = 1e15          # no metric comes near (ms, counts, requests/s); beyond, sums overflow
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value) -> bool:
    return (is_int(value) or isinstance(value, float)) and math.isfinite(value)


def plan_problem(header) -> str | None:
    """What is wrong with a run directory's plan.json, as far as the runner uses it."""
    if not isinstance(header, dict):
        return f"it holds a JSON {type(header).__name__}, not an object"
    if header.get("rbl_plan") != 1:
        return "it is not an rbl plan (version 1)"
    for key in ("size", "rounds", "runs"):
        if not is_int(header.get(key)) or header[key] < 1:
            return f"`{key}` is not a positive integer"
    if not isinstance(header.get("target"), dict) or not isinstance(header["target"].get("path"), str):
        return "`target.path` is missing"
    if not isinstance(header.get("source"), dict) or not isinstance(header["source"].get("sha256"), str):
        return "`source.sha256` is missing"
    clients = header.get("clients")
    if not isinstance(clients, list) or not clients:
        return "`clients` is not a non-empty list"
    for client in clients:
        if not isinstance(client, dict) or not all(isinstance(client.get(k), str)
                                                   for k in ("label", "library", "service")):
            return "a client lacks its label, library or service"
    return None


def scenario_problem(scenario, client_labels: set[str]) -> str | None:
    """What is wrong with one line of scenarios.jsonl, as far as the executor uses it."""
    if not isinstance(scenario, dict):
        return f"a JSON {type(scenario).__name__}, not a scenario object"
    for key in ("id", "client", "library", "pattern"):
        if not isinstance(scenario.get(key), str):
            return f"`{key}` is missing or not a string"
    for key in ("index", "users", "successes", "max_requests"):
        if not is_int(scenario.get(key)) or scenario[key] < (0 if key == "index" else 1):
            return f"`{key}` is missing or not a {'non-negative' if key == 'index' else 'positive'} integer"
    if scenario["client"] not in client_labels:
        return f"client {scenario['client']!r} is not one of the plan's clients"
    if not isinstance(scenario.get("config"), dict):
        return "`config` is not an object"
    fault = scenario.get("fault")
    if not isinstance(fault, dict) or fault.get("kind") not in FAULT_KINDS:
        return "`fault.kind` is not abort or delay"
    if not is_number(fault.get("rate")) or not 0 <= fault["rate"] <= 100:
        return "`fault.rate` is not a percentage"
    needed = "status" if fault["kind"] == "abort" else "duration_ms"
    if not is_int(fault.get(needed)):
        return f"`fault.{needed}` is not an integer"
    return None


# every row the executor writes has these (the CSV's columns); values may be null
BASE_ROW_KEYS = ("userId", "startTime", "endTime", "users", "round", "lib", "strategy", "faultPercentage",
                 "faultType", "config", "scenarioId", "scenarioIndex", "client", "share", "stoppedBy",
                 "faultRateApplied", "proxyRequests")
ROW_KEYS = (*BASE_ROW_KEYS, *METRIC_COLUMNS, *LATENCY_COLUMNS)
# an open-loop round's row (runner/open_loop.py): the round's overload metrics instead of a user's
OPEN_LOOP_ROW_KEYS = (*BASE_ROW_KEYS, *OPEN_LOOP_COLUMNS)


def row_problem(row, users_of: dict[str, int], rounds: int) -> str | None:
    """What is wrong with one line of results.jsonl, given the plan's scenarios (id -> users)."""
    if not isinstance(row, dict):
        return f"a JSON {type(row).__name__}, not a row object"
    open_loop = "offeredRequests" in row
    missing = [key for key in (OPEN_LOOP_ROW_KEYS if open_loop else ROW_KEYS)
               if key not in row and key not in ADDED_LATER]
    if missing:
        return f"missing {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}"
    if not isinstance(row["scenarioId"], str) or row["scenarioId"] not in users_of:
        return "its scenarioId is not one of the plan's scenarios"
    users = users_of[row["scenarioId"]]
    if not is_int(row["round"]) or not 1 <= row["round"] <= rounds:
        return f"its round is not 1..{rounds}"
    if row["users"] != users or not is_int(row["users"]):
        return f"its users is not the scenario's {users}"
    if not is_int(row["userId"]) or not 1 <= row["userId"] <= users:
        return f"its userId is not 1..{users}"
    if not isinstance(row["config"], dict):
        return "its config is not an object"
    for key in (*(OPEN_LOOP_COLUMNS if open_loop else (*METRIC_COLUMNS, *LATENCY_COLUMNS)), "faultRateApplied"):
        if row.get(key) is not None and not (is_number(row[key]) and abs(row[key]) <= METRIC_LIMIT):
            return f"its {key} is not a number" + (f" up to {METRIC_LIMIT:.0e}" if is_number(row[key]) else "")
    return None


def failure_problem(failure, users_of: dict[str, int]) -> str | None:
    """What is wrong with one line of failures.jsonl, as far as report and merge use it."""
    if not isinstance(failure, dict):
        return f"a JSON {type(failure).__name__}, not a failure object"
    if not isinstance(failure.get("scenarioId"), str) or failure["scenarioId"] not in users_of:
        return "its scenarioId is not one of the plan's scenarios"
    if not is_int(failure.get("round")) or failure["round"] < 1:
        return "its round is not a positive integer"
    return None


def manifest_problem(manifest) -> str | None:
    """What is wrong with a manifest.json, as far as the runner, report, diff and merge use it."""
    if not isinstance(manifest, dict):
        return f"it holds a JSON {type(manifest).__name__}, not an object"
    if not isinstance(manifest.get("versions"), dict):
        return "`versions` is not an object"
    if not all(_scalar(v) for v in manifest["versions"].values()):
        return "`versions` holds something other than version strings"
    problem = _sessions_problem(manifest, "sessions")
    if problem:
        return problem
    for key in ("status", "rbl_version"):
        if manifest.get(key) is not None and not isinstance(manifest[key], str):
            return f"`{key}` is not a string"
    host = manifest.get("host")
    if host is not None and not _host(host):
        return "`host` is not an object of a hostname and other text or numbers"
    violations = manifest.get("oracleViolations")
    if violations is not None and not (isinstance(violations, dict) and
                                       all(is_int(n) and 0 <= n <= 2**63 - 1 for n in violations.values())):
        return "`oracleViolations` is not an object of counts"
    shard = manifest.get("shard")
    if shard is not None and not _shard(shard):
        return f"`shard` is not an object with 0 <= index < count <= {MAX_SHARDS}"
    shards = manifest.get("shards")
    if shards is not None:
        if not isinstance(shards, list) or not all(isinstance(s, dict) for s in shards):
            return "`shards` is not a list of objects"
        for number, entry in enumerate(shards):
            problem = _sessions_problem(entry, "sessions")
            if problem or (entry.get("host") is not None and not _host(entry["host"])):
                return f"`shards` entry {number + 1}: {problem or '`host` is not an object'}"
    return None


def _sessions_problem(holder: dict, key: str) -> str | None:
    sessions = holder.get(key, [])
    if not isinstance(sessions, list) or not all(isinstance(s, dict) for s in sessions):
        return f"`{key}` is not a list of objects"
    return None


def _scalar(value) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _host(host) -> bool:
    """A host record as `rbl run` writes it; its hostname is printed, so it holds no control character."""
    return (isinstance(host, dict) and all(_scalar(v) for v in host.values())
            and (host.get("hostname") is None or (isinstance(host["hostname"], str)
                                                   and not _CONTROL.search(host["hostname"]))))


def _shard(shard) -> bool:
    if not isinstance(shard, dict):
        return False
    index, count = shard.get("index"), shard.get("count")
    return (is_int(index) and is_int(count) and 0 <= index < count <= MAX_SHARDS
            and (shard.get("plan_sha256") is None or isinstance(shard["plan_sha256"], str)))
