"""A compiled plan read for `rbl run`, checked in full before anything is created or started.

A plan file is untrusted input: its name becomes a directory, its target path a URL, its
scenarios the requests the clients send. The header is validated against
rbl/schemas/plan-v1.schema.json, then against what a schema cannot say (no control characters,
sizes consistent with the breakdown). Scenario lines are streamed twice, once to check them all
before the run starts and once, checked again, while the run directory copies them: a plan can
be far larger than memory, and a file changed in between is still never trusted. Every problem
is a UsageError (exit 2), as for any other bad argument of `rbl run`.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Iterable, Iterator

from ..errors import UsageError
from ..libraries.composition import policies_of
from ..plan_records import LOAD_KEY, is_open_loop, load_size_problem
from ..topology import topology_problem

HINT = "a plan is what `rbl compile SPEC -o DIR` writes: compile the spec again rather than editing the plan"
LINE_LIMIT = 1 << 20                    # bytes in one scenario line; real ones are well under 1 KB
INT32, INT64 = 2**31 - 1, 2**63 - 1
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# a composed client's pattern joins its patterns with + and qualifies its parameters (retry.attempts)
_PATTERN = re.compile(rf"(?=.{{1,128}}$){_NAME}(\+{_NAME})*")
_PARAMETER = re.compile(rf"(?=.{{1,128}}$){_NAME}(\.{_NAME})?")
_LABEL = re.compile(rf"{_NAME}(\.{_NAME}(\+{_NAME})*)?(#[0-9]{{1,9}})?")
_SCENARIO_ID = re.compile(r"[0-9a-f]{12}")
_SCENARIO_KEYS = frozenset(("id", "index", "fault", "users", "client", "library", "pattern", "config", "successes",
                            "max_requests"))
_FAULT_KEYS = {"abort": frozenset(("kind", "rate", "status")), "delay": frozenset(("kind", "rate", "duration_ms"))}


class PlanProblem(ValueError):
    """What is wrong, and where (a JSON path or a line number)."""


def load_plan_file(path: Path) -> tuple[dict, Iterable[str]]:
    """A compiled plan (plan.json, or the directory `rbl compile -o` wrote) as header + scenario
    lines; raises UsageError unless the whole plan is valid."""
    if path.is_dir():
        path = path / "plan.json"
    if not path.is_file():                  # not only missing: a FIFO would block the read forever
        raise UsageError(f"cannot read the plan {path}: not a file", hint=HINT)
    try:
        header = _loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError) as error:
        raise UsageError(f"cannot read the plan {path}: {_short(error)}", hint=HINT) from None
    if not isinstance(header, dict) or type(header.get("rbl_plan")) is not int or header["rbl_plan"] != 1:
        raise UsageError(f"{path} is not an rbl plan (version 1)", hint="make one with `rbl compile SPEC -o DIR`")
    inline = "scenarios" in header
    scenarios = header.pop("scenarios", None)
    if inline and "scenarios_file" in header:
        raise UsageError(f"{path} is not a valid rbl plan: it has both scenarios and scenarios_file", hint=HINT)
    check_header(header, path)
    if inline:
        if not isinstance(scenarios, list):
            raise UsageError(f"{path} is not a valid rbl plan: scenarios: not a list", hint=HINT)
        _drain(_checked_items(header, scenarios, path))
        return header, _checked_items(header, scenarios, path)
    name = header["scenarios_file"]
    if not name.endswith(".jsonl"):
        raise UsageError(f"{path} keeps its scenarios in {name}; `rbl run` reads JSON or JSON Lines plans",
                         hint="compile with --format json or --format jsonl")
    lines = path.parent / name
    if not lines.is_file():
        raise UsageError(f"the plan's scenario file {lines} is missing", hint=HINT)
    _drain(_checked_lines(header, lines))
    return header, _checked_lines(header, lines)


def check_header(header: dict, where: Path | str) -> None:
    """The plan without its scenarios (also the compiler's, for `rbl run SPEC`): the schema, then
    the arithmetic it cannot state."""
    try:
        _check_header(header)
    except PlanProblem as problem:
        raise UsageError(f"{where} is not a valid rbl plan: {problem}", hint=HINT) from None


def header_problem(header: dict) -> str | None:
    """What check_header refuses, as a message: a run directory's plan.json is checked as a plan."""
    try:
        _check_header(header)
    except PlanProblem as problem:
        return str(problem)
    except RecursionError:
        return "it is nested too deeply"
    return None


def scenario_check(header: dict) -> "_ScenarioCheck":
    """Each scenario of `header`'s plan in turn, as `rbl run` checks a plan's: call it on each
    (raises PlanProblem), then .finish() (the count)."""
    return _ScenarioCheck(header)


# -- the header ---------------------------------------------------------------------------------
@cache
def plan_schema() -> dict:
    return json.loads(resources.files("rbl").joinpath("schemas/plan-v1.schema.json").read_text(encoding="utf-8"))


@cache
def _validator(definition: str | None = None):
    from jsonschema import Draft202012Validator
    schema = plan_schema()
    if definition:
        schema = {"$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"}
    return Draft202012Validator(schema)


def _schema_problem(document: object, definition: str | None = None) -> str | None:
    from jsonschema.exceptions import best_match
    error = best_match(_validator(definition).iter_errors(document))
    if error is None:
        return None
    where = ".".join(map(str, error.absolute_path)) or "the plan"
    described = error.schema.get("description") if isinstance(error.schema, dict) else None
    if described and error.validator in ("pattern", "not", "maxLength", "minLength"):
        return f"{where}: {_show(error.instance)} is not {described}"
    return f"{where}: {_short(error.message)}"


def _check_header(header: dict) -> None:
    # the scenarios are checked one by one (_ScenarioCheck): stand in an empty list for them
    document = header if "scenarios_file" in header else {**header, "scenarios": []}
    problem = _schema_problem(document)
    if problem:
        raise PlanProblem(problem)
    _check_strings(header, "")
    breakdown, clients = header["breakdown"], header["clients"]
    faults, users = _axis_length(header["fault"]["rates"]), _axis_length(header["users"])
    if (breakdown["faults"], breakdown["users"]) != (faults, users):
        raise PlanProblem(f"breakdown: {breakdown['faults']} faults x {breakdown['users']} users, but the plan "
                          f"lists {faults} fault rates and {users} user counts")
    labels = [c["label"] for c in clients]
    if len(set(labels)) != len(labels):
        raise PlanProblem("clients: a label is used twice")
    if [(c["label"], c["configurations"]) for c in breakdown["clients"]] != \
            [(c["label"], c["configurations"]) for c in clients]:
        raise PlanProblem("breakdown.clients does not match clients")
    if is_open_loop(header) != ("loads" in breakdown):
        raise PlanProblem("breakdown.loads and load: an open-loop plan has both, a closed-loop plan neither")
    if ("targets" in breakdown) != ("axes" in header["target"]):
        raise PlanProblem("breakdown.targets and target.axes: a plan whose target varies has both, another neither")
    targets = breakdown.get("targets", 1)
    if "axes" in header["target"]:
        points = 1
        for axis in header["target"]["axes"].values():
            points *= _axis_length(axis)
        if points != targets:
            raise PlanProblem(f"breakdown.targets: {targets}, but the target's axes make {points} points")
        if not is_open_loop(header):
            raise PlanProblem("target.axes: a target varies only under open-loop load or a population of users")
    loads = breakdown.get("loads", 1)
    size = targets * faults * users * loads * sum(c["configurations"] for c in clients)
    if header["size"] != size:
        raise PlanProblem(f"size: {header['size']}, but |T| x |F| x |U| x |L| x sum |CONF_i| = {size}")
    adaptive = header.get("until_resolved")
    if adaptive is not None and adaptive["rounds"] > header["rounds"]:
        raise PlanProblem(f"until_resolved.rounds: {adaptive['rounds']} first rounds, more than the plan's "
                          f"{header['rounds']} at most")
    if header["runs"] != size * header["rounds"]:
        raise PlanProblem(f"runs: {header['runs']}, but size x rounds = {size * header['rounds']}")
    services: dict[str, str] = {}
    for client in clients:
        if services.setdefault(client["library"], client["service"]) != client["service"]:
            raise PlanProblem(f"clients: library {client['library']} names two client services")
    if "topology" in header:
        problem = topology_problem(header["topology"])
        if problem:
            raise PlanProblem(f"topology: {problem}")
    at = header["fault"].get("at")
    if at is not None and at not in [s["name"] for s in header.get("topology", {}).get("services", [])]:
        raise PlanProblem(f"fault.at: {at!r} is not a service of the plan's topology")


def _check_strings(value: object, where: str) -> None:
    """No control character in any key or string (the schema's patterns cannot exclude a final
    newline in every regex dialect); the schema has already bounded the nesting."""
    if isinstance(value, str):
        if _CONTROL.search(value):
            raise PlanProblem(f"{where or 'the plan'}: {_show(value)} contains a control character")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_strings(key, where)
            _check_strings(item, f"{where}.{key}" if where else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_strings(item, f"{where}.{index}")


def _axis_length(axis: list | dict) -> int:
    return len(axis) if isinstance(axis, list) else axis["step_count"]


# -- the scenarios ------------------------------------------------------------------------------
def _checked_lines(header: dict, path: Path) -> Iterator[str]:
    """The scenario file's lines, each checked (streamed: never the whole file in memory)."""
    check = _ScenarioCheck(header)
    number = 0
    try:
        with path.open("rb") as source:
            while raw := source.readline(LINE_LIMIT + 1):
                number += 1
                if len(raw) > LINE_LIMIT:
                    raise PlanProblem(f"longer than {LINE_LIMIT >> 20} MB")
                line = raw.decode("utf-8").strip()
                if line:
                    check(_loads(line))
                    yield line
        check.finish()
    except (PlanProblem, ValueError, RecursionError) as problem:
        place = f"{path}:{number}" if number and not isinstance(problem, _CountProblem) else str(path)
        raise UsageError(f"{place}: not a valid scenario of this plan: {_short(problem)}", hint=HINT) from None
    except OSError as error:
        raise UsageError(f"cannot read the plan's scenario file {path}: {error.strerror or error}") from None


def _checked_items(header: dict, scenarios: list, path: Path) -> Iterator[str]:
    check = _ScenarioCheck(header)
    for position, scenario in enumerate(scenarios):
        try:
            check(scenario)
        except PlanProblem as problem:
            raise UsageError(f"{path} is not a valid rbl plan: scenarios.{position}: {problem}", hint=HINT) from None
        yield json.dumps(scenario, separators=(",", ":"), ensure_ascii=False)
    try:
        check.finish()
    except PlanProblem as problem:
        raise UsageError(f"{path} is not a valid rbl plan: {problem}", hint=HINT) from None


class _CountProblem(PlanProblem):
    pass


class _ScenarioCheck:
    """Each scenario in turn: its shape (as the schema's scenario definition, written out because
    jsonschema takes ~100 us a line), then its place in this plan: consecutive indexes, a known
    client, the plan's fault, users, successes and max_requests."""

    def __init__(self, header: dict):
        self.header = header
        self.clients = {c["label"]: (c["library"], c["pattern"]) for c in header["clients"]}
        fault = header["fault"]
        self.fault = {k: v for k, v in fault.items() if k != "rates"}
        self.rates = _members(fault["rates"])
        self.users = _members(header["users"])
        self.open_loop = is_open_loop(header)
        self.target_axes = header["target"].get("axes")
        self.index = 0

    def __call__(self, scenario: object) -> None:
        problem = _shape_problem(scenario)
        if problem:
            # the schema's own words when it agrees (it is the contract), else the fast check's
            raise PlanProblem(_schema_problem(scenario, "scenario") or problem)
        header, fault = self.header, scenario["fault"]
        if scenario["index"] != self.index:
            raise PlanProblem(f"index {scenario['index']} where {self.index} was expected")
        if self.clients.get(scenario["client"]) != (scenario["library"], scenario["pattern"]):
            raise PlanProblem(f"client {scenario['client']} ({scenario['library']}.{scenario['pattern']}) "
                              f"is not one of the plan's clients")
        if {k: v for k, v in fault.items() if k != "rate"} != self.fault or not self.rates(fault["rate"]):
            raise PlanProblem(f"fault {_show(fault)} is not one of the plan's faults")
        if not self.users(scenario["users"]):
            raise PlanProblem(f"users {scenario['users']} is not one of the plan's user counts")
        if is_open_loop(scenario) != self.open_loop:
            raise PlanProblem("load: " + ("every scenario of an open-loop plan has one" if self.open_loop
                                          else "a closed-loop plan's scenarios have none"))
        for key in ("successes", "max_requests"):
            if scenario[key] != header[key]:
                raise PlanProblem(f"{key} {scenario[key]} differs from the plan's {header[key]}")
        self._check_target(scenario)
        self.index += 1

    def _check_target(self, scenario: dict) -> None:
        """A scenario of a plan whose target varies names one of its points; no other scenario has one."""
        if ("target" in scenario) != (self.target_axes is not None):
            raise PlanProblem("target: " + ("every scenario of a plan whose target varies names its point"
                                            if self.target_axes is not None else "the plan's target does not vary"))
        if self.target_axes is None:
            return
        target = {**self.header["target"], **scenario["target"]}
        for key, axis in self.target_axes.items():
            if not _members(axis)(target.get(key)):
                raise PlanProblem(f"target.{key} {_show(target.get(key))} is not one of the plan's")

    def finish(self) -> None:
        if self.index != self.header["size"]:
            raise _CountProblem(f"{self.index} scenarios, but the plan's size is {self.header['size']}")


def _members(axis: list | dict):
    """A membership test for an axis: a set for a list, the bounds for a range description."""
    if isinstance(axis, list):
        values = set(axis)
        return values.__contains__
    low, high = sorted((axis["from"], axis["to"]))
    return lambda value: low <= value <= high


def _number(value: object, low: float, high: float, integer: bool = True) -> bool:
    kind = type(value)                   # not isinstance: True is no number here
    return (kind is int or (kind is float and not integer)) and low <= value <= high


def _shape_problem(s: object) -> str | None:
    """The schema's scenario definition, as code; None when the scenario has that shape."""
    if type(s) is not dict:
        return "not an object"
    keys = _SCENARIO_KEYS | {LOAD_KEY} if is_open_loop(s) else _SCENARIO_KEYS
    if "target" in s and is_open_loop(s):     # a varying target's point: the schema checks it below
        keys = keys | {"target"}
    if s.keys() != keys:
        missing, extra = sorted(keys - s.keys()), sorted(map(str, s.keys() - keys))
        return f"missing {', '.join(missing)}" if missing else f"unexpected {_short(', '.join(extra))}"
    fault, config = s["fault"], s["config"]
    if not (type(s["id"]) is str and _SCENARIO_ID.fullmatch(s["id"])):
        return _invalid(s, "id")
    if not _number(s["index"], 0, INT64):
        return _invalid(s, "index")
    if not (type(fault) is dict and type(fault.get("kind")) is str
            and fault.keys() - {"at", "by", "from"} == _FAULT_KEYS.get(fault["kind"])
            and fault.get("by", "sidecar") == "sidecar" and _IDENTIFIER.fullmatch(str(fault.get("from", "_")))
            and (type(fault.get("at", "_")) is str and _IDENTIFIER.fullmatch(fault.get("at", "_")))
            and _number(fault["rate"], 0, 100, integer=False)
            and (_number(fault["status"], 200, 599) if "status" in fault else _number(fault["duration_ms"], 1, INT32))):
        return _invalid(s, "fault")
    for key in ("users", "successes", "max_requests"):
        if not _number(s[key], 1, INT32):
            return _invalid(s, key)
    if not (type(s["client"]) is str and len(s["client"]) <= 300 and _LABEL.fullmatch(s["client"])):
        return _invalid(s, "client")
    if not (type(s["library"]) is str and _IDENTIFIER.fullmatch(s["library"])):
        return _invalid(s, "library")
    if not (type(s["pattern"]) is str and _PATTERN.fullmatch(s["pattern"])):
        return _invalid(s, "pattern")
    if not (type(config) is dict and len(config) <= 1000):
        return _invalid(s, "config")
    for key, value in config.items():
        if not (type(key) is str and _PARAMETER.fullmatch(key) and _scalar(value)):
            return f"config.{_short(key, 40)}: {_show(value)} is not valid"
    try:
        policies_of(s["pattern"], config)
    except ValueError as error:
        return f"config: {error}"
    if is_open_loop(s):       # open-loop plans are small: the schema itself checks their loads
        problem = _schema_problem(s, "scenario")
        return problem or (f"load: {size}" if (size := load_size_problem(s[LOAD_KEY])) else None)
    return None


def _invalid(scenario: dict, key: str) -> str:
    return f"{key}: {_show(scenario[key])} is not valid"


def _scalar(value: object) -> bool:
    kind = type(value)
    if kind is str:
        return len(value) <= 4096 and not _CONTROL.search(value)
    return kind is bool or ((kind is int or kind is float) and -INT64 - 1 <= value <= INT64)


# -- JSON ---------------------------------------------------------------------------------------
def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def _loads(text: str) -> object:
    """Strict JSON: NaN and Infinity are errors. (A number that overflows to infinity, 1e999,
    parses, but every number in a plan is bounded by the schema, which rejects it.)"""
    return json.loads(text, parse_constant=_no_constant)


def _drain(lines: Iterator[str]) -> None:
    for _ in lines:
        pass


def _short(message: object, limit: int = 200) -> str:
    """A message fit for one line of a terminal: control characters escaped, long ones cut."""
    text = str(message)
    text = json.dumps(text, ensure_ascii=False)[1:-1] if _CONTROL.search(text) else text
    return text if len(text) <= limit else text[:limit] + "..."


def _show(value: object) -> str:
    """A value from the plan as JSON, cut to a readable length."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return _short(text, 80)
