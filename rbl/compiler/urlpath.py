"""What `target` may be: a URL path, by the same rule as the plan schema's `target_path`."""

from __future__ import annotations

import re

# RFC 3986 path characters and %XX escapes, an optional ?query, no `@` (it would make a host of
# what precedes it once the runner prefixes the proxy's address) and no `//` at the start (a
# network-path reference). Kept equal to rbl/schemas/plan-v1.schema.json $defs/target_path,
# which tests/test_hostile_specs.py checks.
TARGET_PATH = re.compile(r"^/(?!/)(?:[A-Za-z0-9._~!$&'()*+,;=:/-]|%[0-9A-Fa-f]{2})*"
                         r"(?:\?(?:[A-Za-z0-9._~!$&'()*+,;=:/?-]|%[0-9A-Fa-f]{2})*)?$")
MAX_TARGET_LENGTH = 2048
_PATH_CHAR = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:/?-]")


def target_problem(path: str) -> str | None:
    """Why `path` is not a target path rbl can request, or None when it is one."""
    if len(path) > MAX_TARGET_LENGTH:
        return f"it is {len(path)} characters long; a target path has at most {MAX_TARGET_LENGTH}"
    if TARGET_PATH.fullmatch(path):       # (match would let `$` stand before a final newline)
        return None
    if not path.startswith("/"):
        return "it does not start with `/`"
    if path.startswith("//"):
        return "it starts with `//`, which names a host, not a path"
    for index, ch in enumerate(path):
        if ch == "%":
            if not re.fullmatch(r"%[0-9A-Fa-f]{2}", path[index:index + 3]):
                return "`%` does not start a %XX escape"
        elif not _PATH_CHAR.match(ch):
            return f"{_describe(ch)} is not allowed in a URL path (write it as %XX)"
    return "`?` can only start the query"   # pragma: no cover (the regex accepts `?` in the query)


def _describe(ch: str) -> str:
    if ch == " ":
        return "a space"
    if ch.isprintable():
        return f"`{ch}`"
    return f"the character U+{ord(ch):04X}"
