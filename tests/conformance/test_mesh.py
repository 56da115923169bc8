"""The mesh client (`--library istio`) passes the conformance checks that apply to it, through a
real sidecar Envoy configured by rbl's Istio translation (rbl/mesh/sidecar_config.py), rbl's
fault proxy (real Envoy) and a recording target; a mis-mapped translation fails them.

What applies of the library checks: health, the protocol's replies and 400s, baseline's one
request per call. What does not: waits and breakers run by the client itself (its policies are the
sidecar's); mesh_checks.py checks those instead, on the sidecar's behaviour."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pytest

from rbl.mesh import sidecar as sidecar_module

from . import checks
from .mesh_checks import (ADAPTIVE, adaptive_concurrency_problems, admission_control_problems, attempts_problems,
                          backoff_problems,
                          longer_backoff_problems, pool_problems, reply_shape_problems, retry_budget_problems,
                          timeout_problems)
from .mesh_sidecar import MeshRig, mesh_rig
from .profiles import Profile

ISTIO = Profile("istio", "mesh", "istio", ("baseline", "retry", "circuit_breaker", "outlier_detection", "timeout",
                                          "retry_budget", "adaptive_concurrency", "admission_control"))


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    with mesh_rig(tmp_path_factory.mktemp("mesh")) as started:
        yield started


@pytest.fixture(autouse=True)
def no_fault(rig):
    rig.proxy.set_fault(abort__abort_percent=0, delay__fixed_delay_percent=0, delay__fixed_duration_ms=0)


@dataclass
class SidecarFront:
    """What checks.py calls a proxy, for a mesh client: requests go to the sidecar (the client's
    only target), faults are set on the fault proxy behind it."""
    rig: MeshRig

    @property
    def data_port(self) -> int:
        return self.rig.sidecar.addresses.listen_port

    def set_fault(self, **keys) -> None:
        self.rig.proxy.set_fault(**keys)


# -- the library checks that apply ------------------------------------------------------------------
def test_health(rig):
    checks.check_health(rig.client_url, ISTIO)


def test_reply_shape(rig):
    assert reply_shape_problems(rig) == []


def test_bad_jobs_are_rejected(rig):
    rig.configure("baseline", {})
    checks.check_bad_jobs_are_rejected(rig.client_url, SidecarFront(rig))
    # a job meant for another library (tenacity's retry) is refused, not run without its policy
    status, reply = checks.post(rig.client_url, "/run", {
        "strategy": [{"pattern": "retry", "params": {"stop_after_attempt": 3}}], "target_url": rig.url("/"),
        "successes": 1, "max_requests": 1, "vu": 1})
    assert status == 400 and "stop_after_attempt" in reply["error"], (status, reply)


def test_baseline_sends_one_request_per_call(rig):
    rig.configure("baseline", {})
    checks.check_baseline_sends_one_request_per_call(rig.client_url, SidecarFront(rig))


# -- attempts ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("attempts", [0, 1, 2, 5])
def test_retry_sends_attempts_plus_one_tries(rig, attempts):
    # Istio refuses retryOn together with attempts 0
    config = {"attempts": attempts, "retryOn": "5xx"} if attempts else {"attempts": 0}
    assert attempts_problems(rig, "retry", config, attempts + 1) == []


@pytest.mark.parametrize("pattern, config, tries", [
    ("retry", {"attempts": 2, "retryOn": "503"}, 3),                  # a status joins retriable-status-codes
    ("retry", {"attempts": 2, "retryOn": "gateway-error"}, 3),
    ("retry+circuit_breaker", {"retry.attempts": 3, "retry.retryOn": "5xx", "circuit_breaker.http2MaxRequests": 50}, 4),
    # Istio's default retry policy (no `retry`, or one without retryOn) has not retried a 503 since 1.24
    ("retry", {"attempts": 5}, 1),
    ("timeout", {"timeout": 5000}, 1),
    ("circuit_breaker", {"http2MaxRequests": 50}, 1),
    ("baseline", {}, 1),
], ids=["retryOn-status", "retryOn-gateway-error", "composed", "retry-default-conditions", "default-timeout",
        "default-circuit_breaker", "baseline"])
def test_tries_per_call(rig, pattern, config, tries):
    assert attempts_problems(rig, pattern, config, tries) == []


# -- back-off ---------------------------------------------------------------------------------------
def test_default_backoff_stays_within_envoys_bound(rig):
    strategy = rig.configure("retry", {"attempts": 5, "retryOn": "5xx"})
    _, problems = backoff_problems(rig, strategy, retries=5)
    assert problems == []


def test_backoff_lengthens_the_waits(rig):
    default, problems = backoff_problems(rig, rig.configure("retry", {"attempts": 3, "retryOn": "5xx"}), retries=3)
    assert problems == []
    strategy = rig.configure("retry", {"attempts": 3, "retryOn": "5xx", "backoff": 100})
    longer, problems = backoff_problems(rig, strategy, retries=3, base_ms=100)
    assert problems == []
    assert longer_backoff_problems(default, longer, 100) == []


# -- connection pool ------------------------------------------------------------------------------------
@pytest.mark.parametrize("users, refusals", [(2, False), (3, False), (4, True), (6, True)])
def test_http2_max_requests(rig, users, refusals):
    assert pool_problems(rig, {"http2MaxRequests": 3}, users, in_flight_limit=3, refusals=refusals) == []


# Envoy counts a request waiting for a connection still being opened as pending: from a cold pool
# (each configuration switch starts one) up to maxConnections + http1MaxPendingRequests users may
# see a refusal (measured once in four rounds of 2 + 1 with 3 users). So no refusal is certain only
# with no more users than pending requests, and a refusal is certain above both limits together.
@pytest.mark.parametrize("pool, users, refusals", [
    ({"maxConnections": 1, "http1MaxPendingRequests": 2}, 2, False),
    ({"maxConnections": 1, "http1MaxPendingRequests": 2}, 4, True),
    ({"maxConnections": 2, "http1MaxPendingRequests": 1}, 3, None),
    ({"maxConnections": 2, "http1MaxPendingRequests": 1}, 5, True),
])
def test_max_connections_and_pending_requests(rig, pool, users, refusals):
    assert pool_problems(rig, pool, users, in_flight_limit=pool["maxConnections"], refusals=refusals) == []


# -- retry budget --------------------------------------------------------------------------------------
# Eight callers failing at once against a budget of no share and a floor of 2: the floor is all it
# allows. Ten slow successes in flight beside four failing callers: half of 14 in flight leaves room
# for every retry, where the floor of 1 alone would not.
BUDGETS = {
    "floor": ({"percent": 0, "minRetryConcurrency": 2}, 0, 8, 2, True),
    "share": ({"percent": 50, "minRetryConcurrency": 1}, 10, 4, None, False),
}


@pytest.mark.parametrize("case", BUDGETS)
def test_retry_budget(rig, case):
    budget, slow, failing, most_at_once, overflows = BUDGETS[case]
    assert retry_budget_problems(rig, budget, slow, failing, most_at_once, overflows) == []


# -- adaptive concurrency ------------------------------------------------------------------------------
def test_adaptive_concurrency_lowers_its_limit_when_latency_rises(rig):
    assert adaptive_concurrency_problems(rig, ADAPTIVE) == []


# -- admission control ---------------------------------------------------------------------------------
@pytest.mark.parametrize("threshold", [95, 50])
def test_admission_control_refuses_as_the_sre_rule_says(rig, threshold):
    assert admission_control_problems(rig, threshold) == []


# -- timeouts ------------------------------------------------------------------------------------------
TIMEOUTS = {
    # the route timeout: one try, 504 UT
    "route": ("timeout", {"timeout": 200}, 200, "UT", range(1, 2), 0.0),
    # a per-try timeout with the default conditions ends the call: not retried
    "per-try": ("retry", {"attempts": 2, "perTryTimeout": 150}, 150, "UT", range(1, 2), 0.0),
    # with 5xx a timed-out try is retried: three tries of 100 ms and the back-offs between them
    "per-try-retried": ("retry", {"attempts": 2, "perTryTimeout": 100, "retryOn": "5xx"}, 300, "URX,UT",
                        range(3, 4), 25 + 50),
    # the route timeout spans every try and wait
    "composed": ("retry+timeout", {"retry.attempts": 5, "retry.perTryTimeout": 100, "retry.retryOn": "5xx",
                                   "timeout.timeout": 250}, 250, "UT", range(2, 4), 0.0),
}


@pytest.mark.parametrize("case", list(TIMEOUTS))
def test_timeouts(rig, case):
    pattern, config, bound, flags, tries, extra = TIMEOUTS[case]
    assert timeout_problems(rig, pattern, config, 600, bound, flags, tries, extra) == []


# -- a mis-mapped translation fails them --------------------------------------------------------------
def mis_map_route(monkeypatch, change) -> None:
    """The sidecar gets route_configuration's route changed by change(route)."""
    real = sidecar_module.route_configuration

    def wrong(pattern: str, config: dict, *release) -> dict:
        document = copy.deepcopy(real(pattern, config, *release))
        change(document["virtual_hosts"][0]["routes"][0]["route"])
        return document
    monkeypatch.setattr(sidecar_module, "route_configuration", wrong)


def mis_map_cluster(monkeypatch, change) -> None:
    """The sidecar gets cluster()'s circuit-breaker thresholds changed by change(thresholds)."""
    real = sidecar_module.cluster

    def wrong(pattern: str, config: dict, addresses) -> dict:
        document = copy.deepcopy(real(pattern, config, addresses))
        change(document["circuit_breakers"]["thresholds"][0])
        return document
    monkeypatch.setattr(sidecar_module, "cluster", wrong)


def test_retries_taken_for_attempts_are_caught(rig, monkeypatch):
    def one_more(route: dict) -> None:
        if "retry_policy" in route:
            route["retry_policy"]["num_retries"] += 1
    mis_map_route(monkeypatch, one_more)
    problems = attempts_problems(rig, "retry", {"attempts": 2, "retryOn": "5xx"}, 3)
    assert any("the fault proxy saw 12 requests for 3 calls" in p for p in problems), problems


def test_a_default_retry_that_retries_503_is_caught(rig, monkeypatch):
    def before_istio_1_24(route: dict) -> None:       # 503 still in the default conditions
        if "retry_policy" in route and "retriable_status_codes" not in route["retry_policy"]:
            route["retry_policy"]["retriable_status_codes"] = [503]
    mis_map_route(monkeypatch, before_istio_1_24)
    problems = attempts_problems(rig, "timeout", {"timeout": 5000}, 1)
    assert any("the fault proxy saw 9 requests" in p for p in problems), problems


def test_a_doubled_backoff_base_is_caught(rig, monkeypatch):
    def doubled(route: dict) -> None:
        route["retry_policy"]["retry_back_off"] = {"base_interval": "0.050s"}
    mis_map_route(monkeypatch, doubled)
    _, problems = backoff_problems(rig, rig.configure("retry", {"attempts": 5, "retryOn": "5xx"}), retries=5)
    assert any("longer than Envoy's bound" in p for p in problems), problems


def test_a_dropped_backoff_is_caught(rig, monkeypatch):
    default, problems = backoff_problems(rig, rig.configure("retry", {"attempts": 3, "retryOn": "5xx"}), retries=3)
    assert problems == []

    def dropped(route: dict) -> None:
        route["retry_policy"].pop("retry_back_off", None)
    mis_map_route(monkeypatch, dropped)
    strategy = rig.configure("retry", {"attempts": 3, "retryOn": "5xx", "backoff": 100})
    longer, problems = backoff_problems(rig, strategy, retries=3, base_ms=100)
    assert any("shorter on average" in p for p in problems), problems
    assert longer_backoff_problems(default, longer, 100) != []


def test_a_doubled_max_requests_is_caught(rig, monkeypatch):
    def doubled(thresholds: dict) -> None:
        thresholds["max_requests"] = min(2 * thresholds["max_requests"], 4294967295)
    mis_map_cluster(monkeypatch, doubled)
    problems = pool_problems(rig, {"http2MaxRequests": 3}, 4, in_flight_limit=3, refusals=True)
    assert any("4 requests in flight at the target" in p for p in problems), problems
    assert any("no request refused" in p for p in problems), problems


def test_a_doubled_max_connections_is_caught(rig, monkeypatch):
    def doubled(thresholds: dict) -> None:
        thresholds["max_connections"] = min(2 * thresholds["max_connections"], 4294967295)
    mis_map_cluster(monkeypatch, doubled)
    problems = pool_problems(rig, {"maxConnections": 1, "http1MaxPendingRequests": 2}, 4, in_flight_limit=1,
                             refusals=True)
    assert any("in flight at the target at once, at most 1" in p for p in problems), problems


def test_a_halved_per_try_timeout_is_caught(rig, monkeypatch):
    def halved(route: dict) -> None:
        if "per_try_timeout" in route.get("retry_policy", {}):
            seconds = float(route["retry_policy"]["per_try_timeout"].removesuffix("s"))
            route["retry_policy"]["per_try_timeout"] = f"{seconds / 2:.3f}s"
    mis_map_route(monkeypatch, halved)
    pattern, config, bound, flags, tries, extra = TIMEOUTS["per-try"]
    problems = timeout_problems(rig, pattern, config, 600, bound, flags, tries, extra)
    assert any("before the 150 ms bound" in p for p in problems), problems


def test_a_dropped_route_timeout_is_caught(rig, monkeypatch):
    def dropped(route: dict) -> None:
        route["timeout"] = "0s"
    mis_map_route(monkeypatch, dropped)
    pattern, config, bound, flags, tries, extra = TIMEOUTS["route"]
    problems = timeout_problems(rig, pattern, config, 600, bound, flags, tries, extra)
    assert any("expected 3 x [504, 'UT']" in p for p in problems), problems


def test_a_dropped_retry_budget_is_caught(rig, monkeypatch):
    mis_map_cluster(monkeypatch, lambda thresholds: thresholds.pop("retry_budget", None))
    budget, slow, failing, most_at_once, overflows = BUDGETS["floor"]
    problems = retry_budget_problems(rig, budget, slow, failing, most_at_once, overflows)
    assert any("retries at the target at once, at most 2" in p for p in problems), problems


def test_a_budget_percent_taken_for_a_ratio_is_caught(rig, monkeypatch):
    def ratio(thresholds: dict) -> None:          # 50 written as 0.5: a share of half a percent
        if "retry_budget" in thresholds:
            thresholds["retry_budget"]["budget_percent"]["value"] /= 100
    mis_map_cluster(monkeypatch, ratio)
    budget, slow, failing, most_at_once, overflows = BUDGETS["share"]
    problems = retry_budget_problems(rig, budget, slow, failing, most_at_once, overflows)
    assert any("retries refused by the budget (UO), which had room" in p for p in problems), problems


def test_an_adaptive_concurrency_interval_taken_for_seconds_is_caught(rig, monkeypatch):
    """concurrencyUpdateInterval 100 (ms) written as 100 s: the limit is never recalculated."""
    real = sidecar_module.filter_resource

    def wrong(sidecar_filter, policy, generation):
        resource = copy.deepcopy(real(sidecar_filter, policy, generation))
        if policy is not None and sidecar_filter.policy == "adaptive_concurrency":
            limits = resource["typed_config"]["gradient_controller_config"]["concurrency_limit_params"]
            limits["concurrency_update_interval"] = f"{float(limits['concurrency_update_interval'][:-1]) * 1000}s"
        return resource
    monkeypatch.setattr(sidecar_module, "filter_resource", wrong)
    problems = adaptive_concurrency_problems(rig, ADAPTIVE)
    assert any("the limit did not fall" in p for p in problems), problems


def test_an_admission_threshold_taken_for_a_failure_rate_is_caught(rig, monkeypatch):
    """A success rate of 95% written as 5% (failsafe-go's throttler takes a failure rate): a success
    rate of half is far above it, so nothing is refused."""
    real = sidecar_module.filter_resource

    def wrong(sidecar_filter, policy, generation):
        resource = copy.deepcopy(real(sidecar_filter, policy, generation))
        if policy is not None and sidecar_filter.policy == "admission_control":
            threshold = resource["typed_config"]["sr_threshold"]["default_value"]
            threshold["value"] = 100 - threshold["value"]
        return resource
    monkeypatch.setattr(sidecar_module, "filter_resource", wrong)
    problems = admission_control_problems(rig, 95)
    assert any("the SRE rule gives" in p for p in problems), problems
