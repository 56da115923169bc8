"""`rbl import`: a ResilienceBench JSON test space -> an equivalent rbl spec.

Follows the original scheduler's reading of the file (its key spellings across versions, lists
as axes in key order) so that the imported spec expands to the same scenario list.
"""

from __future__ import annotations

import json
import re
from math import prod
from pathlib import Path
from urllib.parse import urlparse

from .compiler.diagnostics import Diagnostic, Label
from .compiler.source import SourceFile, Span
from .compiler.units import Value, format_value, parse_number
from .libraries.catalogue import LibraryDef, builtin_libraries

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


class ImportFailed(Exception):
    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


class _Json:
    """The JSON text, for locating the key a message is about."""

    def __init__(self, source: SourceFile):
        self.source = source

    def span_of(self, key: str | None) -> Span:
        if key is not None:
            match = re.search(r'"' + re.escape(key) + r'"\s*:', self.source.text)
            if match:
                before = self.source.text[:match.start()]
                line = before.count("\n") + 1
                col = match.start() - (before.rfind("\n") + 1) + 1
                return Span(self.source, line, col, line, col + len(key) + 2)
        return Span.point(self.source, 1, 1)

    def fail(self, message: str, key: str | None, hint: str | None = None) -> ImportFailed:
        return ImportFailed(Diagnostic("E0401", "error", message, (Label(self.span_of(key), ""),), (), hint))


def import_resiliencebench(text: str, name: str) -> str:
    """The rbl source equivalent to a ResilienceBench JSON test space. Raises ImportFailed."""
    source = SourceFile(name, text)
    where = _Json(source)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        span = Span.point(source, error.lineno, error.colno)
        raise ImportFailed(Diagnostic("E0401", "error", f"invalid JSON: {error.msg}",
                                      (Label(span, "here"),), (), "fix the JSON syntax"))
    if not isinstance(data, dict):
        raise where.fail("a ResilienceBench test space is a JSON object", None)
    return _Converter(data, where, Path(name).stem).convert()


class _Converter:
    def __init__(self, data: dict, where: _Json, stem: str):
        self.data = data
        self.where = where
        self.stem = stem
        self.libraries = builtin_libraries()

    def get(self, field: str, required: bool = True):
        keys = TOP_KEYS.get(field, (field,))
        for key in keys:
            if key in self.data:
                return key, self.data[key]
        if required:
            raise self.where.fail(f"missing `{keys[0]}`", None,
                                  f"the original tool requires `{keys[0]}`")
        return None, None

    def convert(self) -> str:
        lines = [f"// Imported from {self.stem}.json by `rbl import`."]
        body: list[str] = []
        _, rounds = self.get("rounds")
        body.append(f"rounds = {self._int(rounds, 'rounds')}")
        users_key, users = self.get("users")
        users = self._list(users, users_key)
        body.append(f"users {_axis([self._int(u, users_key) for u in users])}")
        successes_key, successes = self.get("successes")
        body.append(f"successes = {self._int(successes, successes_key)}")
        max_key, max_requests = self.get("max_requests")
        body.append(f"max_requests = {self._int(max_requests, max_key)}")
        _, url = self.get("targetUrl")
        parsed = urlparse(str(url))
        path = (parsed.path or "/") + (f"?{parsed.query}" if parsed.query else "")
        lines.append(f"// original targetUrl: {url} (rbl serves its own target; the path is kept)")
        body.append(f"target = {format_value(Value('string', path))}")
        body.append("")
        rates = self._fault(body)
        body.append("")
        clients_key, clients = self.get("clients")
        if not isinstance(clients, list) or not clients:
            raise self.where.fail(f"`{clients_key}` must be a non-empty list of clients", clients_key)
        configurations = []
        for index, spec in enumerate(clients):
            text, count = self._client(spec, f"{clients_key}[{index}]")
            body.extend(text)
            configurations.append(count)
        size = len(rates) * len(users) * sum(configurations)
        body.append(f"assert size == {size}")
        name = re.sub(r"[^A-Za-z0-9_]", "_", self.stem) or "imported"
        if name[0].isdigit():
            name = "_" + name
        lines.append(f"space {name} {{")
        lines.extend(f"  {line}".rstrip() for line in body)
        lines.append("}")
        return "\n".join(lines) + "\n"

    def _fault(self, body: list[str]) -> list:
        _, fault = self.get("fault")
        if not isinstance(fault, dict):
            raise self.where.fail("`fault` must be an object", "fault")
        kind = str(fault.get("type", "abort")).lower()
        if kind not in ("abort", "delay"):
            raise self.where.fail(f"unknown fault type `{kind}`", "type", "rbl injects `abort` and `delay` faults")
        body.append(f"fault.kind = {kind}")
        if kind == "abort":
            body.append(f"fault.status = {self._int(fault.get('status', 503), 'status')}")
        else:
            if "duration" not in fault:
                raise self.where.fail("a delay fault needs `duration` (milliseconds)", "fault")
            body.append(f"fault.duration = {self._int(fault['duration'], 'duration')}ms")
        rates = self._list(fault.get("percentage", [0]), "percentage")
        for rate in rates:
            if isinstance(rate, bool) or not isinstance(rate, (int, float)):
                raise self.where.fail(f"`percentage` values must be numbers, found {json.dumps(rate)}",
                                      "percentage")
        body.append(f"fault.rate {_axis([f'{_number(r)}%' for r in rates])}")
        return rates

    def _client(self, spec: dict, path: str) -> tuple[list[str], int]:
        if not isinstance(spec, dict):
            raise self.where.fail(f"`{path}` must be an object", None)
        library = self._library(spec, path)
        strategy = str(spec.get("strategy", spec.get("pattern", ""))).strip().lower().replace(" ", "_")
        pattern_name = PATTERN_NAMES.get(strategy)
        if pattern_name is None or pattern_name not in library.patterns:
            raise self.where.fail(f"`{path}`: {library.name} has no strategy `{strategy}`", "strategy",
                                  f"{library.name} implements {', '.join(library.patterns)}")
        pattern = library.patterns[pattern_name]
        config = spec.get("patternConfig", spec.get("configTemplate", {})) or {}
        if not isinstance(config, dict):
            raise self.where.fail(f"`{path}.patternConfig` must be an object of parameters",
                                  "patternConfig")
        header = f"client {library.name}.{pattern_name} {{"
        comment = f"  // original url: {spec['url']}" if spec.get("url") else ""
        if not config:
            return [f"{header}}}{comment}", ""], 1
        lines, count = [header + comment], 1
        aliases = pattern.by_alias()
        for key, raw in config.items():
            name = key if key in pattern.params else aliases.get(key)
            if name is None:
                raise self.where.fail(f"`{path}.patternConfig.{key}` is not a parameter of "
                                      f"{library.name}.{pattern_name}", key,
                                      f"the parameters are {', '.join(pattern.params)}")
            definition = pattern.params[name]
            if isinstance(raw, list):
                if not raw:
                    raise self.where.fail(f"`{path}.patternConfig.{key}` is an empty list", key,
                                          "the original tool would expand it to no scenario at all")
                values = [self._value(v, definition, key) for v in raw]
                lines.append(f"  {name} {_axis(values)}")
                count *= len(raw)
            else:
                lines.append(f"  {name} = {self._value(raw, definition, key)}")
        lines += ["}", ""]
        return lines, count

    def _library(self, spec: dict, path: str) -> LibraryDef:
        name = str(spec.get("lib", "")).strip().lower()
        if not name:
            platform = str(spec.get("platform", "")).strip().lower()
            name = PLATFORM_LIBRARY.get(platform, "")
            if not name:
                raise self.where.fail(f"`{path}` names neither a library nor a known platform", "lib")
        library = self.libraries.get(name)
        if library is None:
            raise self.where.fail(f"unknown library `{name}` in `{path}`", "lib",
                                  f"rbl knows {', '.join(self.libraries)}")
        return library

    def _value(self, raw, definition, key: str) -> str:
        base = definition.type.base
        if base == "enum":
            text = LEGACY_ENUM_VALUES.get(str(raw), str(raw))
            if text not in definition.type.members:
                raise self.where.fail(f"`{key}`: `{raw}` is not one of {', '.join(definition.type.members)}", key)
            return text
        if base == "bool":
            if not isinstance(raw, bool):
                raise self.where.fail(f"`{key}` must be true or false", key)
            return "true" if raw else "false"
        if base == "string":
            return format_value(Value("string", str(raw)))
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise self.where.fail(f"`{key}` must be a number, found {json.dumps(raw)}", key)
        number = _number(raw)
        if base == "duration":
            return f"{number}{'s' if definition.handoff == 's' else definition.handoff or 'ms'}"
        if base == "percent":
            return f"{number}%"
        if base == "int" and parse_number(number).denominator != 1:
            raise self.where.fail(f"`{key}` must be a whole number, found {number}", key)
        return number

    def _int(self, raw, key: str) -> int:
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or int(raw) != raw:
            raise self.where.fail(f"`{key}` must be a whole number, found {json.dumps(raw)}", key)
        return int(raw)

    def _list(self, raw, key: str) -> list:
        values = raw if isinstance(raw, list) else [raw]
        if not values:
            raise self.where.fail(f"`{key}` is an empty list", key, "give at least one value")
        return values


def _number(raw) -> str:
    if isinstance(raw, int):
        return str(raw)
    text = repr(float(raw))
    return text[:-2] if text.endswith(".0") else text


def _axis(values: list) -> str:
    return f"in [{', '.join(str(v) for v in values)}]" if len(values) != 1 else f"= {values[0]}"


def expected_size(data: dict) -> int:
    """Equation 1 read straight off the JSON (used by tests as an independent count)."""
    users = data.get("users", data.get("concurrentUsers"))
    rates = data["fault"]["percentage"]
    clients = data.get("clientSpecs", data.get("patterns"))
    confs = [prod(len(v) for v in (c.get("patternConfig") or c.get("configTemplate") or {}).values()
                  if isinstance(v, list)) for c in clients]
    return len(rates) * len(users) * sum(confs)
