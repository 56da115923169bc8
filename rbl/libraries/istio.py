"""Istio's facts that more than one part of rbl relies on, written once: the default retry policy
the sidecar runs, the retry conditions Istio's validation accepts, and its unset pool limit
(docs/library-semantics.md, section istio)."""

from __future__ import annotations

# Istio's default retry policy, for a route without `retries` (and the conditions of a retry
# without retryOn): since Istio 1.24 without 503, so over HTTP/1.1 it retries failed connections only
DEFAULT_ATTEMPTS = 2
DEFAULT_RETRY_ON = "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes"
# Istio's releases (docs/library-semantics.md, Istio's defaults by release): before 1.24 the default
# retry also retried a 503 answer; `retries.backoff` exists from 1.26. rbl read the defaults of
# 1.8 to 1.30; a later release is taken to behave as 1.30.
OLDEST_RELEASE = (1, 8)
NEWEST_RELEASE_READ = (1, 30)
RETRIES_503_UNTIL = (1, 24)          # the first release whose default retry leaves a 503 alone
BACKOFF_SINCE = (1, 26)
OLD_DEFAULT_RETRY_ON = DEFAULT_RETRY_ON + ",503"
RELEASE_FORMAT = "1.MINOR or 1.MINOR.PATCH, e.g. \"1.14\""


def parse_release(text: str) -> tuple[int, int] | None:
    """(1, minor) of "1.minor" or "1.minor.patch"; None for anything else."""
    parts = text.split(".")
    if len(parts) not in (2, 3) or not all(part.isascii() and part.isdigit() and len(part) <= 4 for part in parts):
        return None
    if parts[0] != "1" or any(len(part) > 1 and part.startswith("0") for part in parts):
        return None
    return 1, int(parts[1])


def default_retry_on(release: str | None) -> str:
    """The conditions of Istio's default retry (and of a `retries` without retryOn) in a release;
    None: today's."""
    parsed = parse_release(release) if release else None
    return OLD_DEFAULT_RETRY_ON if parsed is not None and parsed < RETRIES_503_UNTIL else DEFAULT_RETRY_ON


def release_of(header: dict) -> str | None:
    """The Istio release a plan's mesh policies follow (its `istio.version`); None: today's."""
    return (header.get("istio") or {}).get("version")


# the conditions Istio's validation accepts in retryOn: Envoy's and gRPC's (besides HTTP statuses)
RETRY_CONDITIONS = ("5xx", "gateway-error", "reset", "reset-before-request", "connect-failure", "retriable-4xx",
                    "refused-stream", "retriable-status-codes", "retriable-headers", "envoy-ratelimited",
                    "http3-post-connect-failure", "cancelled", "deadline-exceeded", "internal",
                    "resource-exhausted", "unavailable")
# the conditions under which Envoy retries an upstream 5xx answer (an abort fault's)
CONDITIONS_RETRYING_5XX = ("5xx", "gateway-error", "retriable-status-codes")
UNLIMITED = 4294967295           # Istio's threshold for a connection-pool limit left unset (2^32-1)

# Envoy's HTTP filters rbl runs in a client's sidecar, which Istio has no API for (rbl/mesh/sidecar_filters.py):
# on one hop only, refused by `rbl compile --target istio`
ENVOY_FILTERS = ("adaptive_concurrency", "admission_control")

# A policy's placement (its `host`): the service whose callers' sidecars enforce it; `all`, every service
HOST = "host"
ALL_HOSTS = "all"


def placed_policies(policies: dict[str, dict], entry: str, services: tuple[str, ...]) -> dict[str, dict[str, dict]]:
    """{service: {policy: its parameters without `host`}} of one configuration's policies (policies_of's
    result) on a topology: a policy goes where its host says (the entry when unset, every service for
    `all`). A service no policy is placed on maps to {}: Istio's defaults govern calls of it."""
    placed: dict[str, dict[str, dict]] = {name: {} for name in services}
    for policy, parameters in policies.items():
        host = parameters.get(HOST, entry)
        own = {key: value for key, value in parameters.items() if key != HOST}
        for service in (services if host == ALL_HOSTS else (host,)):
            if service not in placed:
                raise ValueError(f"{policy} is placed on {host!r}, which is not a service of the topology")
            placed[service][policy] = own
    return placed


# The controllers: patterns whose one parameter rbl's runner retunes during a round (rbl/runner/
# controllers.py). In force at any moment is a static policy (enforced_policies): the controlled
# parameter's current value, and what it implies.
ADAPTIVE_BREAKER = "adaptive_breaker"
AIMD_RETRY = "aimd_retry"
CONTROLLED = {ADAPTIVE_BREAKER: "http2MaxRequests", AIMD_RETRY: "attempts"}
# the bounds of each controlled parameter (the catalogue's): a controller's value is kept within them
CONTROLLED_BOUNDS = {ADAPTIVE_BREAKER: (1, 2147483647), AIMD_RETRY: (0, 2147483647)}
# the algorithm each controller pattern runs unless its `controller` names another
BUILT_IN_CONTROLLERS = {ADAPTIVE_BREAKER: "haoc", AIMD_RETRY: "aimd"}
CONTROLLER_GROUP = "rbl.controllers"        # the entry-point group of controllers of one's own


def aimd_per_try_timeout_ms(target_ms: float, attempts: int) -> int | None:
    """aimd_retry's per-try timeout for `attempts` retries: max(1, target / attempts) ms; none at 0."""
    return max(1, int(target_ms / attempts)) if attempts > 0 else None


def enforced_policies(policies: dict[str, dict]) -> dict[str, dict]:
    """The static policies a configuration holds in force (policies_of's result, a controller's
    controlled parameter at its current value): adaptive_breaker as the circuit breaker of that
    http2MaxRequests, aimd_retry as the retry of those attempts and their per-try timeout. Other
    policies are returned as they are."""
    if not any(name in CONTROLLED for name in policies):
        return policies
    enforced: dict[str, dict] = {}
    for policy, parameters in policies.items():
        placement = {HOST: parameters[HOST]} if HOST in parameters else {}
        if policy == ADAPTIVE_BREAKER:
            pool = enforced.setdefault("circuit_breaker", {})
            pool.update({"http2MaxRequests": parameters["http2MaxRequests"], **placement})
        elif policy == AIMD_RETRY:
            attempts = parameters["attempts"]
            retry = {"attempts": attempts, **placement}
            timeout = aimd_per_try_timeout_ms(parameters["target"], attempts)
            if timeout is not None:
                retry["perTryTimeout"] = timeout
                if "retryOn" in parameters:
                    retry["retryOn"] = parameters["retryOn"]
            enforced["retry"] = retry
        else:
            enforced.setdefault(policy, {}).update(parameters)
    return enforced
