"""rbl client protocol v1: the job a client service receives and what it returns.

Start-up: a client service takes `--listen HOST:PORT` and `--target HOST:PORT` (required): the
only host and port its jobs may send requests to (the runner passes the fault proxy's data
address), so a client service cannot be used to reach anything else. `--max-jobs N` (default
MAX_JOBS) caps the connections it serves at once.

POST /run body (one virtual user's job):
  {"strategy": [{"pattern": "retry", "params": {...library-native...}}, ...],   # outermost first
   "target_url": "http://127.0.0.1:PORT/bytes/100", "successes": 25, "max_requests": 500,
   "share": "user" | "client", "instance": "KEY", "vu": 1, "max_duration_ms": 60000}
  target_url: `http://HOST[:PORT]PATH` (TARGET_URL below), else 400: HOST and PORT exactly the
  `--target` ones (HOST a name or a bracketed IPv6 literal, compared without regard to case; PORT 1
  to 5 digits, 80 when absent), no user info; PATH empty (meaning `/`) or a target path by the
  compiler's rule (rbl/compiler/urlpath.py): `/` not followed by `/`, RFC 3986 path characters and
  %XX escapes, an optional ?query; no `@`, `#`, `[`, spaces, `%` without two hex digits; at most
  MAX_TARGET_PATH_CHARS characters. Every runtime applies this one rule, so a path the compiler
  accepts runs on every client and one it refuses runs on none.
  successes, max_requests: integers 1..MAX_COUNT. vu: 0..2^31-1.
  instance: a string of at most MAX_INSTANCE_CHARS characters (code points). strategy: at most
  MAX_STEPS steps.
  Numbers in params must be finite and not negative; integers anywhere fit in 64 bits.
  max_duration_ms (1..MAX_DURATION_MS, default MAX_DURATION_MS) bounds the whole job, a call in
  progress included: a breaker that stays open sends no requests, and a retry may wait for ever.
Loop (the paper's rule): before each call, stop when `successes` calls succeeded or `max_requests`
  requests were sent, or max_duration_ms has passed. Within a call the same limits hold: a call
  that would send request max_requests + 1, or is still running (a request or a wait) when
  max_duration_ms has passed, is cut short: it ends at once, is reported failed with
  "cut_short": true, and ends the job (stopped_by says which limit). A request interrupted by
  the deadline is reported with status 0. The reply comes at most CUT_GRACE_MS after the deadline.
Reply: {"protocol": 1, "library": NAME, "version": V, "vu": 1, "total_us": N,
        "stopped_by": "successes" | "max_requests" | "max_duration" | "disconnected",
        "calls": [{"ok": true, "requests": [[start_us, duration_us, status], ...]},
                  {"ok": false, "requests": [], "repeat": 40},
                  {"ok": false, "requests": [[...]], "cut_short": true}, ...]}
  start_us counts from the start of the job; status 0 means a connection error. A client behind a
  sidecar (the mesh client) adds a fourth element when the reply carries SIDECAR_FLAGS_HEADER:
  the sidecar Envoy's response flags (e.g. "-", "UO" circuit broken, "UT" timed out, "UH" no
  healthy upstream, "URX" retries exhausted; for a reply Envoy's adaptive concurrency or admission
  control filter refused, which set no flag, one of SIDECAR_REFUSAL_DETAILS), at most
  MAX_FLAGS_CHARS characters. Consecutive
  identical calls that sent no request (an open circuit breaker) are run-length encoded with
  "repeat", so a breaker open for a long time does not produce megabytes of identical records.
  How a failed call ended, when a library pattern ended it rather than the target's answer (each
  optional; absent on a call the target's answers decided, so older clients stay valid):
    "rejected": "circuit_breaker" | "bulkhead" | "rate_limiter"  a library policy refused the call
        (the failure the call finally ended with was that refusal, e.g. a retry whose last attempt
        the breaker refused); with "wait_us": microseconds from the call's start to the refusal
        (a bulkhead's or rate limiter's wait for a permit; summed over "repeat");
    "timed_out": true    a library timeout ended the call (or its last attempt); the request it
        interrupted is reported with status 0 and its duration up to the interruption (a client
        that hands the timed call to another thread starts its first request's clock at the
        hand-off, where the timeout's own clock starts);
    "fallback": true     the library returned its fallback instead of the failure: "ok" stays false,
        since the target did not succeed (a fallback never counts as a success).
  A hedging pattern's extra requests are simply more requests of the call, overlapping in time
  (the runner counts a request that starts while an earlier one of its call is in flight as a
  hedge); the ones it cancels are reported with status 0. Request-less calls are run-length
  encoded only when these fields are equal too.
  A job whose caller disconnected stops at its next check (before each request, between calls
  and during waits, at least every DISCONNECT_CHECK_S), stopped_by "disconnected"; nobody reads it.
POST /call body: a /run job (the same fields, checked the same way, the same 400s). The service
  makes exactly ONE call through the strategy's patterns and replies in /run's shape with exactly
  one element in "calls"; an open-loop load generator sends many at once, each on a schedule of
  its own. `successes` is checked but cannot end a /call (it is at least 1).
  {"protocol": 1, "library": NAME, "version": V, "vu": 1, "total_us": N, "stopped_by": "calls",
   "calls": [{"ok": true, "requests": [[start_us, duration_us, status], ...]}]}
  stopped_by "calls": the call ended by itself (ok or not). The call is bounded by max_requests and
  max_duration_ms and cut short exactly as a /run call is: then it is {"ok": false, "requests":
  [...], "cut_short": true} and stopped_by names the limit (max_requests, max_duration,
  disconnected). A /call whose deadline passed or whose caller left before its call could start
  reports that call cut short with no request. A failing call whose pattern sent no request (an
  open breaker) is {"ok": false, "requests": []}, never with "repeat". start_us counts from the
  job's start, which is the call's start. Pattern instances: with share "client" the call goes
  through the instance kept for the job's `instance` key (with each step's position, pattern and
  params), the same one /run jobs with that key use, so one breaker or bulkhead sees the whole
  open-loop load; with share "user" each /call gets fresh instances (a breaker that sees one
  call only). A /call holds its connection as a /run does: --max-jobs counts connections,
  whichever route they ask for, and a caller may send /calls one after another on a keep-alive
  connection. Services build nothing per call that costs more than the call's own request (no
  thread pool, no process): many hundreds per second are served at once. A /call's requests go
  over keep-alive connections to the target that the service pools for its /calls (one call at a
  time on each, idle ones closed after about 10 s), as a production client's pool does; a /run
  keeps one connection of its own. A connection per call overflowed the target's listen queue at
  hundreds of calls a second, and each dropped SYN cost its request a second.
GET /health: {"protocol": 1, "library": NAME, "version": V, "patterns": [...], "endpoints": ["/run", "/call"]}
  ("endpoints": the job routes it serves; a service without it serves /run only)
GET /limits (services whose libraries have a limit that adapts itself: the Go and JVM services):
  {"protocol": 1, "library": NAME, "limits": [{"instance": I, "pattern": P, "limit": N,
  "inflight": M}, ...]}, one entry per shared instance (share "client") of such a pattern, I its
  jobs' "instance": the limit it set itself now and the calls it holds. The runner reads it every load
  window of an open-loop round and records it as the pattern's decision (controllers.jsonl).
Errors, always a JSON {"error": "..."} reply, never a dropped connection (whatever the method:
CONNECT and unknown methods included; to HEAD the reply has no body, as HTTP requires):
  400 a malformed request or a job the service cannot run (bad JSON, non-UTF-8 body, wrong types,
      values out of range, another target, a bad Content-Length, a control character in a header);
  404 no such route (the route is the request target's path; a query is ignored); 405 wrong method;
  408 the request (headers or body) did not arrive within READ_TIMEOUT_S;
  411 a body without Content-Length (chunked); 413 a body over MAX_BODY_BYTES;
  431 request headers over MAX_HEADER_BYTES; 503 more than MAX_JOBS connections at once, sent
      at once: a caller beyond the cap is not kept waiting behind other refused callers.
"""

from __future__ import annotations

from dataclasses import dataclass

PROTOCOL_VERSION = 1
SHARE_MODES = ("user", "client")
JOB_ROUTES = ("/run", "/call")       # GET /health's "endpoints"
ONE_CALL_STOP = "calls"              # a /call's stopped_by when its one call ended by itself

# Limits every client service applies (tests/conformance checks them).
MAX_BODY_BYTES = 1 << 20             # a job is about 1 KB
MAX_HEADER_BYTES = 32 * 1024
READ_TIMEOUT_S = 5.0                 # for a request's headers and body, and an idle connection
MAX_JOBS = 512                       # concurrent connections (each runs at most one job)
MAX_COUNT = 1_000_000                # successes and max_requests: bounds a reply's size
MAX_DURATION_MS = 86_400_000         # one day; also the default
MAX_STEPS = 8
MAX_INSTANCE_CHARS = 1024
MAX_TARGET_PATH_CHARS = 2048         # target_url's path and query: the compiler's MAX_TARGET_LENGTH
MAX_URL_CHARS = MAX_TARGET_PATH_CHARS + 512   # room for http:// and any HOST:PORT besides
SIDECAR_FLAGS_HEADER = "x-rbl-response-flags"   # the sidecar adds Envoy's %RESPONSE_FLAGS% to every reply
MAX_FLAGS_CHARS = 64
# Envoy's response code details of a request the sidecar's adaptive concurrency or admission control
# filter refused (no response flag): the sidecar puts them in SIDECAR_FLAGS_HEADER
# (rbl/mesh/sidecar_filters.py), and rbl counts such a request as refused by the sidecar (circuit
# broken), as a connection-pool limit's UO
SIDECAR_REFUSAL_DETAILS = {"adaptive_concurrency": "reached_concurrency_limit",
                           "admission_control": "denied_by_admission_control"}
CUT_GRACE_MS = 250                   # how late after max_duration_ms the reply may come
JOB_MARGIN = 16                      # connections beyond the virtual users: health checks, stragglers


def max_jobs_arguments(max_users: int) -> tuple[str, ...]:
    """The `--max-jobs` a runner passes when a round has more virtual users than MAX_JOBS allows."""
    needed = max_users + JOB_MARGIN
    return ("--max-jobs", str(needed)) if needed > MAX_JOBS else ()
DISCONNECT_CHECK_S = 0.1
INT64_MAX = (1 << 63) - 1

# target_url, as protocol v1 says, matched whole: HOST, PORT, then the path part, which is the
# compiler's TARGET_PATH (rbl/compiler/urlpath.py; tests/test_client_targets.py keeps them equal) or
# nothing. Each runtime applies this same rule.
TARGET_URL = (r"http://([A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\])(?::([0-9]{1,5}))?"
              r"((?:/(?!/)(?:[A-Za-z0-9._~!$&'()*+,;=:/-]|%[0-9A-Fa-f]{2})*"
              r"(?:\?(?:[A-Za-z0-9._~!$&'()*+,;=:/?-]|%[0-9A-Fa-f]{2})*)?)?)")


class JobError(ValueError):
    """The job is malformed or asks for something this service cannot do (HTTP 400)."""


@dataclass(frozen=True)
class Step:
    pattern: str
    params: dict


@dataclass(frozen=True)
class Job:
    strategy: tuple[Step, ...]
    host: str
    port: int
    path: str
    successes: int
    max_requests: int
    share: str
    instance: str
    vu: int
    max_duration_ms: int = MAX_DURATION_MS

    @property
    def host_port_path(self) -> tuple[str, int, str]:
        return self.host, self.port, self.path


class CallLog:
    """Collects calls as the protocol reports them, run-length encoding request-less calls."""

    def __init__(self):
        self.calls: list[dict] = []
        self.successful_calls = 0
        self.requests = 0

    def add(self, ok: bool, requests: list[list[int]], cut_short: bool = False, ending: dict | None = None) -> None:
        """ending: how a pattern ended the call ({"rejected": KIND, "wait_us": N}, {"timed_out": True},
        {"fallback": True}), as the protocol reports it; None when the target's answers decided."""
        self.requests += len(requests)
        self.successful_calls += ok
        ending = ending or {}
        if cut_short:
            self.calls.append({"ok": ok, "requests": requests, **ending, "cut_short": True})
            return
        last = self.calls[-1] if self.calls else None
        if not requests and last is not None and not last["requests"] and last["ok"] == ok \
                and "cut_short" not in last and _same_ending(last, ending):
            last["repeat"] = last.get("repeat", 1) + 1
            if "wait_us" in ending:
                last["wait_us"] += ending["wait_us"]
            return
        self.calls.append({"ok": ok, "requests": requests, **ending})


ENDING_KEYS = ("rejected", "timed_out", "fallback")
REJECTION_KINDS = ("circuit_breaker", "bulkhead", "rate_limiter")


def _same_ending(call: dict, ending: dict) -> bool:
    return all(call.get(key) == ending.get(key) for key in ENDING_KEYS)
