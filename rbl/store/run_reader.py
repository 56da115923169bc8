"""The one reader of a run directory's files, for every command that reads one (report, diff, merge,
run --resume): a run directory is untrusted input, so no file is read through a symbolic link, as a
FIFO or a device, or beyond a size bound, and JSON is read strictly."""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

from ..errors import UsageError

DOCUMENT_LIMIT = 64 << 20    # plan.json, manifest.json: a few KB; a merge of 10,000 shards ~10 MB
LINE_LIMIT = 1 << 20         # one line of a JSON Lines file; a row is ~1 KB
DIGITS_LIMIT = 20            # an integer's digits, sign included: int64 needs 20
INT_LIMIT = 2**63 - 1        # rbl writes no integer beyond int64
LINK_HINT = "rbl reads a run directory's own files only: put the file itself there in place of the link"
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def shown(text: object) -> str:
    """Text from a run directory (a file name, a value) fit for a terminal: control characters escaped."""
    text = str(text)
    return json.dumps(text)[1:-1] if _CONTROL.search(text) else text     # ascii: escapes \x7f-\x9f too


def refused(path: Path, what: str, hint: str = LINK_HINT) -> UsageError:
    return UsageError(f"{path} {what}; rbl does not read it", hint=hint)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    if stat.S_ISFIFO(mode):
        return "is a FIFO, not a file"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a file"
    return "is a device, not a file"


def check_member(run_dir: Path, name: str, limit: int | None = None) -> bool:
    """Whether run_dir/name exists; raises UsageError when it is not a regular file (a link, a
    FIFO, a device, a directory) or is larger than `limit` bytes. Opens nothing."""
    path = run_dir / name
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror or error}") from None
    if not stat.S_ISREG(status.st_mode):
        raise refused(path, _kind(status.st_mode))
    if limit is not None and status.st_size > limit:
        raise refused(path, f"is larger than {limit >> 20} MB, which no file rbl writes is",
                      hint="check that this is the run directory rbl wrote")
    return True


def open_member(run_dir: Path, name: str) -> tuple[BinaryIO, int] | None:
    """run_dir/name opened for reading, with its size now (read no further: it may be growing);
    None when absent. The run directory itself may be a link (the user named it); its files may not."""
    if not check_member(run_dir, name):       # lstat first: opening a device may itself do something
        return None
    path = run_dir / name
    try:
        # O_NONBLOCK: a FIFO swapped in after the check opens at once instead of waiting for a writer
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise refused(path, "is a symbolic link") from None
        raise UsageError(f"cannot read {path}: {error.strerror or error}") from None
    status = os.fstat(descriptor)
    if not stat.S_ISREG(status.st_mode):
        os.close(descriptor)
        raise refused(path, _kind(status.st_mode))
    os.set_blocking(descriptor, True)
    return os.fdopen(descriptor, "rb"), status.st_size


def read_document(run_dir: Path, name: str, limit: int = DOCUMENT_LIMIT) -> tuple[object, str | None] | None:
    """A whole-file JSON document: (value, None), (None, why it is unreadable), or None when absent."""
    opened = open_member(run_dir, name)
    if opened is None:
        return None
    source, size = opened
    with source:
        if size > limit:
            raise refused(run_dir / name, f"is larger than {limit >> 20} MB, which no file rbl writes is",
                          hint="check that this is the run directory rbl wrote")
        data = source.read(min(size, limit))
    return parse_json(data)


@dataclass
class Line:
    """One non-blank line of a JSON Lines file: its value, or why it has none."""

    number: int
    value: object
    problem: str | None
    ended: bool = True           # False: the last line, without its newline (a crash may have cut it)


def read_lines(run_dir: Path, name: str) -> Iterator[Line] | None:
    """The lines of a JSON Lines file, streamed (never the whole file in memory); None when absent."""
    opened = open_member(run_dir, name)
    return None if opened is None else _lines(*opened)


def _lines(source: BinaryIO, size: int) -> Iterator[Line]:
    left, number = size, 0
    with source:
        while left > 0:
            raw = source.readline(min(LINE_LIMIT + 1, left))
            if not raw:
                return
            left -= len(raw)
            number += 1
            if len(raw) > LINE_LIMIT and not raw.endswith(b"\n"):
                while left > 0 and not raw.endswith(b"\n"):        # skip the rest of the line
                    raw = source.readline(min(LINE_LIMIT, left))
                    if not raw:
                        break
                    left -= len(raw)
                yield Line(number, None, f"longer than {LINE_LIMIT >> 20} MB", raw.endswith(b"\n"))
                continue
            if raw.strip():
                value, problem = parse_json(raw)
                yield Line(number, value, problem, raw.endswith(b"\n"))


# -- strict JSON ---------------------------------------------------------------------------------
class _Refused(ValueError):
    pass


def _integer(text: str) -> int:
    # before int(): converting thousands of digits is slow, and past 4,300 Python refuses
    if len(text) > DIGITS_LIMIT or abs(value := int(text)) > INT_LIMIT:
        raise _Refused(f"the integer {text[:24]}{'...' if len(text) > 24 else ''} is beyond 64 bits")
    return value


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {text[:24]}{'...' if len(text) > 24 else ''} is beyond a float's range")
    return value


def _constant(name: str) -> None:
    raise _Refused(f"{name} is not a JSON number")


def _object(pairs: list[tuple[str, object]]) -> dict:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        repeated = next(key for key, _ in pairs if key in seen or seen.add(key))
        # named only when plainly spelled: the message may reach a console that reads [brackets] as markup
        named = f'the key "{repeated}"' if _PLAIN_KEY.fullmatch(repeated) else "a key"
        raise _Refused(f"{named} appears twice in one object")
    return found


_DECODER = json.JSONDecoder(parse_int=_integer, parse_float=_float, parse_constant=_constant, object_pairs_hook=_object)


def parse_json(raw: bytes) -> tuple[object, str | None]:
    """Strict JSON: (value, None) or (None, why it is not readable). Beyond the standard: integers
    within 64 bits, finite numbers, no NaN or Infinity, no key twice in an object (which of the two
    would count?), no lone surrogate (it cannot be written out as UTF-8 again)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return None, f"not UTF-8 (byte {error.start + 1})"
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}" if error.lineno > 1 else f"column {error.colno}"
        return None, f"not JSON ({error.msg} at {where})"
    except _Refused as error:
        return None, f"not JSON rbl reads ({error})"
    except RecursionError:
        return None, "not JSON rbl reads (nested too deeply)"
    except ValueError as error:          # a number Python itself will not convert
        return None, f"not JSON rbl reads ({str(error)[:80]})"
    if "\\u" in text and not _encodable(value):
        return None, "not JSON rbl reads (a string holds a lone surrogate, which is not Unicode text)"
    return value, None


def _encodable(value: object) -> bool:
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return True
