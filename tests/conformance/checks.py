"""The conformance checks: each takes a client service URL (any language, any library), drives it
through rbl client protocol v1 against the real fault proxy and httpbin, and raises
AssertionError when the service breaks the protocol or the semantics of the configuration it was
given.

Timing: a wait is never early (a strict lower bound in every round; WAIT_EARLY_MS for rounding). Its
lateness is judged so that a loaded 2-core machine does not fail a right client and a wrong one
still fails: each timed job runs TIMED_ROUNDS times while a thread of this process sleeps the same
lengths with a plain sleep; a wait's lateness less that round's worst plain-sleep oversleep
(the scheduling delay anyone saw at that moment) must, as a median over the rounds, stay within
WAIT_LATE_MS. While it does not, more rounds run, up to MAX_TIMED_ROUNDS. One descheduled wait,
or a burst of load over a round or two, cannot fail the check; a wrong configuration is late (or
early) in every round."""

from __future__ import annotations

import http.client
import json
import math
import statistics
import threading
import time
from urllib.parse import urlsplit

from .profiles import Profile

# Early: at most the rounding of clocks and timers that count whole milliseconds (a library rounding
# a wait to the nearest ms, an event loop that reads its clock once per turn).
WAIT_EARLY_MS = 1.0
WAIT_LATE_MS = 20.0
# A breaker's first probe is not a timed sleep: it is the caller's next call after the open duration,
# so it also absorbs a GC pause or a descheduled caller thread.
PROBE_LATE_MS = 50.0
TIMED_ROUNDS = 3
MAX_TIMED_ROUNDS = 7


def post(url: str, path: str, body: dict | None = None, method: str = "POST") -> tuple[int, dict]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        connection.request(method, path, body=json.dumps(body) if body is not None else None,
                           headers={"content-type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def run_job(url: str, proxy, strategy: list[dict], **fields) -> dict:
    job = {"strategy": strategy, "target_url": f"http://127.0.0.1:{proxy.data_port}/bytes/100", "successes": 3,
           "max_requests": 50, "share": "user", "instance": "conformance", "vu": 1, **fields}
    status, reply = post(url, "/run", job)
    assert status == 200, f"POST /run answered {status}: {reply}"
    return reply


def expand(calls: list[dict]) -> list[dict]:
    """Undo the run-length encoding of request-less calls."""
    return [call for call in calls for _ in range(call.get("repeat", 1))]


def gaps_ms(requests: list[list[int]]) -> list[float]:
    """The wait between the end of each request and the start of the next."""
    return [(b[0] - (a[0] + a[1])) / 1000 for a, b in zip(requests, requests[1:])]


class PlainSleeps:
    """While a job runs, sleeps the given lengths over and over with a plain sleep in this process
    and keeps the worst oversleep: what scheduling alone added to a wait at that moment."""

    def __init__(self, lengths_ms: list[float]):
        self.lengths_s = [ms / 1000 for ms in lengths_ms if ms > 0] or [0.01]
        self.worst_ms = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sleep, daemon=True)

    def _sleep(self) -> None:
        while not self._done.is_set():
            for length in self.lengths_s:
                start = time.perf_counter()
                time.sleep(length)
                self.worst_ms = max(self.worst_ms, (time.perf_counter() - start - length) * 1000)

    def __enter__(self) -> "PlainSleeps":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()


def late_waits(rounds: list[tuple[list[float], float]], expected: list[float], what: str) -> str | None:
    """Why the waits are too late, or None. rounds: (measured waits, that round's plain-sleep
    oversleep in ms) for each run of one job. An early wait fails at once: that is never load."""
    shown = "; ".join(f"{[round(g, 1) for g in got]} ms (plain sleeps up to {slack:.1f} ms late)"
                      for got, slack in rounds)
    for measured, _ in rounds:
        assert len(measured) == len(expected), f"{what}: {len(measured)} waits, expected {len(expected)}"
        for got, want in zip(measured, expected):
            assert got >= want - WAIT_EARLY_MS, f"{what}: a wait was early: waits {shown}, configured {expected} ms"
    for position, want in enumerate(expected):
        lateness = statistics.median(got[position] - want - slack for got, slack in rounds)
        if lateness > WAIT_LATE_MS:
            return f"{what}: waits {shown}, configured {expected} ms (median lateness {lateness:.1f} ms)"
    return None


def assert_waits(job, expected: list[float], what: str) -> None:
    """Runs job() (returning one call's measured waits) TIMED_ROUNDS times next to plain sleeps, and
    more, up to MAX_TIMED_ROUNDS, while the median says late: a burst of load passes, a wrong
    configuration is late in every round."""
    rounds: list[tuple[list[float], float]] = []
    while True:
        with PlainSleeps(expected) as reference:
            waits = job()
        rounds.append((waits, reference.worst_ms))
        if len(rounds) >= TIMED_ROUNDS:
            why = late_waits(rounds, expected, what)
            if why is None:
                return
            assert len(rounds) < MAX_TIMED_ROUNDS, why


# -- protocol ---------------------------------------------------------------------------------------
def check_health(url: str, profile: Profile) -> None:
    status, health = post(url, "/health", method="GET")
    assert status == 200, f"GET /health answered {status}"
    assert health["protocol"] == 1
    assert health["library"] == profile.library
    assert set(profile.patterns) <= set(health["patterns"]), health["patterns"]
    assert isinstance(health["version"], str) and health["version"] not in ("", "unknown")


def check_reply_shape(url: str, proxy, profile: Profile) -> None:
    proxy.set_fault(abort__abort_percent=0)
    reply = run_job(url, proxy, [], successes=3, vu=7)
    assert reply["protocol"] == 1 and reply["library"] == profile.library and reply["vu"] == 7
    assert reply["stopped_by"] == "successes"
    assert isinstance(reply["total_us"], int) and reply["total_us"] > 0
    starts = []
    for call in reply["calls"]:
        assert isinstance(call["ok"], bool) and isinstance(call["requests"], list)
        for request in call["requests"]:
            assert len(request) == 3 and all(isinstance(v, int) for v in request), request
            starts.append(request[0])
    assert starts == sorted(starts), "request start times must not go backwards"
    assert reply["total_us"] >= sum(r[1] for c in reply["calls"] for r in c["requests"])


def check_bad_jobs_are_rejected(url: str, proxy) -> None:
    target = f"http://127.0.0.1:{proxy.data_port}/bytes/100"
    for bad in ({"strategy": [{"pattern": "no_such_pattern", "params": {}}]}, {"successes": 0},
                {"share": "everyone"}, {"target_url": "ftp://x/"}):
        job = {"strategy": [], "target_url": target, "successes": 1, "max_requests": 5, "vu": 1, **bad}
        status, reply = post(url, "/run", job)
        assert status == 400 and reply.get("error"), f"{bad} answered {status}: {reply}"


# -- semantics ----------------------------------------------------------------------------------------
def check_baseline_sends_one_request_per_call(url: str, proxy) -> None:
    proxy.set_fault(abort__abort_percent=50, abort__http_status=503)
    reply = run_job(url, proxy, [], successes=15, max_requests=200)
    calls = expand(reply["calls"])
    assert all(len(c["requests"]) == 1 for c in calls), "baseline: a call must be exactly one request"
    assert all(c["ok"] == (200 <= c["requests"][0][2] < 300) for c in calls)
    assert sum(c["ok"] for c in calls) == 15 and reply["stopped_by"] == "successes"
    assert any(not c["ok"] for c in calls), "with a 50% abort fault some calls must fail"


def check_retry_makes_exactly_k_requests(url: str, proxy, profile: Profile, attempts: int = 3) -> None:
    proxy.set_fault(abort__abort_percent=100, abort__http_status=503)
    reply = run_job(url, proxy, [{"pattern": "retry", "params": profile.retry_fixed(attempts, 1)}],
                    max_requests=attempts * 3)
    calls = expand(reply["calls"])
    assert [len(c["requests"]) for c in calls] == [attempts] * 3, \
        f"retry with {attempts} attempts under a 100% abort: requests per call {[len(c['requests']) for c in calls]}"
    assert all(not c["ok"] and all(r[2] == 503 for r in c["requests"]) for c in calls)


def retry_waits(url: str, proxy, params: dict, attempts: int) -> list[float]:
    """One call of a retry under a 100% abort: the waits between its attempts."""
    reply = run_job(url, proxy, [{"pattern": "retry", "params": params}], max_requests=attempts)
    (call,) = reply["calls"]
    return gaps_ms(call["requests"])


def check_retry_fixed_waits(url: str, proxy, profile: Profile, attempts: int = 4, wait_ms: int = 30) -> None:
    proxy.set_fault(abort__abort_percent=100, abort__http_status=503)
    params, expected = profile.retry_fixed(attempts, wait_ms), [wait_ms] * (attempts - 1)
    assert_waits(lambda: retry_waits(url, proxy, params, attempts), expected, "fixed retry")


def check_retry_exponential_waits(url: str, proxy, profile: Profile, attempts: int = 5, initial_ms: int = 15,
                                  multiplier: float = 1.5) -> None:
    proxy.set_fault(abort__abort_percent=100, abort__http_status=503)
    params = profile.retry_exponential(attempts, initial_ms, multiplier)
    expected = profile.exponential_waits(attempts, initial_ms, multiplier)
    assert_waits(lambda: retry_waits(url, proxy, params, attempts), expected, "exponential retry")


def check_retry_neutral_waits(url: str, proxy, native: dict, neutral_waits: list[float]) -> None:
    """A client configured from a neutral value waits the neutral sequence (`native` is what rbl
    mapped the value to for this client's library)."""
    proxy.set_fault(abort__abort_percent=100, abort__http_status=503)
    attempts = len(neutral_waits) + 1
    assert_waits(lambda: retry_waits(url, proxy, native, attempts), neutral_waits, "retry from a neutral value")


def breaker_probes(url: str, proxy, profile: Profile, failures: int, open_ms: int) -> tuple[float, int, float]:
    """One job against an always-failing upstream: (first probe's delay after opening in ms, or inf
    if none came, the number of probes, the open durations that fit between opening and the job's end)."""
    reply = run_job(url, proxy, [{"pattern": "circuit_breaker", "params": profile.breaker(failures, open_ms)}],
                    successes=1, max_requests=1000, max_duration_ms=int(open_ms * 3.5))
    calls = expand(reply["calls"])
    assert reply["stopped_by"] == "max_duration"
    sent = [i for i, c in enumerate(calls) if c["requests"]]
    assert sent[:failures] == list(range(failures)), \
        f"the breaker must let the first {failures} failing calls through (calls with requests: {sent[:8]})"
    assert all(len(calls[i]["requests"]) == 1 for i in sent)
    opened_at = calls[failures - 1]["requests"][0]
    opened_ms = (opened_at[0] + opened_at[1]) / 1000
    # the next call is rejected without a request, unless the caller was descheduled for the whole
    # open duration (a loaded machine): then it is rightly the first probe
    assert len(calls) > failures and (not calls[failures]["requests"] or calls[failures]["requests"][0][0] / 1000
                                      - opened_ms >= open_ms - WAIT_EARLY_MS), \
        (f"after {failures} failures the breaker must open and reject calls without a request (opened at "
         f"{opened_ms:.1f} ms; first calls' requests [start us, duration us, status]: "
         f"{[c['requests'] for c in calls[:failures + 2]]})")
    room = (reply["total_us"] / 1000 - opened_ms) / open_ms
    probes = [calls[i]["requests"][0] for i in sent[failures:]]
    if not probes:              # none within the job (on a loaded machine its first requests can eat it)
        return math.inf, 0, room
    return probes[0][0] / 1000 - opened_ms, len(probes), room


def check_breaker_opens_rejects_and_probes(url: str, proxy, profile: Profile, failures: int = 2,
                                           open_ms: int = 100) -> None:
    proxy.set_fault(abort__abort_percent=100, abort__http_status=503)
    rounds = []
    while True:
        with PlainSleeps([open_ms]) as reference:
            rounds.append((*breaker_probes(url, proxy, profile, failures, open_ms), reference.worst_ms))
        if len(rounds) >= TIMED_ROUNDS:
            why = late_probes(rounds, open_ms)
            if why is None:
                return
            assert len(rounds) < MAX_TIMED_ROUNDS, why


def late_probes(rounds: list[tuple[float, int, float, float]], open_ms: int) -> str | None:
    """Why the probes are too late or too many or too few, or None (as late_waits, for a breaker)."""
    shown = ", ".join(f"{delay:.1f} ms (plain sleeps up to {slack:.1f} ms late)" for delay, _, _, slack in rounds)
    assert all(delay >= open_ms - WAIT_EARLY_MS for delay, _, _, _ in rounds), \
        f"a first probe came early: {shown} after opening, configured {open_ms} ms"
    lateness = statistics.median(delay - open_ms - slack for delay, _, _, slack in rounds)
    if lateness == math.inf:
        return f"no probe went through after the open duration ({open_ms} ms) in most rounds: {shown}"
    if lateness > PROBE_LATE_MS:
        return f"first probe {shown} after opening, configured {open_ms} ms (median lateness {lateness:.1f} ms)"
    # a failed probe opens it again for another open duration: one probe per open duration, never
    # more; and two once there was room for two and a half (judged in most rounds, as the timing)
    wrong = [probes > room + 1 or room >= 2.5 and probes < 2 for _, probes, room, _ in rounds]
    if sum(wrong) > len(rounds) // 2:
        return (f"probes per round {[probes for _, probes, _, _ in rounds]} with room for "
                f"{[round(room, 1) for _, _, room, _ in rounds]} open durations of {open_ms} ms after opening")
    return None


def check_share_client_shares_one_breaker(url: str, proxy, profile: Profile) -> None:
    proxy.set_fault(abort__abort_percent=100, abort__http_status=503)
    strategy = [{"pattern": "circuit_breaker", "params": profile.breaker(2, 30_000)}]
    for share, instance in (("user", "conformance-user"), ("client", "conformance-client")):
        tripped = run_job(url, proxy, strategy, share=share, instance=instance, max_requests=2, vu=1)
        assert sum(len(c["requests"]) for c in tripped["calls"]) == 2
        second = run_job(url, proxy, strategy, share=share, instance=instance, successes=1, max_requests=1, vu=2,
                         max_duration_ms=200)
        first_call = expand(second["calls"])[0]
        if share == "user":
            assert first_call["requests"], "share: user gives each virtual user its own breaker"
        else:
            assert not first_call["requests"] and second["stopped_by"] == "max_duration", \
                "share: client must give virtual user 2 the breaker virtual user 1 opened"
