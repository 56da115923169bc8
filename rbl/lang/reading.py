"""Spec bytes to spec text: the size limit, UTF-8 (a BOM allowed) and located encoding errors."""

from __future__ import annotations

import re

from .diagnostics import Diagnostics
from .source import SourceFile, Span

# The largest spec rbl reads. Real specs are a few KB; the compiler is linear up to this size
# (bench/hostile_specs.py measures 10 MB inputs), and the limit keeps a stray multi-GB file
# from filling memory before anything is reported.
MAX_SPEC_BYTES = 16 * 1024 * 1024
BOM = "\ufeff"
_SURROGATE = re.compile("[\ud800-\udfff]")


def read_limited(stream) -> bytes:
    """At most MAX_SPEC_BYTES + 1 bytes of a binary stream: enough to tell it is too large."""
    return stream.read(MAX_SPEC_BYTES + 1)


def decode(data: bytes, name: str, diags: Diagnostics) -> str | None:
    """The text of a spec file's bytes, or None after reporting why it has none."""
    if len(data) > MAX_SPEC_BYTES:
        too_large(SourceFile(name, data[:4096].decode("utf-8", "replace")), diags)
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        source = SourceFile(name, data.decode("utf-8", "replace"))
        before = data[:error.start]
        line = before.count(b"\n") + 1
        column = len(before[before.rfind(b"\n") + 1:].decode("utf-8")) + 1
        _not_utf8(diags, Span.point(source, line, column), f"byte 0x{data[error.start]:02X} at offset {error.start}")
        return None
    return text


def check_text(source: SourceFile, diags: Diagnostics) -> bool:
    """A text given as str (not read from bytes) must be within the limit and encodable."""
    if len(source.text) > MAX_SPEC_BYTES:
        too_large(source, diags)
        return False
    surrogate = _SURROGATE.search(source.text)
    if surrogate is not None:
        offset = surrogate.start()
        line = source.text.count("\n", 0, offset) + 1
        column = offset - source.text.rfind("\n", 0, offset)
        _not_utf8(diags, Span.point(source, line, column), f"the lone surrogate U+{ord(surrogate.group()):04X}")
        return False
    return True


def strip_bom(text: str) -> str:
    """Editors on Windows start UTF-8 files with a BOM; it is not part of the spec."""
    return text[1:] if text.startswith(BOM) else text


def too_large(source: SourceFile, diags: Diagnostics) -> None:
    diags.error("E0111", f"the spec is larger than {MAX_SPEC_BYTES:,} bytes", Span.point(source, 1, 1),
                "the spec starts here", notes=(f"rbl reads specs of at most {MAX_SPEC_BYTES:,} bytes (16 MiB)",),
                help="a spec describes one test space in a few KB; generate long axes with ranges "
                     "(`users in 1..1000`) instead of listing every value")


def _not_utf8(diags: Diagnostics, span: Span, what: str) -> None:
    diags.error("E0110", "the spec is not UTF-8 text", span, f"{what} is not UTF-8",
                help="save the file as UTF-8")
