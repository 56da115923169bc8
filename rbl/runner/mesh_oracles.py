"""Oracles for a mesh client's rounds: did its sidecar do what the configuration's Istio policies say?

The mesh client sends each call as one request; the sidecar retries, queues and refuses. So the
invariants are checked on the sidecar's counters and the requests' response flags over a round:

- mesh.requests: the fault proxy saw exactly the requests the sidecar sent upstream;
- mesh.retry.attempts: no request the sidecar forwarded went upstream more than attempts + 1
  times (Istio's default 2 retries when the client has no `retry` policy, none for `baseline`);
- mesh.pool: no request was refused by a connection-pool limit (UO) when the pool could not be
  full: each virtual user has at most one request in the sidecar, so with no more users than
  http2MaxRequests and http1MaxPendingRequests neither limit can be reached. (A retry refused by
  maxRetries also carries UO, on the upstream's answer: those are told apart by the sidecar's
  retry-overflow counter.)
"""

from __future__ import annotations

from ..libraries.composition import policies_of
from ..libraries.istio import DEFAULT_ATTEMPTS, ENVOY_FILTERS
from ..store.metrics import is_success
from .oracles import Violation



def allowed_attempts(pattern: str, config: dict) -> int:
    """Tries per forwarded request: the first and the retries the route allows."""
    if pattern == "baseline":
        return 1
    retry = policies_of(pattern, config).get("retry")
    return 1 + (DEFAULT_ATTEMPTS if retry is None else retry.get("attempts", DEFAULT_ATTEMPTS))


def pool_fits(pattern: str, config: dict, users: int) -> bool:
    """Whether `users` requests at once can never fill the pool (so none may be refused with UO);
    beside Envoy's adaptive concurrency or admission control filter any request may be refused."""
    policies = policies_of(pattern, config)
    if set(ENVOY_FILTERS) & set(policies):
        return False
    pool = policies.get("circuit_breaker", {})
    limits = [pool.get(name) for name in ("http2MaxRequests", "http1MaxPendingRequests")]
    return all(not limit or users <= limit for limit in limits)


def round_violations(scenario: dict, rows: list[dict], seen: int, sidecar: dict[str, int],
                     uncertain: bool) -> list[Violation]:
    """What one round of a mesh client breaks, from its rows (with response classes), the proxy's
    request count and the sidecar's counters over the round."""
    found: list[Violation] = []
    upstream = sidecar["sidecarUpstreamRequests"]
    if not uncertain and upstream != seen:
        found.append(Violation("mesh.requests", f"the sidecar sent {upstream} requests upstream, "
                                                f"the proxy saw {seen}"))
    # a retry refused by maxRetries returns the upstream's answer flagged UO: forwarded, not refused
    refused = sum(row["circuitBrokenRequests"] for row in rows) - sidecar["sidecarRetryOverflows"]
    answered_locally = refused + sum(row["ejectedRequests"] for row in rows)
    forwarded = sum(row["totalRequests"] for row in rows) - answered_locally
    attempts = allowed_attempts(scenario["pattern"], scenario["config"])
    if upstream > forwarded * attempts:
        found.append(Violation("mesh.retry.attempts", f"{forwarded} forwarded requests went upstream {upstream} "
                                                      f"times; at most {attempts} tries each"))
    if refused > 0 and pool_fits(scenario["pattern"], scenario["config"], scenario["users"]):
        found.append(Violation("mesh.pool", f"{refused} requests were refused by the connection pool (UO), "
                                            f"which {scenario['users']} users cannot fill"))
    return found


def call_violations(calls: list[dict]) -> list[Violation]:
    """The mesh client has no policy of its own: every call is one request."""
    found = []
    for number, call in enumerate(calls, 1):
        if not call.get("cut_short") and len(call["requests"]) != 1:
            found.append(Violation("mesh.client", f"call {number} sent {len(call['requests'])} requests; "
                                                  "the mesh client sends one per call"))
        elif call["requests"] and call["ok"] != is_success(call["requests"][0][2]):
            found.append(Violation("mesh.client", f"call {number} is reported ok={call['ok']} for status "
                                                  f"{call['requests'][0][2]}"))
    return found
