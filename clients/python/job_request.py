"""Turning a POST /run body into a Job, refusing everything protocol.py does not allow."""

from __future__ import annotations

import json
import math
import re
from urllib.parse import urlsplit

from ..protocol import (INT64_MAX, MAX_COUNT, MAX_DURATION_MS, MAX_INSTANCE_CHARS, MAX_STEPS, MAX_URL_CHARS,
                       SHARE_MODES, Job, JobError, Step)

# RFC 3986 characters: anything else (spaces, controls) would break the request line, and urlsplit
# would silently drop a tab or newline rather than refuse it
_URL_CHARS = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/?%\[\]]*")


def _int(text: str) -> int:
    # Python refuses over 4300 digits with a ValueError; no protocol integer needs more than 64 bits
    if len(text.lstrip("-")) > 19 or not -INT64_MAX - 1 <= int(text) <= INT64_MAX:
        raise JobError(f"integer {text[:30]}{'...' if len(text) > 30 else ''} does not fit in 64 bits")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JobError(f"number {text[:30]} is out of range")
    return value


def _constant(name: str):
    raise JobError(f"{name} is not a JSON number")


def decode_body(raw: bytes) -> object:
    """The body's JSON value; JobError for non-UTF-8, bad JSON, huge numbers or deep nesting."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise JobError(f"the body is not UTF-8: {error}") from None
    try:
        return json.loads(text or "null", parse_int=_int, parse_float=_float, parse_constant=_constant)
    except json.JSONDecodeError as error:
        raise JobError(f"the body is not JSON: {error}") from None
    except RecursionError:
        raise JobError("the body is not a job: JSON nested too deeply") from None


def _field(body: dict, key: str, kind: type, default=None):
    value = body.get(key)
    if value is None:                    # absent or null: the default, if the field has one
        value = default
    if value is None or not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        shown = repr(value)
        raise JobError(f"`{key}` must be {kind.__name__}, got {shown[:60]}")
    return value


def _bounded(body: dict, key: str, low: int, high: int, default=None) -> int:
    value = _field(body, key, int, default)
    if not low <= value <= high:
        raise JobError(f"`{key}` must be between {low} and {high}, got {value}")
    return value


def parse_target(value: str) -> tuple[str, int]:
    """`--target HOST:PORT` as (lowercase host, port); ValueError when it is not one."""
    parts = urlsplit("//" + value)
    if not parts.hostname or parts.port is None or parts.path or parts.username is not None:
        raise ValueError(f"--target must be HOST:PORT, got {value!r}")
    return parts.hostname.lower(), parts.port


def _target(body: dict, allowed: tuple[str, int]) -> tuple[str, int, str]:
    url = _field(body, "target_url", str)
    if len(url) > MAX_URL_CHARS:
        raise JobError(f"`target_url` is longer than {MAX_URL_CHARS} characters")
    if not _URL_CHARS.fullmatch(url):
        raise JobError(f"`target_url` has characters a URL cannot hold: {url[:80]!r}")
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or 80
    except ValueError as error:          # a bad IPv6 literal, port 99999 or `abc`
        raise JobError(f"`target_url` is not a URL: {error}") from None
    if parts.scheme != "http" or not url.startswith("http://"):
        raise JobError(f"`target_url` must be an http:// URL, got {url[:80]!r}")
    if parts.username is not None or parts.fragment or not host:
        raise JobError(f"`target_url` must be http://HOST:PORT/PATH, got {url[:80]!r}")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if (host.lower(), port) != allowed:
        raise JobError(f"`target_url` must be on {allowed[0]}:{allowed[1]} (this service's --target), "
                       f"got {host}:{port}")
    return host, port, path


def _strategy(body: dict) -> tuple[Step, ...]:
    items = _field(body, "strategy", list, [])
    if len(items) > MAX_STEPS:
        raise JobError(f"`strategy` has {len(items)} steps; at most {MAX_STEPS}")
    steps = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("pattern"), str):
            raise JobError("each strategy step needs a `pattern` string")
        params = item.get("params", {})
        if not isinstance(params, dict):
            raise JobError("`params` must be an object")
        steps.append(Step(item["pattern"], params))
    return tuple(steps)


def parse_job(body: object, allowed: tuple[str, int]) -> Job:
    """The job in `body` (decoded JSON), whose target must be `allowed` (host, port)."""
    if not isinstance(body, dict):
        raise JobError("the job must be a JSON object")
    strategy = _strategy(body)
    host, port, path = _target(body, allowed)
    share = _field(body, "share", str, "user")
    if share not in SHARE_MODES:
        raise JobError(f"`share` must be one of {', '.join(SHARE_MODES)}, got {share[:40]!r}")
    successes = _bounded(body, "successes", 1, MAX_COUNT)
    max_requests = _bounded(body, "max_requests", 1, MAX_COUNT)
    instance = _field(body, "instance", str, "")
    if len(instance) > MAX_INSTANCE_CHARS:
        raise JobError(f"`instance` is longer than {MAX_INSTANCE_CHARS} characters")
    vu = _bounded(body, "vu", 0, (1 << 31) - 1, 0)
    max_duration_ms = _bounded(body, "max_duration_ms", 1, MAX_DURATION_MS, MAX_DURATION_MS)
    return Job(strategy, host, port, path, successes, max_requests, share, instance, vu, max_duration_ms)
