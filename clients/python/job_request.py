"""Turning a POST /run body into a Job, refusing everything protocol.py does not allow."""

from __future__ import annotations

import json
import math
import re
from urllib.parse import urlsplit

from ..protocol import (INT64_MAX, MAX_COUNT, MAX_DURATION_MS, MAX_INSTANCE_CHARS, MAX_STEPS,
                       MAX_TARGET_PATH_CHARS, MAX_URL_CHARS, SHARE_MODES, TARGET_URL, Job, JobError, Step)

# The one rule every runtime applies (protocol.py); fullmatch, because `$` would also match before
# a final newline
_TARGET_URL = re.compile(TARGET_URL)
_AUTHORITY = re.compile(r"http://([^/?#]*)")


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
    match = _TARGET_URL.fullmatch(url)
    if not match:
        raise JobError(f"`target_url` {url[:80]!r} is not a URL this service can request: {_url_problem(url)}")
    written, port, path = match[1].lower(), int(match[2] or 80), match[3] or "/"
    host = written.strip("[]")
    if len(path) > MAX_TARGET_PATH_CHARS:
        raise JobError(f"`target_url`'s path is {len(path)} characters long; at most {MAX_TARGET_PATH_CHARS}")
    if port > 65535:
        raise JobError(f"`target_url` has a port out of range: {port}")
    # compared as written: brackets around a name or an IPv4 address ([127.0.0.1]) are no IPv6 literal
    if (written, port) != (f"[{allowed[0]}]" if ":" in allowed[0] else allowed[0], allowed[1]):
        raise JobError(f"`target_url` must be on {allowed[0]}:{allowed[1]} (this service's --target), "
                       f"got {host}:{port}")
    return host, port, path


def _url_problem(url: str) -> str:
    """Why `url` does not match TARGET_URL, for the error message."""
    if not url.startswith("http://"):
        return "it must be an http:// URL"
    authority = _AUTHORITY.match(url)[1]
    path = url[len("http://") + len(authority):]
    if "@" in authority:
        return "it must not have user info"
    if not re.fullmatch(r"([A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?", authority):
        return "it must be http://HOST:PORT/PATH with a host name or [IPv6] and a port of 1 to 5 digits"
    if not path.startswith("/"):
        return "its path must start with `/`"
    if path.startswith("//"):
        return "its path starts with `//`, which names a host"
    for index, ch in enumerate(path):
        if ch == "%" and not re.fullmatch(r"%[0-9A-Fa-f]{2}", path[index:index + 3]):
            return "`%` does not start a %XX escape"
        if ch != "%" and not re.fullmatch(r"[A-Za-z0-9._~!$&'()*+,;=:/?\-]", ch):
            return f"{ch!r} is not allowed in a target path (write it as %XX)"
    return "its path is not a target path"


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
    if len(instance) > MAX_INSTANCE_CHARS:                 # code points, as every runtime counts
        raise JobError(f"`instance` is longer than {MAX_INSTANCE_CHARS} characters")
    vu = _bounded(body, "vu", 0, (1 << 31) - 1, 0)
    max_duration_ms = _bounded(body, "max_duration_ms", 1, MAX_DURATION_MS, MAX_DURATION_MS)
    return Job(strategy, host, port, path, successes, max_requests, share, instance, vu, max_duration_ms)
