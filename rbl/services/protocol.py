"""rbl client protocol v1 (DESIGN 5.2): the job a client service receives and what it returns.

POST /run body (one virtual user's job):
  {"strategy": [{"pattern": "retry", "params": {...library-native...}}, ...],   # outermost first
   "target_url": "http://127.0.0.1:PORT/bytes/100", "successes": 25, "max_requests": 500,
   "share": "user" | "client", "instance": "KEY", "vu": 1, "max_duration_ms": 60000}
  max_duration_ms (optional) also ends the loop: a breaker that stays open sends no requests, so
  without it the paper's loop would never end.
Reply: {"protocol": 1, "library": NAME, "version": V, "vu": 1, "total_us": N,
        "stopped_by": "successes" | "max_requests" | "max_duration",
        "calls": [{"ok": true, "requests": [[start_us, duration_us, status], ...]},
                  {"ok": false, "requests": [], "repeat": 40}, ...]}
  start_us counts from the start of the job; status 0 means a connection error. Consecutive
  identical calls that sent no request (an open circuit breaker) are run-length encoded with
  "repeat", so a breaker open for a long time does not produce megabytes of identical records.
GET /health: {"protocol": 1, "library": NAME, "version": V, "patterns": [...]}
Errors: 400 {"error": "..."} for a job the service cannot run.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

PROTOCOL_VERSION = 1
SHARE_MODES = ("user", "client")


class JobError(ValueError):
    """The job is malformed or asks for something this service cannot do (HTTP 400)."""


@dataclass(frozen=True)
class Step:
    pattern: str
    params: dict


@dataclass(frozen=True)
class Job:
    strategy: tuple[Step, ...]
    target_url: str
    successes: int
    max_requests: int
    share: str
    instance: str
    vu: int
    max_duration_ms: int | None = None

    @property
    def host_port_path(self) -> tuple[str, int, str]:
        url = urlsplit(self.target_url)
        path = url.path or "/"
        if url.query:
            path += "?" + url.query
        return url.hostname or "127.0.0.1", url.port or 80, path


def _require(body: dict, key: str, kind: type, default=None):
    value = body.get(key, default)
    if value is None or not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise JobError(f"`{key}` must be {kind.__name__}, got {value!r}")
    return value


def parse_job(body: object) -> Job:
    if not isinstance(body, dict):
        raise JobError("the job must be a JSON object")
    steps = []
    for item in _require(body, "strategy", list, []):
        if not isinstance(item, dict) or not isinstance(item.get("pattern"), str):
            raise JobError("each strategy step needs a `pattern` string")
        params = item.get("params", {})
        if not isinstance(params, dict):
            raise JobError("`params` must be an object")
        steps.append(Step(item["pattern"], params))
    target_url = _require(body, "target_url", str)
    if urlsplit(target_url).scheme != "http":
        raise JobError(f"`target_url` must be an http:// URL, got {target_url!r}")
    share = _require(body, "share", str, "user")
    if share not in SHARE_MODES:
        raise JobError(f"`share` must be one of {', '.join(SHARE_MODES)}, got {share!r}")
    successes = _require(body, "successes", int)
    max_requests = _require(body, "max_requests", int)
    if successes < 1 or max_requests < 1:
        raise JobError("`successes` and `max_requests` must be at least 1")
    max_duration_ms = body.get("max_duration_ms")
    if max_duration_ms is not None and (not isinstance(max_duration_ms, int) or isinstance(max_duration_ms, bool)
                                        or max_duration_ms < 1):
        raise JobError(f"`max_duration_ms` must be a positive integer, got {max_duration_ms!r}")
    return Job(tuple(steps), target_url, successes, max_requests, share,
               str(body.get("instance", "")), _require(body, "vu", int, 0), max_duration_ms)


class CallLog:
    """Collects calls as the protocol reports them, run-length encoding request-less calls."""

    def __init__(self):
        self.calls: list[dict] = []
        self.successful_calls = 0
        self.requests = 0

    def add(self, ok: bool, requests: list[list[int]]) -> None:
        self.requests += len(requests)
        self.successful_calls += ok
        last = self.calls[-1] if self.calls else None
        if not requests and last is not None and not last["requests"] and last["ok"] == ok:
            last["repeat"] = last.get("repeat", 1) + 1
            return
        self.calls.append({"ok": ok, "requests": requests})
