"""An imported ResilienceBench experiment runs what the original tool ran: for every scenario,
rbl's attempts and waits (the code `rbl plan --mapping` uses) equal the original client's formula,
restated here from the original clients' source, and the scenario order equals the original
expansion. Plus: import is safe on hostile JSON (a located error, or a spec of the same size)."""

from __future__ import annotations

import copy
import json
import math
import re
import struct
from math import prod

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rbl.compiler.expand import iter_scenarios
from rbl.compiler.pipeline import compile_source
from rbl.lang.render import render_all
from rbl.importer import ImportFailed, import_resiliencebench
from rbl.neutral.semantics import BreakerBehaviour, RetryBehaviour, behaviour_of

from .conftest import EXAMPLES, REFERENCE_JSON
from .original_tool import build_scenarios

# the original tool's published data files, and the example of docs/reproducing.md
REFERENCE_FILES = sorted(REFERENCE_JSON.glob("*.json")) + sorted((EXAMPLES / "resiliencebench").glob("*.json"))


# ---- the original clients' behaviour, restated from their source (resilience-bench@f7800cb) -----

def float32(x: float) -> float:
    """C#'s float: Polly's ExponentialBackoffPow field."""
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def original_retry(lib: str, c: dict) -> tuple[int, list[float] | None]:
    """(attempts, waits before retry 1, 2, ...; None when the waits are random)."""
    if lib == "resilience4j":       # RetryConfig.maxAttempts + IntervalFunction.ofExponentialBackoff
        waits, wait = [], c["maxAttempts"] and c["initialIntervalMillis"]
        for _ in range(c["maxAttempts"] - 1):
            waits.append(float(wait))
            wait = math.trunc(wait * c["multiplier"])           # Java's (long) cast, every step
        return c["maxAttempts"], waits
    if lib == "polly":              # WaitAndRetryAsync(Count, n => Math.Pow(pow, n) * SleepDuration)
        count = c.get("count", c.get("retryCount", 0))
        pow_ = float32(c.get("exponentialBackoffPow", 0))
        return count + 1, [math.pow(pow_, n) * c.get("sleepDuration", 0) for n in range(1, count + 1)]
    if lib == "cockatiel":          # retry(handleAll, {maxAttempts, backoff: new ExponentialBackoff(...)})
        return c["maxAttempts"] + 1, None                       # decorrelated jitter: random
    raise AssertionError(lib)


def original_breaker(lib: str, c: dict) -> dict:
    if lib == "resilience4j":       # every CircuitBreakerConfig value is passed explicitly
        return {"open_for_ms": c["waitDurationInOpenState"], "permits": c["permittedNumberOfCallsInHalfOpenState"]}
    if lib == "polly":              # CircuitBreakerAsync(ExceptionsAllowedBeforeBreaking, DurationOfBreaking)
        return {"consecutive": c["exceptionsAllowedBeforeBreaking"], "open_for_ms": c.get("durationOfBreaking", 0),
                "permits": 1}
    if lib == "cockatiel":          # circuitBreaker(handleAll, {halfOpenAfter, ConsecutiveBreaker(n)})
        return {"consecutive": c["exceptionsAllowedBeforeBreaking"], "open_for_ms": c["halfOpenAfter"], "permits": 1}
    raise AssertionError(lib)


def check_scenario(lib: str, strategy: str, config: dict, behaviour) -> None:
    if strategy == "baseline":
        assert behaviour is None
        return
    if strategy == "retry":
        attempts, waits = original_retry(lib, config)
        assert isinstance(behaviour, RetryBehaviour)
        assert behaviour.attempts == attempts, (lib, config, behaviour)
        if waits is None:
            assert behaviour.waits is None and "random" in behaviour.describe()
        else:
            assert behaviour.waits is not None and len(behaviour.waits) == len(waits)
            assert all(abs(a - b) < 1e-9 for a, b in zip(behaviour.waits, waits)), (lib, config, behaviour)
        return
    expected = original_breaker(lib, config)
    assert isinstance(behaviour, BreakerBehaviour)
    assert behaviour.open_for_ms == expected["open_for_ms"]
    assert behaviour.half_open_permits == expected["permits"]
    if "consecutive" in expected:
        assert behaviour.consecutive == expected["consecutive"]


def fidelity(conf: dict) -> tuple[int, int]:
    """Import and compile `conf`; check every scenario against the original. (checked, total)."""
    imported = import_resiliencebench(json.dumps(conf), "experiment.json")
    result = compile_source(imported.text, "experiment.rbl")
    assert result.ok, render_all(result.diagnostics)
    ours = list(iter_scenarios(result.space))
    theirs = [s for s in build_scenarios(copy.deepcopy(conf)) if s["round"] == 1]
    assert len(ours) == len(theirs) == imported.size
    checked = 0
    for mine, original in zip(ours, theirs):
        assert (mine["fault"]["rate"], mine["users"], mine["library"]) == \
            (original["faultPercentage"], original["users"], original["lib"])
        strategy = {"circuitbreaker": "circuit_breaker"}.get(original["strategy"], original["strategy"])
        assert mine["pattern"] == strategy
        behaviour = behaviour_of(mine["library"], mine["pattern"], mine["config"], _delay(conf))
        check_scenario(original["lib"], strategy, original["patternConfig"], behaviour)
        if original["lib"] == "resilience4j" and strategy == "circuit_breaker":
            for key, value in original["patternConfig"].items():    # passed through unchanged
                assert mine["config"][key] == value
            assert mine["config"]["slidingWindowType"] == "COUNT_BASED"
            assert mine["config"]["automaticTransitionFromOpenToHalfOpenEnabled"] is False
        checked += 1
    return checked, len(theirs)


def _delay(conf: dict):
    return conf["fault"].get("duration") if conf["fault"].get("type") == "delay" else None


@pytest.mark.parametrize("path", REFERENCE_FILES, ids=lambda p: p.name)
def test_every_scenario_of_a_reference_file_runs_the_original_behaviour(path):
    conf = json.loads(path.read_text())
    checked, total = fidelity(conf)
    assert checked == total > 0


def _space(*clients: dict, percentage=(0, 50), users=(1, 10)) -> dict:
    return {"rounds": 2, "users": list(users), "succRequests": 10, "maxRequests": 100,
            "targetUrl": "http://server:9211/status/200",
            "fault": {"type": "abort", "percentage": list(percentage), "status": 503},
            "clientSpecs": list(clients)}


def _client(lib: str, strategy: str, config: dict) -> dict:
    return {"strategy": strategy, "lib": lib, "url": f"http://{lib}/{strategy}", "patternConfig": config}


FIXTURES = {
    "every library, lists": _space(
        _client("polly", "baseline", {}), _client("resilience4j", "baseline", {}), _client("cockatiel", "baseline", {}),
        _client("polly", "retry", {"count": [1, 3, 5], "exponentialBackoffPow": [1.2, 1.5, 2.0],
                                   "sleepDuration": [20, 45]}),
        _client("resilience4j", "retry", {"maxAttempts": [2, 6], "multiplier": [1.2, 1.5, 1.7],
                                          "initialIntervalMillis": [20, 33]}),
        _client("cockatiel", "retry", {"maxAttempts": [1, 4], "exponent": [2, 3], "maxDelay": 30000,
                                       "initialDelay": [128, 20]}),
        _client("polly", "circuit_breaker", {"exceptionsAllowedBeforeBreaking": [1, 2], "durationOfBreaking": [20, 60]}),
        _client("resilience4j", "circuit_breaker", {
            "failureRateThreshold": [50, 100], "slidingWindowSize": 2, "minimumNumberOfCalls": [2, 4],
            "waitDurationInOpenState": [20, 40], "permittedNumberOfCallsInHalfOpenState": 1,
            "slowCallRateThreshold": 100, "slowCallDurationThreshold": 1000}),
        _client("cockatiel", "circuit_breaker", {"halfOpenAfter": [2, 50], "exceptionsAllowedBeforeBreaking": [5, 1]})),
    "every library, scalars": _space(
        _client("polly", "retry", {"count": 5, "exponentialBackoffPow": 1.5, "sleepDuration": 20}),
        _client("resilience4j", "retry", {"maxAttempts": 6, "multiplier": 1.5, "initialIntervalMillis": 20}),
        _client("cockatiel", "retry", {"maxAttempts": 3, "exponent": 2, "maxDelay": 30000, "initialDelay": 128}),
        _client("polly", "circuit_breaker", {"exceptionsAllowedBeforeBreaking": 2, "durationOfBreaking": 40}),
        _client("resilience4j", "circuit_breaker", {
            "failureRateThreshold": 100, "slidingWindowSize": 2, "minimumNumberOfCalls": 2,
            "waitDurationInOpenState": 40, "permittedNumberOfCallsInHalfOpenState": 1,
            "slowCallRateThreshold": 100, "slowCallDurationThreshold": 1000}),
        _client("cockatiel", "circuit_breaker", {"halfOpenAfter": 40, "exceptionsAllowedBeforeBreaking": 2}),
        percentage=(25,), users=(5,)),
    # keys the original clients never read: their values must not change what runs
    "ignored keys": _space(
        _client("polly", "retry", {"count": 4, "sleepDurationType": "FIXED", "exponentialBackoffPow": 1.5,
                                   "sleepDuration": [20, 40]}),
        _client("resilience4j", "retry", {"maxAttempts": 5, "intervalFunction": "FIXED", "waitDuration": [100, 200],
                                          "multiplier": 1.5, "initialIntervalMillis": 20})),
    # Polly's C# model fills a missing key with 0: no retry, no wait
    "polly defaults": _space(_client("polly", "retry", {"sleepDuration": [10, 20]}),
                             _client("polly", "retry", {"count": 3, "sleepDuration": 10})),
}


@pytest.mark.parametrize("name", FIXTURES)
def test_every_scenario_of_a_fixture_runs_the_original_behaviour(name):
    checked, total = fidelity(FIXTURES[name])
    assert checked == total > 0


def test_the_readme_example_waits_as_the_readme_says(cli):
    code, spec, err = cli("import", EXAMPLES / "resiliencebench" / "retry-resilience4j.json")
    assert code == 0 and "intervalFunction = EXPONENTIAL_BACKOFF  // the original client" in spec, err
    space = compile_source(spec, "retry.rbl").space
    from rbl.mappingview import mapping_text
    text = mapping_text(space)
    assert "4 attempts, waits 20, 30, 45 ms (total 95 ms)" in text
    assert "4 attempts, waits 40, 60, 90 ms (total 190 ms)" in text


def test_the_papers_retry_pair_waits_as_the_originals_did():
    """The issue's numbers: Resilience4j 20, 30, 45 ms (not 500, 500, 500), Polly pow^k * s."""
    imported = import_resiliencebench(json.dumps(FIXTURES["every library, scalars"]), "pair.json")
    assert "intervalFunction = EXPONENTIAL_BACKOFF  // the original client always used" in imported.text
    assert "sleepDurationType = EXPONENTIAL_BACKOFF  // the original client always waited" in imported.text
    space = compile_source(imported.text, "pair.rbl").space
    waits = {s["library"]: behaviour_of(s["library"], s["pattern"], s["config"]).waits
             for s in iter_scenarios(space) if s["pattern"] == "retry" and s["library"] != "cockatiel"}
    assert waits["resilience4j"][:3] == (20.0, 30.0, 45.0)
    assert waits["polly"][:3] == (30.0, 45.0, 67.5)


def test_what_differs_from_the_json_is_a_warning_at_its_key():
    imported = import_resiliencebench(json.dumps(FIXTURES["ignored keys"], indent=1), "ignored.json")
    messages = {d.code: [] for d in imported.diagnostics}
    for d in imported.diagnostics:
        messages[d.code].append((d.message, d.primary.span.line))
    texts = " | ".join(m for m, _ in messages["W0401"])
    assert "`clientSpecs[0].patternConfig.sleepDurationType` = \"FIXED\" was never read" in texts
    assert "`clientSpecs[1].patternConfig.intervalFunction` = \"FIXED\" was never read" in texts
    lines = json.dumps(FIXTURES["ignored keys"], indent=1).splitlines()
    for message, line in messages["W0401"]:
        key = re.search(r"patternConfig\.(\w+)", message).group(1)
        assert f'"{key}"' in lines[line - 1], (message, lines[line - 1])


def test_a_missing_polly_key_is_written_as_the_csharp_default_with_a_warning():
    imported = import_resiliencebench(json.dumps(FIXTURES["polly defaults"]), "defaults.json")
    assert "retryCount = 0  // absent from the JSON" in imported.text
    assert "exponentialBackoffPow = 0.0  // absent from the JSON" in imported.text
    assert sum("has no `exponentialBackoffPow`" in d.message for d in imported.diagnostics) == 2


def test_the_cockatiel_caveat_and_random_waits_are_said():
    imported = import_resiliencebench(json.dumps(FIXTURES["every library, scalars"]), "c.json")
    assert any("never saw a failure" in d.message for d in imported.diagnostics)
    space = compile_source(imported.text, "c.rbl").space
    from rbl.mappingview import mapping_text
    text = mapping_text(space)
    assert "random waits (ExponentialBackoff's decorrelated jitter, exponent 2" in text


@pytest.mark.parametrize("config,expected", [
    ({"maxAttempts": 3, "intervalFunction": ["FIXED", "EXPONENTIAL_BACKOFF"], "multiplier": 1.5,
      "initialIntervalMillis": 20}, "varies `intervalFunction`, which the original client never read"),
    ({"maxAttempts": 3, "maxIntervalMillis": [100, 200], "multiplier": 1.5, "initialIntervalMillis": 20},
     "varies a parameter the original client never read"),
    ({"maxAttempts": 3, "multiplier": 1.5, "initialIntervalMillis": 20.5}, "must be a whole number"),
    ({"maxAttempts": 3, "multiplier": 1.5, "initialIntervalMillis": 20, "retries": 2}, "is not a parameter"),
])
def test_what_cannot_be_carried_over_is_a_located_error(config, expected):
    text = json.dumps(_space(_client("resilience4j", "retry", config)), indent=1)
    with pytest.raises(ImportFailed) as failure:
        import_resiliencebench(text, "bad.json")
    diagnostic = failure.value.diagnostic
    assert diagnostic.code == "E0401" and expected in diagnostic.message
    assert diagnostic.primary.span.line > 1


# ---- hostile JSON -----------------------------------------------------------------------------

HOSTILE_TEXT = st.sampled_from([
    "x\nlibrary evil {\n platform = \"x\"\n}\n", "\r", "a\rb", "\x00", "\x7f", "\u2028", "}", "\"", "\\", "//",
    "http://h/p\nclient polly.retry {}", "http://h/a b", "EXPONENTIAL_BACKOFF", "FIXED", "retry", "polly", "",
    "/bytes/10 x", "http://h/%zz", "${HOME}", "1e400", "NaN"])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-10**20, max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20) | HOSTILE_TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8) | HOSTILE_TEXT,
                                                                       children, max_size=3),
    max_leaves=6)
# values a real test space might hold, so that many cases import and their size is compared
PLAUSIBLE = (st.integers(min_value=1, max_value=200) | st.lists(st.integers(min_value=1, max_value=200), min_size=1, max_size=3)
             | st.floats(min_value=1, max_value=3).map(lambda x: round(x, 2))
             | st.sampled_from(["http://x/get", "http://h/bytes/10?x=1", "polly", "resilience4j", "cockatiel", "retry",
                                "baseline", "circuit_breaker", "EXPONENTIAL_BACKOFF", "FIXED", "delay", "abort"])
             | st.text(max_size=12).map(lambda s: "http://h/" + s))
VALUES = st.one_of(PLAUSIBLE, PLAUSIBLE, JSON_VALUES)
BASE = FIXTURES["every library, scalars"]


def _positions(conf: dict) -> list[tuple]:
    """Every path of the document (object keys and list items), to put a hostile value at."""
    out, stack = [], [((), conf)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            for key, child in value.items():
                out.append(path + (key,))
                stack.append((path + (key,), child))
        elif isinstance(value, list):
            for index, child in enumerate(value):
                out.append(path + (index,))
                stack.append((path + (index,), child))
    return sorted(out, key=repr)


POSITIONS = _positions(BASE) + [("clientSpecs", 1, "patternConfig", "waitDuration"), ("newTopKey",)]


def _put(conf: dict, path: tuple, value) -> None:
    target = conf
    for part in path[:-1]:
        target = target[part]
    if isinstance(target, list) and path[-1] >= len(target):
        target.append(value)
    else:
        target[path[-1]] = value


def _as_list(value):
    return value if isinstance(value, list) else [value]


def _original_size(conf: dict) -> int:
    users = _as_list(conf.get("users", conf.get("concurrentUsers")))
    rates = _as_list(conf["fault"].get("percentage", [0]))
    clients = conf.get("clientSpecs", conf.get("patterns"))
    confs = [prod(len(v) for v in (c.get("patternConfig") or c.get("configTemplate") or {}).values()
                  if isinstance(v, list)) for c in clients]
    return len(rates) * len(users) * sum(confs)


SPEC_LINE = re.compile(r"\s*(//.*|space \w+ \{|client \w+\.\w+ \{(\}?)(  //.*)?|\}|[\w.]+ (=|in) [^\n]*|"
                       r"assert size == \d+|)")


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(POSITIONS), VALUES), min_size=1, max_size=3))
def test_hostile_json_is_a_located_error_or_the_same_experiment(changes):
    conf = copy.deepcopy(BASE)
    for path, value in changes:
        try:
            _put(conf, path, value)
        except (KeyError, IndexError, TypeError):
            pass                        # an earlier change replaced a container on this path
    text = json.dumps(conf, indent=1)
    try:
        imported = import_resiliencebench(text, "hostile.json")
    except ImportFailed as failure:
        diagnostic = failure.diagnostic
        assert diagnostic.code == "E0401" and diagnostic.primary is not None
        assert 1 <= diagnostic.primary.span.line <= text.count("\n") + 1
        render_all([diagnostic])
        event("a located error")
        return
    event("the same experiment")
    result = compile_source(imported.text, "hostile.rbl")
    assert result.ok, render_all(result.diagnostics)
    assert result.space.size == imported.size == _original_size(conf)
    # no injection: one client block per JSON client, every line one of the shapes import writes
    assert len(result.space.clients) == len(conf["clientSpecs"])
    assert "library" not in {line.split()[0] for line in imported.text.splitlines() if line.strip()}
    for line in imported.text.splitlines():
        assert SPEC_LINE.fullmatch(line), line


@pytest.mark.parametrize("field,value", [
    ("targetUrl", "http://server:9211/bytes/10\n}\nlibrary evil {\n  platform = \"x\"\n}\nspace x {"),
    ("targetUrl", "http://server:9211/bytes/10\r"),
    ("targetUrl", "http://server:9211/bytes/10 x"),
    ("url", "http://polly/retry\nclient polly.retry { retryCount = 1 }"),
    ("url", "http://polly/retry\u2028client x"),
])
def test_the_issues_injections_are_escaped_or_refused(field, value):
    conf = copy.deepcopy(FIXTURES["every library, scalars"])
    if field == "url":
        conf["clientSpecs"][0]["url"] = value
    else:
        conf[field] = value
    try:
        imported = import_resiliencebench(json.dumps(conf), "hostile.json")
    except ImportFailed as failure:
        assert failure.diagnostic.primary.span.line == 1 and field in failure.diagnostic.message
        return
    result = compile_source(imported.text, "hostile.rbl")
    assert result.ok and len(result.space.clients) == len(conf["clientSpecs"])
    assert not re.search(r"^\s*library\b", imported.text, re.M)
    assert "\r" not in imported.text and "\u2028" not in imported.text
    assert all(SPEC_LINE.fullmatch(line) for line in imported.text.splitlines())


def test_a_value_the_originals_library_refused_is_a_warning():
    config = {"maxAttempts": 3, "multiplier": [0.5, 1.5], "initialIntervalMillis": 20}
    imported = import_resiliencebench(json.dumps(_space(_client("resilience4j", "retry", config))), "m.json")
    refused = [d.message for d in imported.diagnostics if "refused a multiplier below 1" in d.message]
    assert refused and refused[0].startswith("`clientSpecs[0].patternConfig.multiplier[0]` = 0.5:")
