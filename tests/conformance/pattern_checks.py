"""Checks of the patterns beyond retry and circuit breaker (timeout, bulkhead, rate limiter, hedge,
fallback) and of their composition, for any client service: each drives the service through the real
fault proxy and judges the invariant the pattern promises, with the timing rules of checks.py (never
early, by WAIT_EARLY_MS; lateness judged against what plain sleeps saw at that moment).

  timeout       a call ends no earlier than its bound, is reported timed out, and its request is cut
  bulkhead      of calls that overlap, never more than its limit are admitted; the rest are refused
  retry budget  of calls failing at once, never more retries in flight than its floor; the rest end early
  rate limiter  the k-th call starts no earlier than the limiter's schedule allows
  hedge         the hedged request starts no earlier than its delay
  fallback      a failed call answered by the fallback is marked, and never counted a success
  composition   retry + timeout bounds each attempt, timeout + retry the whole call
"""

from __future__ import annotations

import itertools
import time
from concurrent.futures import ThreadPoolExecutor

from rbl.runner.pattern_oracles import TIMEOUT_TOLERANCE_MS

from .call_checks import one_call
from .checks import WAIT_EARLY_MS, assert_waits, expand, run_job
from .profiles import Profile

_instances = itertools.count()


def _slow(proxy, delay_ms: int) -> None:
    proxy.set_fault(abort__abort_percent=0, delay__fixed_delay_percent=100, delay__fixed_duration_ms=delay_ms)


def _fast(proxy) -> None:
    proxy.set_fault(abort__abort_percent=0, delay__fixed_delay_percent=0, delay__fixed_duration_ms=0)


def fresh_instance(what: str) -> str:
    """An instance key no earlier job used: a shared pattern starts empty."""
    return f"{what}-{next(_instances)}"


FAST_TRIES = 3


# -- timeout ----------------------------------------------------------------------------------------
def single_call(url: str, proxy, strategy: list[dict]) -> tuple[dict, dict]:
    """One POST /call: its reply and its one call."""
    reply = one_call(url, proxy, strategy)
    return reply, reply["calls"][0]


def check_timeout_bounds_a_slow_call(url: str, proxy, profile: Profile, timeout_ms: int = 60,
                                     delay_ms: int = 400) -> None:
    strategy = [{"pattern": "timeout", "params": profile.timeout(timeout_ms)}]
    _fast(proxy)
    # a fast call passes (a loaded machine may stretch one past the bound: one of FAST_TRIES must
    # pass; a timeout mapped far too short fails them all)
    fast = []
    for _ in range(FAST_TRIES):
        fast.append(single_call(url, proxy, strategy)[1])
        if fast[-1]["ok"] and not fast[-1].get("timed_out"):
            break
    else:
        raise AssertionError(f"a fast call must pass a {timeout_ms} ms timeout: {fast}")
    _slow(proxy, delay_ms)

    def call_length() -> list[float]:
        reply, call = single_call(url, proxy, strategy)
        assert not call["ok"] and call.get("timed_out") is True, \
            f"a call slower than the timeout must fail timed out: {call}"
        (request,) = call["requests"]
        assert request[2] == 0, f"the request the timeout interrupted is reported with status 0: {request}"
        assert request[1] / 1000 < delay_ms - 50, f"the timeout must cut the request short: {request}"
        # the per-round oracle judges the cut request's own duration: the client's clock for it may
        # start no later than the timeout's (a hop to a worker thread is the attempt's time too)
        assert request[1] / 1000 >= timeout_ms - TIMEOUT_TOLERANCE_MS, \
            f"the request was cut after {request[1] / 1000:.1f} ms, before the {timeout_ms} ms timeout: {request}"
        return [reply["total_us"] / 1000]
    assert_waits(call_length, [timeout_ms], "timeout (call length)")


def check_retry_then_timeout_bounds_each_attempt(url: str, proxy, profile: Profile, timeout_ms: int = 50,
                                                 delay_ms: int = 400, attempts: int = 3) -> None:
    """retry + timeout: a timeout on every attempt; timeout + retry: one bound for the whole call."""
    _slow(proxy, delay_ms)
    retry = {"pattern": "retry", "params": profile.retry_fixed(attempts, 1)}
    timeout = {"pattern": "timeout", "params": profile.timeout(timeout_ms)}
    _, each = single_call(url, proxy, [retry, timeout])
    assert len(each["requests"]) == attempts and all(r[2] == 0 for r in each["requests"]), \
        f"retry(timeout(call)): {attempts} attempts, each cut by the timeout: {each}"
    assert each.get("timed_out") is True and not each["ok"], each
    reply, whole = single_call(url, proxy, [timeout, retry])
    assert len(whole["requests"]) == 1 and whole.get("timed_out") is True, \
        f"timeout(retry(call)): the timeout ends the whole call during its first attempt: {whole}"
    assert reply["total_us"] / 1000 >= timeout_ms - WAIT_EARLY_MS


# -- bulkhead ---------------------------------------------------------------------------------------
def concurrent_calls(url: str, proxy, strategy: list[dict], count: int, instance: str) -> list[dict]:
    """`count` /calls at once through one shared instance: their calls."""
    with ThreadPoolExecutor(count) as pool:
        replies = list(pool.map(lambda vu: one_call(url, proxy, strategy, share="client", instance=instance, vu=vu),
                                range(1, count + 1)))
    return [reply["calls"][0] for reply in replies]


def check_bulkhead_admits_at_most_its_limit(url: str, proxy, profile: Profile, limit: int = 2, callers: int = 6,
                                            delay_ms: int = 600) -> None:
    """`callers` calls arrive within the slow calls' time: the bulkhead lets `limit` through (never
    more; and not fewer, it is not a lock) and refuses the rest at once, naming itself."""
    _slow(proxy, delay_ms)
    strategy = [{"pattern": "bulkhead", "params": profile.bulkhead(limit)}]
    calls = concurrent_calls(url, proxy, strategy, callers, fresh_instance("bulkhead"))
    admitted = [call for call in calls if call["requests"]]
    refused = [call for call in calls if not call["requests"]]
    assert len(admitted) == limit, \
        f"a bulkhead of {limit} admitted {len(admitted)} of {callers} overlapping calls: {calls}"
    assert all(call["ok"] for call in admitted), admitted
    for call in refused:
        assert not call["ok"] and call.get("rejected") == "bulkhead", f"a refused call names the bulkhead: {call}"
        assert 0 <= call.get("wait_us", -1) < delay_ms * 1000 / 2, f"a bulkhead without a wait refuses at once: {call}"


# -- adaptive limiter -------------------------------------------------------------------------------
def refusals_while(url: str, proxy, strategy: list[dict], callers: int, instance: str, seconds: float) -> int:
    """`callers` virtual users calling without pause through one shared instance for `seconds`: how
    many calls the limit refused (each must name it as a bulkhead's, a concurrency limit's refusal)."""
    deadline = time.monotonic() + seconds

    def caller(vu: int) -> int:
        refused = 0
        while time.monotonic() < deadline:
            (call,) = one_call(url, proxy, strategy, share="client", instance=instance, vu=vu)["calls"]
            if not call["requests"]:
                assert call.get("rejected") == "bulkhead", f"a refused call names a concurrency limit: {call}"
                refused += 1
        return refused
    with ThreadPoolExecutor(callers) as pool:
        return sum(pool.map(caller, range(1, callers + 1)))


def check_adaptive_limiter_lowers_its_limit_when_latency_rises(url: str, proxy, profile: Profile, pattern: str,
                                                               limit: int = 16, fast_ms: int = 20,
                                                               slow_ms: int = 200) -> None:
    """As many callers as the initial limit, calling without pause: while responses take fast_ms the
    limit has room for them all; when they jump to slow_ms (10x) the limiter lowers its limit below
    the callers, so some calls are refused, which a fixed limit of the same size never does. The
    responses are long beside what a caller spends between calls (a busy machine's Python client:
    tens of ms), so that nearly all callers are in flight at once."""
    strategy = [{"pattern": pattern, "params": profile.adaptive_limiters[pattern](limit)}]
    instance = fresh_instance("adaptive-limiter")
    _slow(proxy, fast_ms)
    refusals_while(url, proxy, strategy, limit, instance, 1.5)             # the baseline: fast responses
    _slow(proxy, slow_ms)
    refused = refusals_while(url, proxy, strategy, limit, instance, 4.0)
    assert refused > 0, (f"an adaptive limiter of {limit} refused none of {limit} callers after responses went "
                         f"from {fast_ms} to {slow_ms} ms: its limit did not fall")


# -- adaptive throttler -----------------------------------------------------------------------------
def sre_refusal_share(executed: int, successes: int, threshold: float, cap: float = 0.9) -> float:
    """The share of calls the SRE book's client-side throttling refuses once it has seen `executed`
    executions, `successes` of them successful, allowing a `threshold` share of failures."""
    return min(cap, max(0.0, executed - successes / (1 - threshold)) / (executed + 1))


def check_adaptive_throttler_refuses_in_proportion_to_failures(url: str, proxy, profile: Profile,
                                                               calls: int = 400) -> None:
    """About half the requests fail (the proxy's 50% abort), one caller: before each call the SRE rule
    gives the chance the throttler refuses it, from the executions so far (sre_refusal_share); the
    calls it refused must be as many as those chances add up to, within 4 standard deviations (about
    44% of the calls when it allows 10% failures, about none when it allows 50%). Each refusal names
    the shedding as a rate limiter's and sends no request."""
    proxy.set_fault(abort__abort_percent=50, abort__http_status=503)
    for percent in (10, 50):
        strategy = [{"pattern": "adaptive_throttler", "params": profile.adaptive_throttler(percent)}]
        instance = fresh_instance("adaptive-throttler")
        executed = successes = refused = 0
        expected = variance = 0.0
        for _ in range(calls):
            chance = sre_refusal_share(executed, successes, percent / 100)
            expected, variance = expected + chance, variance + chance * (1 - chance)
            (call,) = one_call(url, proxy, strategy, share="client", instance=instance)["calls"]
            if not call["requests"]:
                assert call.get("rejected") == "rate_limiter", f"a throttled call names a rate limit: {call}"
                refused += 1
            else:
                executed, successes = executed + 1, successes + call["ok"]
        assert abs(refused - expected) <= 4 * variance ** 0.5 + 3, (
            f"an adaptive throttler allowing {percent}% failures refused {refused} of {calls} calls, "
            f"{executed - successes} of the {executed} executed failing; the SRE rule gives {expected:.0f} "
            f"+- {variance ** 0.5:.0f}")


# -- retry budget -----------------------------------------------------------------------------------
# Two retries of different calls that follow each other through one permit (one released, the next
# taken) can look overlapped by the skew of placing each job's clock on a common one: only a longer
# overlap counts as two at once.
HANDOFF_SLACK_MS = 25


def retry_spans(url: str, proxy, strategy: list[dict], count: int, instance: str) -> tuple[list[dict], list]:
    """`count` /calls at once through one shared instance: their calls, and each retry's
    (start, end) in seconds on this process's clock (a job's start placed at its reply's arrival
    less the job's total time)."""
    def timed(vu: int) -> tuple[float, dict]:
        reply = one_call(url, proxy, strategy, share="client", instance=instance, vu=vu)
        return time.perf_counter() - reply["total_us"] / 1e6, reply
    with ThreadPoolExecutor(count) as pool:
        timed_replies = list(pool.map(timed, range(1, count + 1)))
    calls, spans = [], []
    for started, reply in timed_replies:
        (call,) = reply["calls"]
        calls.append(call)
        for start_us, duration_us, *_ in sorted(call["requests"])[1:]:      # the tries after the first
            spans.append((started + start_us / 1e6, started + (start_us + duration_us) / 1e6))
    return calls, spans


def most_at_once(spans: list[tuple[float, float]], slack_s: float) -> int:
    """The most spans that overlap one another by more than slack_s."""
    edges = sorted([(start + slack_s, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    most = held = 0
    for _, step in edges:
        held += step
        most = max(most, held)
    return most


def check_retry_budget_caps_retries_in_flight(url: str, proxy, profile: Profile, floor: int = 2, callers: int = 8,
                                              fail_ms: int = 150) -> None:
    """Every try fails after fail_ms (the proxy delays, then aborts it); `callers` calls at once share
    one retry of 3 attempts. With a budget of no share and a floor of `floor`, never more than
    `floor` retries are in flight at once, and the calls refused a retry end with fewer tries,
    failed; with a share of 100% (retries may be every execution in flight), every call gets all
    its tries."""
    proxy.set_fault(abort__abort_percent=100, abort__http_status=503, delay__fixed_delay_percent=100,
                    delay__fixed_duration_ms=fail_ms)
    strategy = [{"pattern": "retry", "params": profile.retry_budget(3, 0, floor)}]
    calls, spans = retry_spans(url, proxy, strategy, callers, fresh_instance("retry-budget"))
    at_once = most_at_once(spans, HANDOFF_SLACK_MS / 1000)
    cut = [call for call in calls if len(call["requests"]) < 3]
    assert at_once <= floor, f"a retry budget with a floor of {floor} and no share let {at_once} retries run at once"
    assert cut, f"a retry budget with a floor of {floor} refused no retry of {callers} calls failing at once: {calls}"
    assert all(not call["ok"] and call["requests"] and not call.get("rejected") for call in cut), \
        f"a call refused a retry fails with its last try's failure, no refusal of its own: {cut}"
    strategy = [{"pattern": "retry", "params": profile.retry_budget(3, 100, 0)}]
    calls, _ = retry_spans(url, proxy, strategy, callers, fresh_instance("retry-budget"))
    assert all(len(call["requests"]) == 3 for call in calls), \
        f"a retry budget of 100% refused a retry: {[len(call['requests']) for call in calls]} tries"


# -- rate limiter -----------------------------------------------------------------------------------
def check_rate_limiter_never_exceeds_its_rate(url: str, proxy, profile: Profile, permits: int = 2,
                                              period_ms: int = 100, calls: int = 10) -> None:
    """With a wait long enough for every permit, the k-th call's request starts no earlier than the
    limiter's schedule (profile.rate_starts) allows, and not later than what load explains."""
    _fast(proxy)
    strategy = [{"pattern": "rate_limiter", "params": profile.rate_limiter(permits, period_ms, 10 * period_ms)}]
    expected = [profile.rate_starts(permits, period_ms, k) for k in range(1, calls + 1)]

    def starts() -> list[float]:
        reply = run_job(url, proxy, strategy, successes=calls, max_requests=calls)
        requests = [request for call in expand(reply["calls"]) for request in call["requests"]]
        assert len(requests) == calls and reply["stopped_by"] == "successes", reply
        got = [request[0] / 1000 for request in requests]
        early = [(k + 1, round(start, 1), want) for k, (start, want) in enumerate(zip(got, expected))
                 if start < want - WAIT_EARLY_MS]
        assert not early, (f"a rate limiter of {permits} per {period_ms} ms let calls start early "
                           f"(call, start ms, earliest): {early}")
        return got[-1:]
    assert_waits(starts, expected[-1:], "rate limiter (last call's start)")


# -- hedge ------------------------------------------------------------------------------------------
def check_hedge_starts_no_earlier_than_its_delay(url: str, proxy, profile: Profile, hedge_ms: int = 60,
                                                 delay_ms: int = 300) -> None:
    strategy = [{"pattern": "hedge", "params": profile.hedge(hedge_ms)}]
    _fast(proxy)
    _, call = single_call(url, proxy, strategy)
    assert call["ok"] and len(call["requests"]) == 1, f"a call faster than the hedge delay sends one request: {call}"
    _slow(proxy, delay_ms)

    def hedge_start() -> list[float]:
        _, call = single_call(url, proxy, strategy)
        assert call["ok"] and len(call["requests"]) == 2, \
            f"a call slower than the hedge delay sends one hedge (maxHedges 1): {call}"
        first, second = sorted(call["requests"])
        assert second[0] < first[0] + first[1], f"the hedge overlaps the first request: {call}"
        # The delay counts from the call's start, which for a /call is the job's (start_us 0): a
        # library may start the first attempt on a thread of its own, and that thread can begin its
        # request after the hedge's timer has started (failsafe-go does), so the gap between the two
        # requests may be shorter than the delay without the hedge being early.
        return [second[0] / 1000]
    assert_waits(hedge_start, [hedge_ms], "hedge (delay before the hedged request)")


# -- fallback ---------------------------------------------------------------------------------------
def check_fallback_marks_failed_calls(url: str, proxy) -> None:
    strategy = [{"pattern": "fallback", "params": {}}]
    _fast(proxy)
    reply = run_job(url, proxy, strategy, successes=2, max_requests=5)
    assert reply["stopped_by"] == "successes" and all(c["ok"] and not c.get("fallback") for c in reply["calls"]), \
        f"calls the target answers are successes, not fallbacks: {reply['calls']}"
    proxy.set_fault(abort__abort_percent=100, abort__http_status=503)
    reply = run_job(url, proxy, strategy, successes=1, max_requests=3)
    calls = expand(reply["calls"])
    assert reply["stopped_by"] == "max_requests" and len(calls) == 3, \
        f"a fallback is not a success: the user keeps calling until its request budget ends: {reply}"
    for call in calls:
        assert call.get("fallback") is True and call["ok"] is False, \
            f"a failed call the fallback answered is marked, and a fallback is not a success: {call}"
        assert [r[2] for r in call["requests"]] == [503], call
