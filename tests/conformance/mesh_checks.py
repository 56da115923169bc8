"""Conformance checks for the mesh client (`--library istio`), whose policies are its sidecar
Envoy's: each check configures the sidecar as the runner does, drives the client through protocol
v1 and returns the problems it saw (empty: conforms), so a test can assert both that rbl's Istio
translation passes and that a mis-mapped one is caught. What each checks is Envoy's behaviour as
docs/library-semantics.md (section istio) states it, measured at the fault proxy, at the recording
target and in the sidecar's counters, never taken from rbl's own translation.

Timing follows checks.py: a bound that must not be undercut (a timeout) is checked strictly in
every call (WAIT_EARLY_MS, one tick of the coarse clock Envoy's timers read, and how long a
worker waited for a core at that moment); lateness is judged against what a plain sleep in this
process overslept at that moment (PlainSleeps), beyond WAIT_LATE_MS, in most rounds (more rounds,
up to MAX_TIMED_ROUNDS, while it looks late), so load fails no right configuration and a wrong one
is caught in most rounds. Envoy's back-off is random
(retry k waits uniformly in [0, min(base * 2^(k-1), 10 * base))): its bound is an upper one, and
its length on average is judged against the mean of that uniform wait."""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass

from rbl.clients.protocol import MAX_FLAGS_CHARS, SIDECAR_REFUSAL_DETAILS
from rbl.mesh.adaptive_concurrency import LIMIT_STAT
from rbl.mesh.sidecar_config import STAT_PREFIX
from rbl.runner.mesh_oracles import call_violations

from .checks import MAX_TIMED_ROUNDS, TIMED_ROUNDS, WAIT_EARLY_MS, WAIT_LATE_MS, PlainSleeps, expand
from .mesh_sidecar import MeshRig

LINUX_CLOCK_MONOTONIC_COARSE = 6     # <linux/time.h>; Python's time module may not name it


def envoy_timer_tick_ms() -> float:
    """How early an Envoy timer may fire by a precise clock: Envoy's event loop is libevent's
    event_base_new(), which reads CLOCK_MONOTONIC_COARSE (no precise-timer flag), so a timer armed
    on a coarse reading up to one tick old fires up to one tick early (measured: a 200 ms route
    timeout answered after 197.9 ms by the client's clock, where the coarse clock ticks every 4 ms).
    That reading is cached when the loop wakes, so a worker descheduled before it arms the timer
    fires earlier still, by as long as it waited for a core (see timeout_problems)."""
    if not sys.platform.startswith("linux"):
        return 0.0
    return time.clock_getres(getattr(time, "CLOCK_MONOTONIC_COARSE", LINUX_CLOCK_MONOTONIC_COARSE)) * 1000


TIMEOUT_EARLY_MS = WAIT_EARLY_MS + envoy_timer_tick_ms()
ENVOY_BASE_BACKOFF_MS = 25           # runtime upstream.base_retry_backoff_ms; Istio sets it only from `backoff`
DELAY_PATH = "/delay/{ms}?vu={vu}"


def backoff_bounds(retries: int, base_ms: float = ENVOY_BASE_BACKOFF_MS) -> list[float]:
    """Envoy's bound on the wait before each retry: min(base * 2^(k-1), 10 * base)."""
    return [min(base_ms * 2 ** (k - 1), 10 * base_ms) for k in range(1, retries + 1)]


def _requests(replies: list[dict]) -> list[list]:
    return [request for reply in replies for call in expand(reply["calls"]) for request in call["requests"]]


def _client_problems(replies: list[dict]) -> list[str]:
    """The mesh client's own rule (rbl's oracle): one request per call, ok exactly for a 2xx."""
    return [f"vu {reply['vu']}: {violation.detail}" for reply in replies
            for violation in call_violations(expand(reply["calls"]))]


def _increase(before: tuple[int, dict], after: tuple[int, dict]) -> tuple[int, dict[str, int]]:
    return after[0] - before[0], {name: after[1][name] - before[1][name] for name in after[1]}


# -- protocol ---------------------------------------------------------------------------------------
def reply_shape_problems(rig: MeshRig) -> list[str]:
    """checks.check_reply_shape for a client behind a sidecar: each request has a 4th element,
    the sidecar's response flags (protocol v1)."""
    strategy = rig.configure("baseline", {})
    reply = rig.run(strategy, "/status/200", successes=3, max_requests=5, vu=7)
    problems = []
    if (reply["protocol"], reply["library"], reply["vu"], reply["stopped_by"]) != (1, "istio", 7, "successes"):
        problems.append(f"reply header {[reply[k] for k in ('protocol', 'library', 'vu', 'stopped_by')]}")
    for request in _requests([reply]):
        if not (len(request) == 4 and all(isinstance(v, int) for v in request[:3]) and isinstance(request[3], str)
                and 0 < len(request[3]) <= MAX_FLAGS_CHARS):
            problems.append(f"request {request}: expected [start_us, duration_us, status, flags]")
        elif request[2:] != [200, "-"]:
            problems.append(f"request {request}: a plain 200 through the sidecar has flags '-'")
    return problems + _client_problems([reply])


# -- attempts ---------------------------------------------------------------------------------------
def attempts_problems(rig: MeshRig, pattern: str, config: dict, tries: int, calls: int = 3) -> list[str]:
    """Under a 100% abort 503 at the fault proxy: every call is one client request answered 503,
    and the fault proxy and the sidecar saw exactly `tries` upstream requests per call."""
    strategy = rig.configure(pattern, config)
    rig.proxy.set_fault(abort__abort_percent=100, abort__http_status=503)
    before = rig.upstream_counts()
    reply = rig.run(strategy, "/status/200", successes=1, max_requests=calls)
    seen, sidecar = _increase(before, rig.upstream_counts())
    what = f"{pattern} {config}"
    problems = _client_problems([reply])
    calls_made = expand(reply["calls"])
    statuses = [request[2:] for request in _requests([reply])]
    flags = "URX" if tries > 1 else "-"                  # retries exhausted, or no retry at all
    if len(calls_made) != calls or statuses != [[503, flags]] * calls:
        problems.append(f"{what}: the client's calls answered {statuses}, expected {calls} x [503, {flags!r}]")
    if seen != calls * tries:
        problems.append(f"{what}: the fault proxy saw {seen} requests for {calls} calls, expected {tries} per call")
    if sidecar["sidecarUpstreamRequests"] != calls * tries or sidecar["sidecarRetries"] != calls * (tries - 1):
        problems.append(f"{what}: the sidecar counted {sidecar['sidecarUpstreamRequests']} upstream requests and "
                        f"{sidecar['sidecarRetries']} retries for {calls} calls of {tries} tries")
    return problems


# -- back-off ---------------------------------------------------------------------------------------
@dataclass
class BackoffRound:
    gaps: list[list[float]]          # per call, the ms between a try leaving the target and the next arriving
    slack_ms: float                  # the worst plain-sleep oversleep while it ran


def backoff_round(rig: MeshRig, strategy: list[dict], retries: int, users: int, calls: int,
                  bounds: list[float]) -> tuple[BackoffRound, list[str]]:
    """`users` virtual users at once, each `calls` calls against a target answering 503: the gaps
    between the tries of each call as the target saw them (each gap is the sidecar's wait plus two
    hops through the fault proxy, about 1-4 ms on an idle machine)."""
    rig.target.idle()
    rig.target.take()
    paths = [f"/status/503?vu={vu}" for vu in range(1, users + 1)]
    with PlainSleeps(bounds) as reference:
        replies = rig.run_users(strategy, paths, successes=1, max_requests=calls)
    arrivals = rig.target.take().arrivals
    problems = _client_problems(replies)
    gaps = []
    for path in paths:
        tries = sorted((a for a in arrivals if a.path == path), key=lambda a: a.arrived)
        if len(tries) != calls * (retries + 1):
            problems.append(f"{path}: the target saw {len(tries)} tries for {calls} calls of {retries} retries")
            continue
        for first in range(0, len(tries), retries + 1):
            call = tries[first:first + retries + 1]
            gaps.append([(b.arrived - a.departed) * 1000 for a, b in zip(call, call[1:])])
    return BackoffRound(gaps, reference.worst_ms), problems


def _late_gaps(measured: BackoffRound, bounds: list[float]) -> list[str]:
    return [f"retry {k}: {gap:.1f} ms (bound {bound:g} ms, plain sleeps up to {measured.slack_ms:.1f} ms late)"
            for gaps in measured.gaps for k, (gap, bound) in enumerate(zip(gaps, bounds), 1)
            if gap - bound - measured.slack_ms > WAIT_LATE_MS]


def backoff_problems(rig: MeshRig, strategy: list[dict], retries: int, base_ms: float = ENVOY_BASE_BACKOFF_MS,
                     users: int = 2, calls: int = 2) -> tuple[list[BackoffRound], list[str]]:
    """No wait exceeds Envoy's bound (beyond what the machine adds at that moment, in most rounds),
    and the waits are not shorter on average than Envoy's jittered back-off: the mean of all calls'
    summed waits is at least half the sum of the uniform waits' means (bound / 2 each). Returns the
    rounds measured, for comparisons across configurations."""
    bounds = backoff_bounds(retries, base_ms)
    rounds: list[BackoffRound] = []
    late: list[list[str]] = []

    def undecided() -> bool:        # late in most rounds so far, yet not in most of MAX_TIMED_ROUNDS
        return len(late) // 2 < sum(map(bool, late)) <= MAX_TIMED_ROUNDS // 2
    while len(rounds) < TIMED_ROUNDS or undecided():
        measured, problems = backoff_round(rig, strategy, retries, users, calls, bounds)
        if problems:
            return rounds, problems
        rounds.append(measured)
        late.append(_late_gaps(measured, bounds))
    problems = []
    if sum(map(bool, late)) > len(late) // 2:
        shown = "; ".join(gap for gaps in late for gap in gaps[:3])
        problems.append(f"back-off longer than Envoy's bound {bounds} ms in {sum(map(bool, late))} of "
                        f"{len(late)} rounds: {shown}")
    mean, expected = mean_total_wait(rounds), sum(bounds) / 2
    if mean < expected / 2:
        problems.append(f"back-off shorter on average than Envoy's (base {base_ms:g} ms): a call's waits total "
                        f"{mean:.1f} ms on average, expected about {expected:.1f} ms")
    return rounds, problems


def mean_total_wait(rounds: list[BackoffRound]) -> float:
    return statistics.fmean(sum(gaps) for measured in rounds for gaps in measured.gaps)


def longer_backoff_problems(default: list[BackoffRound], longer: list[BackoffRound], base_ms: float) -> list[str]:
    """A `backoff` above Envoy's 25 ms waits longer on average than the default, measured the same way
    at nearly the same moment: by at least half the ratio of the bases (expected: the full ratio)."""
    ratio = mean_total_wait(longer) / mean_total_wait(default)
    if ratio < base_ms / ENVOY_BASE_BACKOFF_MS / 2:
        return [f"backoff {base_ms:g} ms: a call's waits total {mean_total_wait(longer):.1f} ms on average, only "
                f"{ratio:.1f} x the default's {mean_total_wait(default):.1f} ms"]
    return []


# -- connection pool ----------------------------------------------------------------------------------
def pool_problems(rig: MeshRig, config: dict, users: int, in_flight_limit: int, refusals: bool | None,
                  delay_ms: int = 150) -> list[str]:
    """`users` virtual users at once against a slow target, under the connection pool `config`: at
    most `in_flight_limit` requests at the target at once; requests refused (503, flag UO, counted
    by the sidecar) when `refusals` is True, none when False (None: not judged)."""
    strategy = rig.configure("circuit_breaker", config)
    rig.target.idle()
    rig.target.take()
    before = rig.upstream_counts()
    paths = [DELAY_PATH.format(ms=delay_ms, vu=vu) for vu in range(1, users + 1)]
    # a refused user calls again at once: max_requests bounds how long it spins
    replies = rig.run_users(strategy, paths, successes=2, max_requests=12)
    records = rig.target.take()
    _, sidecar = _increase(before, rig.upstream_counts())
    requests = _requests(replies)
    refused = [r for r in requests if "UO" in r[3].split(",")]
    what = f"{config} with {users} users"
    problems = _client_problems(replies)
    if any(r[2] != 503 for r in refused) or any(r[2:] != [200, "-"] for r in requests if r not in refused):
        problems.append(f"{what}: answers {sorted({tuple(r[2:]) for r in requests})}, expected 200 '-' and 503 'UO'")
    if records.most_in_flight > in_flight_limit:
        problems.append(f"{what}: {records.most_in_flight} requests in flight at the target at once, "
                        f"at most {in_flight_limit} allowed")
    if sidecar["sidecarPoolOverflows"] != len(refused):
        problems.append(f"{what}: {len(refused)} requests flagged UO, the sidecar counted "
                        f"{sidecar['sidecarPoolOverflows']} pool overflows")
    if refusals is False and refused:
        problems.append(f"{what}: {len(refused)} requests refused by the pool (UO), which cannot be full")
    if refusals is True and not refused:
        problems.append(f"{what}: no request refused by the pool (UO), although it was full")
    return problems


# -- retry budget -------------------------------------------------------------------------------------
FAILING_PATH = "/delay/{ms}/503?vu={vu}"


def most_retries_at_once(arrivals: list) -> int:
    """The most retries the target held at once: a virtual user's requests after its first (each
    user makes one call, so its later requests are the sidecar's retries of it)."""
    seen: set[str] = set()
    edges = []
    for arrival in sorted(arrivals, key=lambda a: a.arrived):
        if arrival.path in seen:
            edges += [(arrival.arrived, 1), (arrival.departed, -1)]
        seen.add(arrival.path)
    most = held = 0
    for _, step in sorted(edges, key=lambda edge: (edge[0], edge[1])):   # a departure before an arrival
        held += step
        most = max(most, held)
    return most


def retry_budget_problems(rig: MeshRig, budget: dict, slow_users: int, failing_users: int,
                          most_at_once: int | None, overflows: bool, fail_ms: int = 300,
                          slow_ms: int = 2500) -> list[str]:
    """`slow_users` calls that succeed after slow_ms, started first, then `failing_users` calls whose
    every try is answered 503 after fail_ms, under a 5xx retry of 2 attempts and the retry budget
    `budget`: at most `most_at_once` retries at the target at once (None: not judged); retries
    refused by the budget (503 flagged UO, counted as the sidecar's retry overflows) when
    `overflows`, none otherwise. The slow calls outlast every failing one's tries, so they stay in
    flight, and count towards the budget's percent, throughout."""
    config = {"retry.attempts": 2, "retry.retryOn": "5xx", **{f"retry_budget.{k}": v for k, v in budget.items()}}
    strategy = rig.configure("retry+retry_budget", config)
    rig.target.idle()
    rig.target.take()
    before = rig.upstream_counts()
    paths = ([DELAY_PATH.format(ms=slow_ms, vu=vu) for vu in range(1, slow_users + 1)]
             + [FAILING_PATH.format(ms=fail_ms, vu=vu) for vu in range(slow_users + 1, slow_users + failing_users + 1)])
    replies = rig.run_users(strategy, paths, successes=1, max_requests=1)
    records = rig.target.take()
    _, sidecar = _increase(before, rig.upstream_counts())
    requests = _requests(replies)
    refused = [r for r in requests if "UO" in r[3].split(",")]
    what = f"retry budget {budget}, {slow_users} slow and {failing_users} failing callers"
    problems = _client_problems(replies)
    if sorted(r[2] for r in requests) != [200] * slow_users + [503] * failing_users:
        problems.append(f"{what}: answers {sorted(r[2] for r in requests)}, expected {slow_users} x 200 "
                        f"and {failing_users} x 503")
    at_once = most_retries_at_once(records.arrivals)
    if most_at_once is not None and at_once > most_at_once:
        problems.append(f"{what}: {at_once} retries at the target at once, at most {most_at_once} allowed")
    if sidecar["sidecarRetryOverflows"] != len(refused):
        problems.append(f"{what}: {len(refused)} answers flagged UO, the sidecar counted "
                        f"{sidecar['sidecarRetryOverflows']} retry overflows")
    if overflows and not refused:
        problems.append(f"{what}: no retry refused by the budget (UO), although it was spent")
    if not overflows and refused:
        problems.append(f"{what}: {len(refused)} retries refused by the budget (UO), which had room for them")
    return problems


# -- adaptive concurrency -------------------------------------------------------------------------------
ADAPTIVE = {"concurrencyUpdateInterval": 100, "minRttCalcInterval": 60_000, "minRttRequestCount": 5,
            "minConcurrency": 3, "minRttJitter": 0}


def concurrency_limit(rig: MeshRig) -> int:
    """The limit the sidecar's gradient controller holds now (its gauge)."""
    return rig.sidecar._stats().get(f"http.{STAT_PREFIX}.{LIMIT_STAT}", 0)


def _calling(rig: MeshRig, strategy: list[dict], users: int, delay_ms: int, seconds: float) -> list[list]:
    """`users` virtual users calling a target that answers after delay_ms, without pause, for
    `seconds`: every request they made."""
    paths = [DELAY_PATH.format(ms=delay_ms, vu=vu) for vu in range(1, users + 1)]
    replies = rig.run_users(strategy, paths, successes=1_000_000, max_requests=1_000_000, max_duration_ms=int(seconds * 1000))
    return _requests(replies)


def adaptive_concurrency_problems(rig: MeshRig, config: dict, users: int = 16, fast_ms: int = 20,
                                  slow_ms: int = 200) -> list[str]:
    """`users` callers without pause: while the target answers in fast_ms the gradient controller
    raises its limit above them; when it answers in slow_ms (10x) it lowers the limit below them
    and refuses requests, each answered 503 at once with the filter's response code details in the
    flags header, never forwarded to the target."""
    strategy = rig.configure("adaptive_concurrency", config)
    rig.target.idle()
    rig.target.take()
    fast = _calling(rig, strategy, users, fast_ms, 2.0)
    after_fast = concurrency_limit(rig)
    requests = _calling(rig, strategy, users, slow_ms, 2.5)
    after_slow = concurrency_limit(rig)
    rig.target.idle()
    arrived = len(rig.target.take().arrivals)
    # a request the job's deadline cut short has no answer and no flags
    refusal = lambda request: request[3:] == [SIDECAR_REFUSAL_DETAILS["adaptive_concurrency"]]   # noqa: E731
    refused = [r for r in requests if refusal(r)]
    every_refusal = [r for r in fast + requests if refusal(r)]
    problems = []
    if arrived != len(fast) + len(requests) - len(every_refusal):
        problems.append(f"{config}: {arrived} requests reached the target, {len(fast) + len(requests)} were sent and "
                        f"{len(every_refusal)} refused")
    if after_fast < users:
        problems.append(f"{config}: the limit was {after_fast} after fast answers, below the {users} callers")
    if not after_slow < min(after_fast, users):
        problems.append(f"{config}: the limit did not fall when answers slowed from {fast_ms} to {slow_ms} ms "
                        f"({after_fast} -> {after_slow})")
    if not refused:
        problems.append(f"{config}: no request refused after answers slowed ({after_fast} -> {after_slow})")
    # at once: well before the slow answer a forwarded request waits for (a busy machine delays a
    # refusal by tens of ms; a forwarded one takes slow_ms at least)
    at_once_us = slow_ms * 1000 / 2
    if any(r[2] != 503 or r[1] > at_once_us for r in refused):
        problems.append(f"{config}: a refusal is 503 at once (under {at_once_us / 1000:g} ms): "
                        f"{[r for r in refused if r[2] != 503 or r[1] > at_once_us][:3]}")
    if any(r[3:] not in ([], ["-"], [SIDECAR_REFUSAL_DETAILS["adaptive_concurrency"]]) for r in requests):
        problems.append(f"{config}: flags {sorted({tuple(r[3:]) for r in requests})}")
    return problems


# -- admission control ----------------------------------------------------------------------------------
def sre_rejection_chance(requests: int, successes: int, threshold: float, aggression: float = 1.0,
                         cap: float = 0.8) -> float:
    """The chance Envoy's admission control refuses the next request, having counted `requests`
    answered, `successes` of them successful, with a success-rate `threshold` (a ratio)."""
    chance = (requests - successes / threshold) / (requests + 1)
    return min(cap, max(0.0, chance) ** (1 / aggression))


def admission_control_problems(rig: MeshRig, threshold_percent: int, calls: int = 300) -> list[str]:
    """One caller, half the requests aborted 503 by the fault proxy: before each call the SRE rule
    gives the chance the filter refuses it, from the answers counted so far (the window outlasts the
    check); the calls it refused must be as many as those chances add up to, within 4 standard
    deviations (about 47% of the calls when the threshold is 95%, about none at 50%). A refusal is
    503 with the filter's details in the flags header, at once, and never reaches the target."""
    config = {"srThreshold": threshold_percent, "samplingWindow": 600_000}
    strategy = rig.configure("admission_control", config)
    rig.proxy.set_fault(abort__abort_percent=50, abort__http_status=503)
    before = rig.upstream_counts()
    reply = rig.run(strategy, "/status/200", successes=calls, max_requests=calls)
    seen, _ = _increase(before, rig.upstream_counts())
    requests = _requests([reply])
    answered = successes = refused = 0
    expected = variance = 0.0
    problems = _client_problems([reply])
    for request in requests:
        chance = sre_rejection_chance(answered, successes, threshold_percent / 100)
        expected, variance = expected + chance, variance + chance * (1 - chance)
        if request[3:] == [SIDECAR_REFUSAL_DETAILS["admission_control"]]:
            refused += 1
            if request[2] != 503:
                problems.append(f"{config}: a refusal answered {request}")
        else:
            answered, successes = answered + 1, successes + (request[2] < 500)
    if len(requests) != calls:
        problems.append(f"{config}: {len(requests)} requests for {calls} calls")
    if seen != calls - refused:
        problems.append(f"{config}: the fault proxy saw {seen} requests, {calls - refused} were not refused")
    if abs(refused - expected) > 4 * variance ** 0.5 + 3:
        problems.append(f"{config}: refused {refused} of {calls} calls, {answered - successes} of the {answered} "
                        f"answered failing; the SRE rule gives {expected:.0f} +- {variance ** 0.5:.0f}")
    return problems


# -- timeouts -----------------------------------------------------------------------------------------
def timeout_problems(rig: MeshRig, pattern: str, config: dict, delay_ms: int, bound_ms: float, flags: str,
                     tries: range, extra_ms: float = 0.0, calls: int = 3) -> list[str]:
    """Against a target slower than the timeout: every call is one request answered 504 with
    `flags`, never before bound_ms (strictly, every call); no later than bound_ms + extra_ms (the
    longest back-offs between tries) beyond what the machine adds (median over calls, more
    rounds while late); the target saw between tries.start and tries.stop - 1 tries per call."""
    strategy = rig.configure(pattern, config)
    what = f"{pattern} {config}"
    durations: list[tuple[float, float]] = []       # (ms, that round's plain-sleep oversleep)
    while True:
        rig.target.idle()
        rig.target.take()
        with PlainSleeps([bound_ms]) as reference:
            reply = rig.run(strategy, DELAY_PATH.format(ms=delay_ms, vu=1), successes=1, max_requests=calls)
        rig.target.idle()
        seen = len(rig.target.take().arrivals)
        problems = _client_problems([reply])
        answers = [r[2:] for r in _requests([reply])]
        if answers != [[504, flags]] * calls:
            problems.append(f"{what}: calls answered {answers}, expected {calls} x [504, {flags!r}]")
        if not calls * tries.start <= seen <= calls * (tries.stop - 1):
            problems.append(f"{what}: the target saw {seen} tries for {calls} calls")
        round_ms = [r[1] / 1000 for r in _requests([reply])]
        # Envoy arms the timer on the time its loop cached when it woke: a worker kept off a core
        # between waking and arming fires early by that wait, which plain sleeps in this process
        # saw as oversleep at that moment (CI measured 194.5 ms for 200 ms beside a busy suite).
        early_ms = TIMEOUT_EARLY_MS + reference.worst_ms
        early = [ms for ms in round_ms if ms < bound_ms - early_ms]
        if early:
            problems.append(f"{what}: answered after {[round(ms, 1) for ms in early]} ms, "
                            f"before the {bound_ms:g} ms bound (allowing {early_ms:.1f} ms for clock "
                            f"ticks and scheduling at that moment)")
        if problems:
            return problems
        durations += [(ms, reference.worst_ms) for ms in round_ms]
        lateness = statistics.median(ms - bound_ms - extra_ms - slack for ms, slack in durations)
        if lateness <= WAIT_LATE_MS:
            return []
        if len(durations) >= calls * MAX_TIMED_ROUNDS:
            return [f"{what}: answered after {[round(ms, 1) for ms, _ in durations]} ms, bound {bound_ms:g} ms "
                    f"(+{extra_ms:g} ms back-off): median lateness {lateness:.1f} ms beyond plain sleeps"]
