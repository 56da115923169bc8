"""`rbl import`: a ResilienceBench JSON test space -> the rbl spec that runs what the original ran.

Follows the original scheduler's reading of the file (its key spellings across versions, lists as
axes in key order) so that the imported spec expands to the same scenario list, and the original
client services' reading of each pattern's parameters (rbl/original_clients.py) so that every
scenario retries, waits and breaks as the original's did. What cannot be carried over exactly is
a located error, or the closest setting with a warning naming the difference: never silent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path as FilePath
from urllib.parse import urlsplit

from .lang.diagnostics import Diagnostic, Diagnostics, Label
from .compiler.pipeline import compile_source
from .lang.reading import BOM, decode
from .lang.source import SourceFile, Span
from .compiler.urlpath import target_problem
from .json_source import (ImportFailed, JsonSource, Path, UnreadableNumber, path_text, read_integer, read_number,
                          shown)
from .libraries.catalogue import LibraryDef, PatternDef, builtin_libraries
from .original_clients import ORIGINAL_CLIENTS, WHOLE_NUMBER_TYPES, OriginalClient

# The original tool's key spellings, newest first.
TOP_KEYS = {
    "users": ("users", "concurrentUsers"),
    "successes": ("succRequests", "targetSuccessfulRequests"),
    "max_requests": ("maxRequests", "maxRequestsAllowed"),
    "clients": ("clientSpecs", "patterns"),
}
PLATFORM_LIBRARY = {"java": "resilience4j", ".net": "polly", "dotnet": "polly",
                    "nodejs": "cockatiel", "node": "cockatiel", "python": "tenacity"}
PATTERN_NAMES = {"baseline": "baseline", "retry": "retry", "circuit_breaker": "circuit_breaker",
                 "circuitbreaker": "circuit_breaker", "cb": "circuit_breaker"}
# Enum spellings the original tool's samples used for the same setting.
LEGACY_ENUM_VALUES = {"EXP_BACKOFF": "EXPONENTIAL_BACKOFF"}
# Numbers rbl carries over: no benchmark setting needs more (and a 10^6-digit literal must not be written).
LARGEST_EXPONENT, SMALLEST_EXPONENT, MOST_DIGITS = 12, -9, 30


@dataclass
class Imported:
    text: str                         # the rbl spec
    size: int                         # its scenarios, as the original expansion counts them
    diagnostics: list[Diagnostic] = field(default_factory=list)    # warnings: what differs, and why


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def import_file_bytes(data: bytes, name: str) -> Imported:
    """As import_resiliencebench, from a file's bytes: too large or not UTF-8 is a located error."""
    diags = Diagnostics()
    text = decode(data, name, diags)
    if text is None:
        raise ImportFailed(diags.items[0])
    return import_resiliencebench(text.removeprefix(BOM), name)


def import_resiliencebench(text: str, name: str) -> Imported:
    """The rbl spec equivalent to a ResilienceBench JSON test space. Raises ImportFailed."""
    source = SourceFile(name, text)
    try:
        data = json.loads(text, parse_float=read_number, parse_int=read_integer, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        span = Span.point(source, error.lineno, error.colno)
        raise ImportFailed(Diagnostic("E0401", "error", f"invalid JSON: {error.msg}",
                                      (Label(span, "here"),), (), "fix the JSON syntax"))
    except (ValueError, RecursionError) as error:      # NaN, 100k nested arrays
        reason = "it nests too deeply" if isinstance(error, RecursionError) else str(error).split(";")[0]
        raise ImportFailed(Diagnostic("E0401", "error", f"unreadable JSON: {reason}",
                                      (Label(Span.point(source, 1, 1), ""),), (),
                                      "a ResilienceBench test space holds plain numbers, strings and lists"))
    where = JsonSource(source)
    if not isinstance(data, dict):
        raise where.fail("a ResilienceBench test space is a JSON object", ())
    return _Converter(data, where, FilePath(name).stem).convert()


class _Converter:
    def __init__(self, data: dict, where: JsonSource, stem: str):
        self.data = data
        self.where = where
        self.stem = stem
        self.libraries = builtin_libraries()
        self.warnings: list[Diagnostic] = []
        self.origin: dict[int, Path] = {}          # spec body line -> the JSON path it came from
        self.body: list[str] = []

    def emit(self, line: str, path: Path) -> None:
        self.origin[len(self.body)] = path
        self.body.append(line)

    def warn(self, message: str, path: Path, hint: str | None = None) -> None:
        self.warnings.append(self.where.diagnostic("W0401", "warning", message, path, hint))

    def get(self, field_name: str, required: bool = True):
        keys = TOP_KEYS.get(field_name, (field_name,))
        for key in keys:
            if key in self.data:
                return key, self.data[key]
        if required:
            raise self.where.fail(f"missing `{keys[0]}`", (), f"the original tool requires `{keys[0]}`")
        return None, None

    # ---- the space ----------------------------------------------------------------------------

    def convert(self) -> Imported:
        _, rounds = self.get("rounds")
        self.emit(f"rounds = {self._int(rounds, ('rounds',))}", ("rounds",))
        users_key, users = self.get("users")
        users = self._list(users, (users_key,))
        self.emit(f"users {_axis([self._int(u, (users_key, i)) for i, u in enumerate(users)])}", (users_key,))
        successes_key, successes = self.get("successes")
        self.emit(f"successes = {self._int(successes, (successes_key,))}", (successes_key,))
        max_key, max_requests = self.get("max_requests")
        self.emit(f"max_requests = {self._int(max_requests, (max_key,))}", (max_key,))
        _, url = self.get("targetUrl")
        self.emit(f"target = {self._target_path(url)}", ("targetUrl",))
        self.emit("", ())
        rates = self._fault()
        self.emit("", ())
        clients_key, clients = self.get("clients")
        if not isinstance(clients, list) or not clients:
            raise self.where.fail(f"`{clients_key}` must be a non-empty list of clients", (clients_key,))
        configurations = [self._client(spec, (clients_key, index)) for index, spec in enumerate(clients)]
        size = len(rates) * len(users) * sum(configurations)
        self.emit(f"assert size == {size}", (clients_key,))
        return self._finish(url, size)

    def _finish(self, url, size: int) -> Imported:
        name = re.sub(r"[^A-Za-z0-9_]", "_", self.stem)[:64] or "imported"
        if name[0].isdigit():
            name = "_" + name
        header = [f"// Imported from {shown(self.stem + '.json', 200)} by `rbl import`.",
                  f"// original targetUrl: {shown(url, 200)} (rbl serves its own target; the path is kept)",
                  f"space {name} {{"]
        text = "\n".join(header + [f"  {line}".rstrip() for line in self.body] + ["}"]) + "\n"
        result = compile_source(text, f"{self.stem}.rbl")
        errors = [d for d in result.diagnostics if d.severity == "error"]
        if errors:
            raise self._untranslatable(errors[0], len(header))
        warnings = [d for d in result.diagnostics if d.severity != "error"]
        return Imported(text, result.space.size, self.warnings + warnings)

    def _untranslatable(self, error: Diagnostic, header_lines: int) -> ImportFailed:
        """A spec rbl rejects, reported at the JSON value that produced the rejected line."""
        primary = error.primary
        line = primary.span.line - header_lines - 1 if primary else -1
        path = self.origin.get(line, ())
        return ImportFailed(self.where.diagnostic(
            "E0401", "error", f"rbl cannot run this value: {error.message}", path,
            error.help or "change the value in the JSON",
            notes=(f"rbl's check said {error.code} at line {primary.span.line if primary else '?'} of the "
                   f"imported spec",)))

    def _target_path(self, url) -> str:
        if not isinstance(url, str):
            raise self.where.fail(f"`targetUrl` must be a string URL, found {shown(url)}", ("targetUrl",))
        if any(ord(c) < 0x20 or c == "\x7f" for c in url):
            raise self.where.fail("`targetUrl` contains a control character", ("targetUrl",),
                                  "a URL has none; percent-encode it")
        try:
            parsed = urlsplit(url)
        except ValueError as error:          # `http://[::1` (an unclosed IPv6 host), a host NFKC changes
            raise self.where.fail(f"`targetUrl` is not a URL ({error}): {shown(url)}", ("targetUrl",),
                                  "write it as http://HOST:PORT/PATH; rbl keeps only the path")
        path = (parsed.path or "/") + (f"?{parsed.query}" if parsed.query else "")
        problem = target_problem(path)
        if problem:
            raise self.where.fail(f"`targetUrl` has a path rbl cannot send as is ({problem}): {shown(path)}",
                                  ("targetUrl",), "percent-encode it (a space is %20)")
        return f'"{path}"'

    def _fault(self) -> list:
        _, fault = self.get("fault")
        if not isinstance(fault, dict):
            raise self.where.fail("`fault` must be an object", ("fault",))
        kind = fault.get("type", "abort")
        if not isinstance(kind, str) or kind.lower() not in ("abort", "delay"):
            raise self.where.fail(f"unknown fault type {shown(kind)}", ("fault", "type"),
                                  "rbl injects `abort` and `delay` faults")
        kind = kind.lower()
        self.emit(f"fault.kind = {kind}", ("fault", "type"))
        if kind == "abort":
            self.emit(f"fault.status = {self._int(fault.get('status', 503), ('fault', 'status'))}", ("fault", "status"))
        else:
            if "duration" not in fault:
                raise self.where.fail("a delay fault needs `duration` (milliseconds)", ("fault",))
            self.emit(f"fault.duration = {self._int(fault['duration'], ('fault', 'duration'))}ms", ("fault", "duration"))
        rates = self._list(fault.get("percentage", [0]), ("fault", "percentage"))
        texts = [f"{self._number(r, ('fault', 'percentage', i))}%" for i, r in enumerate(rates)]
        self.emit(f"fault.rate {_axis(texts)}", ("fault", "percentage"))
        return rates

    # ---- one client ---------------------------------------------------------------------------

    def _client(self, spec, path: Path) -> int:
        if not isinstance(spec, dict):
            raise self.where.fail(f"`{path_text(path)}` must be an object", path)
        library = self._library(spec, path)
        pattern = self._pattern(spec, library, path)
        config_key = "patternConfig" if "patternConfig" in spec else "configTemplate"
        config = spec.get(config_key) or {}
        if not isinstance(config, dict):
            raise self.where.fail(f"`{path_text(path + (config_key,))}` must be an object of parameters",
                                  path + (config_key,))
        original = ORIGINAL_CLIENTS.get((library.name, pattern.name))
        url = f"  // original url: {shown(spec['url'], 200)}" if spec.get("url") else ""
        header = f"client {library.name}.{pattern.name} {{"
        self.emit(header + url, path)
        first = len(self.body)
        count, written = 1, set()
        for key, raw in config.items():
            count *= self._parameter(key, raw, library.name, pattern, original, written, path + (config_key, key))
        if original is not None:
            self._original_settings(original, library.name, pattern, written, path + (config_key,))
        if len(self.body) == first:
            self.body[-1] = header + "}" + url            # a client without parameters: one line
        else:
            self.emit("}", path)
        self.emit("", path)
        return count

    def emit_setting(self, line: str, path: Path) -> None:
        """A line inside a client block."""
        self.emit("  " + line, path)

    def _parameter(self, key: str, raw, library: str, pattern: PatternDef, original: OriginalClient | None,
                   written: set[str], path: Path) -> int:
        """Write one JSON parameter (or say why not); returns how many configurations it makes."""
        name = key if key in pattern.params else pattern.by_alias().get(key)
        if name is None:
            raise self.where.fail(f"`{path_text(path)}` is not a parameter of {library}.{pattern.name}",
                                  path, f"the parameters are {', '.join(pattern.params)}")
        if name in written:
            raise self.where.fail(f"`{path_text(path)}` sets `{name}` a second time", path,
                                  "keep one spelling of each parameter")
        values = raw if isinstance(raw, list) else [raw]
        if not values:
            raise self.where.fail(f"`{path_text(path)}` is an empty list", path,
                                  "the original tool would expand it to no scenario at all")
        if original is not None and name in original.fixed:
            self._overridden(name, raw, original, path)
            return 1
        if original is not None and name not in original.reads and name not in original.inert:
            if isinstance(raw, list) and len(raw) > 1:
                raise self.where.fail(
                    f"`{path_text(path)}` varies a parameter the original client never read, so its "
                    f"{len(raw)} configurations all ran alike", path,
                    f"rbl's {library} client does read `{name}`; remove it from the JSON to keep "
                    "the original's behaviour (the scenario count then differs)")
            self.warn(f"`{path_text(path)}` = {shown(raw)} was never read by the original client; "
                      f"rbl leaves `{name}` at what the original ran", path,
                      f"the original client ({original.source}) reads only {', '.join(original.reads)}")
            self.emit_setting(f"// {name} = {shown(raw)} in the JSON: never read by the original client, not carried over", path)
            return 1
        whole = original is not None and original.reads.get(name) in WHOLE_NUMBER_TYPES
        texts = [self._value(v, pattern.params[name], path + ((i,) if isinstance(raw, list) else ()), whole)
                 for i, v in enumerate(values)]
        written.add(name)
        if original is not None and name in original.refused_below:
            least, why = original.refused_below[name]
            for i, value in enumerate(values):
                if isinstance(value, (int, Decimal)) and not isinstance(value, bool) and value < least:
                    where = path + ((i,) if isinstance(raw, list) else ())
                    self.warn(f"`{path_text(where)}` = {shown(value)}: {why}", where)
        note = "  // not used by this backoff, nor read by the original client" \
            if original is not None and name in original.inert else ""
        self.emit_setting(f"{name} {_axis(texts) if isinstance(raw, list) else '= ' + texts[0]}{note}", path)
        return len(values) if isinstance(raw, list) else 1

    def _overridden(self, name: str, raw, original: OriginalClient, path: Path) -> None:
        """A JSON value for a parameter the original client hard-coded: it never took effect."""
        fixed = original.fixed[name].value
        values = raw if isinstance(raw, list) else [raw]
        if len(values) > 1:
            raise self.where.fail(
                f"`{path_text(path)}` varies `{name}`, which the original client never read: its "
                f"{len(values)} configurations all ran {name} = {fixed}", path,
                f"remove `{name}` from the JSON ({original.fixed[name].why})")
        if LEGACY_ENUM_VALUES.get(str(values[0]), values[0]) != fixed:
            self.warn(f"`{path_text(path)}` = {shown(values[0])} was never read by the original client; "
                      f"it ran {name} = {fixed}, and so does the imported spec", path, original.fixed[name].why)

    def _original_settings(self, original: OriginalClient, library: str, pattern: PatternDef, written: set[str],
                           path: Path) -> None:
        """What the original client set without the JSON: hard-coded values, library defaults it
        left in place, and its language's value for a key the JSON lacks."""
        for name, fixed in original.fixed.items():
            self.emit_setting(f"{name} = {fixed.value}  // {fixed.why}", path)
        for name, text in original.library_defaults.items():
            if name not in written:
                self.emit_setting(f"{name} = {text}  // the library's default, which the original client left in place", path)
        for name in original.reads:
            if name in written:
                continue
            if name in original.missing_values:
                value = original.missing_values[name]
                self.warn(f"`{path_text(path)}` has no `{name}`: {original.missing}, so the imported spec "
                          f"sets {name} = {value}", path)
                self.emit_setting(f"{name} = {value}  // absent from the JSON: {original.missing}", path)
                continue
            default = pattern.params[name].default
            if default is None:
                raise self.where.fail(f"`{path_text(path)}` has no `{name}`, which the original client needed",
                                      path, f"add `{name}` to the JSON")
            self.warn(f"`{path_text(path)}` has no `{name}`: {original.missing}; the imported spec uses "
                      f"{library}'s default", path, f"add `{name}` to the JSON to choose its value")
        if original.caveat:
            self.warn(f"`{path_text(path[:-1])}`: {original.caveat}", path[:-1],
                      "compare its results with the published ones knowing this")

    def _library(self, spec: dict, path: Path) -> LibraryDef:
        name = spec.get("lib", "")
        name = name.strip().lower() if isinstance(name, str) else ""
        if not name:
            platform = spec.get("platform", "")
            name = PLATFORM_LIBRARY.get(platform.strip().lower(), "") if isinstance(platform, str) else ""
            if not name:
                raise self.where.fail(f"`{path_text(path)}` names neither a library nor a known platform",
                                      path + ("lib",), f"known platforms: {', '.join(PLATFORM_LIBRARY)}")
        library = self.libraries.get(name)
        if library is None:
            raise self.where.fail(f"unknown library {shown(name)} in `{path_text(path)}`", path + ("lib",),
                                  f"rbl knows {', '.join(self.libraries)}")
        return library

    def _pattern(self, spec: dict, library: LibraryDef, path: Path) -> PatternDef:
        key = "strategy" if "strategy" in spec else "pattern"
        raw = spec.get(key, "")
        strategy = raw.strip().lower().replace(" ", "_") if isinstance(raw, str) else ""
        pattern_name = PATTERN_NAMES.get(strategy)
        if pattern_name is None or pattern_name not in library.patterns:
            raise self.where.fail(f"`{path_text(path)}`: {library.name} has no strategy {shown(raw)}",
                                  path + (key,), f"{library.name} implements {', '.join(library.patterns)}")
        return library.patterns[pattern_name]

    # ---- values -------------------------------------------------------------------------------

    def _value(self, raw, definition, path: Path, whole: bool) -> str:
        base = definition.type.base
        if base == "enum":
            text = LEGACY_ENUM_VALUES.get(raw, raw) if isinstance(raw, str) else None
            if text not in definition.type.members:
                raise self.where.fail(f"`{path_text(path)}`: {shown(raw)} is not one of "
                                      f"{', '.join(definition.type.members)}", path)
            return text
        if base == "bool":
            if not isinstance(raw, bool):
                raise self.where.fail(f"`{path_text(path)}` must be true or false, found {shown(raw)}", path)
            return "true" if raw else "false"
        if base == "string":
            if not isinstance(raw, str) or any(ord(c) < 0x20 and c not in "\n\t" or c == "\x7f" for c in raw):
                raise self.where.fail(f"`{path_text(path)}` must be a string without control characters", path)
            return '"' + raw.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'
        number = self._number(raw, path)
        if (whole or base == "int") and "." in number:
            raise self.where.fail(f"`{path_text(path)}` must be a whole number, found {number}", path,
                                  "the original client read it as a whole number")
        if base == "duration":
            return f"{number}{'s' if definition.handoff == 's' else definition.handoff or 'ms'}"
        if base == "percent":
            return f"{number}%"
        return number

    def _number(self, raw, path: Path) -> str:
        """A JSON number as exact rbl source text (the JSON's own decimal digits, never a float's)."""
        if isinstance(raw, UnreadableNumber):
            raise self.where.fail(f"`{path_text(path)}` = {shown(raw, 40)} is outside what rbl carries over",
                                  path, f"numbers up to 10^{LARGEST_EXPONENT} with at most {MOST_DIGITS} digits")
        if isinstance(raw, bool) or not isinstance(raw, (int, Decimal)):
            raise self.where.fail(f"`{path_text(path)}` must be a number, found {shown(raw)}", path)
        number = Decimal(raw)
        if number != 0 and not (SMALLEST_EXPONENT <= number.adjusted() <= LARGEST_EXPONENT) \
                or len(number.as_tuple().digits) > MOST_DIGITS:
            raise self.where.fail(f"`{path_text(path)}` = {shown(str(raw), 40)} is outside what rbl carries over",
                                  path, f"numbers up to 10^{LARGEST_EXPONENT} with at most {MOST_DIGITS} digits")
        if number == number.to_integral_value():
            return str(int(number))
        return format(number.normalize(), "f")

    def _int(self, raw, path: Path) -> str:
        text = self._number(raw, path)
        if "." in text:
            raise self.where.fail(f"`{path_text(path)}` must be a whole number, found {text}", path)
        return text

    def _list(self, raw, path: Path) -> list:
        values = raw if isinstance(raw, list) else [raw]
        if not values:
            raise self.where.fail(f"`{path_text(path)}` is an empty list", path, "give at least one value")
        return values


def _axis(values: list[str]) -> str:
    return f"in [{', '.join(values)}]" if len(values) != 1 else f"= {values[0]}"
