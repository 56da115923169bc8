"""Spec values as YAML scalars that read back as exactly the same string.

Templates never paste a spec string raw: every one goes through `yaml_quote` (and, in compose
files, `compose_quote`), so quotes, colons, newlines, `{{ }}`, `&anchors`, `*aliases` and `#`
stay data. A double-quoted scalar is used because it is the only YAML style that can carry every
character: anything outside YAML's printable set, and every line break (which YAML would fold),
is written as an escape.
"""

from __future__ import annotations

_NAMED_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0",
                  "\x85": "\\N", "\xa0": "\\_", "\u2028": "\\L", "\u2029": "\\P"}


def _printable(ch: str) -> bool:
    # YAML 1.1/1.2 c-printable minus the BOM; line breaks are never left raw
    code = ord(ch)
    return (0x20 <= code <= 0x7E or 0xA0 < code <= 0xD7FF or 0xE000 <= code <= 0xFFFD and code != 0xFEFF
            or code >= 0x10000) and ch not in "\u2028\u2029"


def _escape(ch: str) -> str:
    if ch in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[ch]
    if _printable(ch):
        return ch
    code = ord(ch)
    return f"\\x{code:02X}" if code <= 0xFF else f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"


def yaml_quote(value: object) -> str:
    """A double-quoted YAML scalar whose value is str(value)."""
    return '"' + "".join(_escape(ch) for ch in str(value)) + '"'


def comment_text(value: object) -> str:
    """Text for the rest of a `# ...` comment line: one line (runs of whitespace, line breaks
    included, become one space) with every character outside YAML's printable set written as an
    escape. YAML parsers reject a raw control character even inside a comment."""
    return "".join(ch if _printable(ch) else _escape(ch) for ch in " ".join(str(value).split()))


def compose_quote(value: object) -> str:
    """As yaml_quote, for compose files: compose interpolates `$NAME` and `${NAME}` in every
    string, so a literal `$` is written `$$`."""
    return yaml_quote(str(value).replace("$", "$$"))
