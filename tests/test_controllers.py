"""Controllers without a target (rbl/runner/controllers.py): the papers' algorithms step by step against
hand computations, the static policy each holds in force, where the checker lets them run, and the
observer the round frame ticks (windows, decisions, retunes, records)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from rbl.compiler.pipeline import compile_source
from rbl.libraries.istio import enforced_policies
from rbl.mesh.sidecar_config import cluster_for, route_for
from rbl.runner.controllers import AdaptiveBreaker, AimdRetry, ControllerObserver, Window, controllers_of, window_of
from rbl.runner.round import Counters, RoundMoment
from rbl.store.controllers import append_decision, read_decisions
from rbl.store.requests import REQUEST_SCHEMA


def window(rt95: float | None = 50.0, queue: int | None = 10, failed: int = 0, broken: int = 0,
           answered: int = 100) -> Window:
    return Window(answered, answered - failed - broken, failed, broken, rt95, queue)


# -- the algorithms ---------------------------------------------------------------------------------
def test_the_adaptive_breaker_follows_algorithm_1():
    breaker = AdaptiveBreaker({"http2MaxRequests": 1024, "trt": 100, "p": 0.9})
    assert breaker.alpha == breaker.smooth_alpha == 100 / 1024          # so the first limit is 1024
    # alpha = 50 / 10 = 5; smoothAlpha = 0.9 * 100/1024 + 0.1 * 5; limit = int(100 / smoothAlpha)
    smooth = 0.9 * 100 / 1024 + 0.1 * 5
    assert breaker.decide(window(50.0, 10)) == int(100 / smooth) == 170
    smooth = 0.9 * smooth + 0.1 * (20.0 / 4)
    assert breaker.decide(window(20.0, 4)) == int(100 / smooth)
    # no success (no RT95) or nothing in flight: the alphas, so the limit, stay
    kept = breaker.value
    assert breaker.decide(window(None, 10)) == kept and breaker.decide(window(30.0, 0)) == kept
    assert breaker.decide(window(30.0, None)) == kept


def test_the_adaptive_breaker_s_limit_stays_within_its_bounds():
    breaker = AdaptiveBreaker({"http2MaxRequests": 1024, "trt": 50, "p": 0.0})
    assert breaker.decide(window(100_000.0, 1)) == 1                       # never 0: a limit of 0 is no limit
    assert breaker.decide(window(0.001, 100_000)) == 2147483647


def test_the_aimd_retry_follows_algorithm_2():
    retry = AimdRetry({"attempts": 2, "target": 100})
    assert [retry.decide(window(50.0)) for _ in range(3)] == [3, 4, 5]     # additive increase
    assert retry.decide(window(150.0)) == 2                                 # RT95 over the target: halved
    assert retry.decide(window(50.0, failed=1)) == 1                        # a failure
    assert retry.decide(window(50.0, broken=1)) == 0                        # a circuit-broken request
    assert retry.decide(window(50.0, broken=1)) == 0
    assert retry.decide(window(answered=0, rt95=None)) == 0                 # nothing answered: nothing judged
    assert retry.decide(window(50.0)) == 1
    assert retry.state() == {"perTryTimeoutMs": 100}
    capped = AimdRetry({"attempts": 3, "target": 3})
    assert capped.decide(window(1.0)) == 3                                  # never above the target in ms
    assert capped.state() == {"perTryTimeoutMs": 1}


# -- what is in force -------------------------------------------------------------------------------
def test_a_controller_holds_a_static_policy_in_force():
    assert enforced_policies({"adaptive_breaker": {"http2MaxRequests": 37, "trt": 100, "p": 0.9, "interval": 5000}}) \
        == {"circuit_breaker": {"http2MaxRequests": 37}}
    assert enforced_policies({"aimd_retry": {"attempts": 3, "target": 100, "interval": 5000, "retryOn": "5xx"}}) \
        == {"retry": {"attempts": 3, "perTryTimeout": 33, "retryOn": "5xx"}}
    # attempts 0: no retries, so no per-try timeout or conditions (Istio refuses them beside 0)
    assert enforced_policies({"aimd_retry": {"attempts": 0, "target": 100, "interval": 5000, "retryOn": "5xx"}}) \
        == {"retry": {"attempts": 0}}
    composed = {"adaptive_breaker": {"http2MaxRequests": 5, "trt": 1, "p": 0.5, "interval": 1000},
                "outlier_detection": {"consecutive5xxErrors": 3}}
    assert enforced_policies(composed) == {"circuit_breaker": {"http2MaxRequests": 5},
                                           "outlier_detection": {"consecutive5xxErrors": 3}}


def test_the_sidecar_runs_the_current_value():
    cluster = cluster_for({"adaptive_breaker": {"http2MaxRequests": 12, "trt": 100, "p": 0.9, "interval": 5000}},
                          "upstream", [("127.0.0.1", 9211)])
    assert cluster["circuit_breakers"]["thresholds"][0]["max_requests"] == 12
    route = route_for({"aimd_retry": {"attempts": 4, "target": 100, "interval": 5000, "retryOn": "5xx"}}, "upstream")
    assert route["retry_policy"]["num_retries"] == 4 and route["retry_policy"]["per_try_timeout"] == "0.025s"
    assert "retry_policy" not in route_for({"aimd_retry": {"attempts": 0, "target": 100, "interval": 5000}}, "upstream")


def test_controllers_of_finds_the_controllers_of_a_composed_client():
    (name, prefix, controller), = controllers_of("outlier_detection+adaptive_breaker", {
        "outlier_detection.consecutive5xxErrors": 3, "adaptive_breaker.http2MaxRequests": 64,
        "adaptive_breaker.trt": 50, "adaptive_breaker.p": 0.5, "adaptive_breaker.interval": 2000})
    assert (name, prefix, controller.value, controller.trt_ms) == ("adaptive_breaker", "adaptive_breaker.", 64, 50.0)
    assert controllers_of("circuit_breaker", {"http2MaxRequests": 1}) == []
    both = controllers_of("aimd_retry+adaptive_breaker", {
        "aimd_retry.attempts": 3, "aimd_retry.target": 90, "adaptive_breaker.http2MaxRequests": 8,
        "adaptive_breaker.trt": 50, "adaptive_breaker.p": 0.5})
    assert [(name, prefix, c.value) for name, prefix, c in both] == [("aimd_retry", "aimd_retry.", 3),
                                                                    ("adaptive_breaker", "adaptive_breaker.", 8)]


# -- where they can run -----------------------------------------------------------------------------
OPEN = "  load = open\n  load.rps = 20\n  load.duration = 10s\n"


def errors(body: str) -> list:
    result = compile_source(f"space s {{\n{body}}}\n", "s.rbl")
    return [d for d in result.diagnostics if d.severity == "error"]


def test_controllers_compile_on_open_loop_load_with_their_parameters_as_axes():
    result = compile_source(f"space s {{\n{OPEN}  client istio.adaptive_breaker {{ trt in [50ms, 100ms, 150ms] }}\n"
                            "  client istio.aimd_retry { target = 100ms\n retryOn = \"5xx\" }\n}\n", "s.rbl")
    assert result.space is not None, [d.message for d in result.diagnostics]
    assert result.space.size == 4


@pytest.mark.parametrize("body, message", [
    ("  users = 2\n  client istio.adaptive_breaker {}\n", "`adaptive_breaker` needs open-loop load"),
    (OPEN + "  client istio.aimd_retry + retry { retry.attempts = 1 }\n", "cannot be composed with `retry`"),
    (OPEN + "  client istio.adaptive_breaker + circuit_breaker { circuit_breaker.maxRetries = 1 }\n",
     "cannot be composed with `circuit_breaker`"),
    (OPEN + "  topology {\n    entry = a\n    service a { work = none() }\n  }\n"
            "  client istio.adaptive_breaker { host = a }\n", "runs on one hop for now"),
    (OPEN + "  topology {\n    entry = a\n    service a { work = none() }\n  }\n"
            "  client istio.adaptive_concurrency {}\n", "`adaptive_concurrency` runs on one hop for now"),
    (OPEN + "  client istio.adaptive_concurrency + aimd_retry {}\n",
     "`adaptive_concurrency` cannot be composed with the controller `aimd_retry`"),
    (OPEN + "  topology {\n    entry = a\n    service a { work = none() }\n  }\n"
            "  client istio.admission_control {}\n", "`admission_control` runs on one hop for now"),
])
def test_a_controller_where_it_cannot_run_is_a_located_error(body, message):
    found = [e for e in errors(body) if e.code == "E0228"]
    assert found and message in found[0].message, [e.message for e in errors(body)]
    assert found[0].primary.span.line >= 2                  # at the client in the spec, not in the catalogue


def test_the_aimd_retry_s_conditions_are_istio_s():
    (error,) = errors(OPEN + "  client istio.aimd_retry { retryOn = \"5xx,bogus\" }\n")
    assert error.code == "E0227"


# -- the observer the round frame ticks -------------------------------------------------------------
def requests(count: int, response_ms: float, cls: str = "success") -> list[dict]:
    return [{"seq": i, "scheduled_s": i * 0.01, "lag_ms": 0.0, "response_ms": response_ms, "status": 200,
             "cls": cls, "requests": None, "flags": "", "warmup": False} for i in range(count)]


class FakeSetup:
    def __init__(self, scenario: dict, instance: str = "s/1/1"):
        self.scenario, self.instance, self.round_number = scenario, instance, 1


def test_the_observer_decides_at_each_tick_and_retunes_only_a_changed_value(tmp_path):
    scenario = {"id": "abc", "client": "haoc", "pattern": "adaptive_breaker",
                "config": {"http2MaxRequests": 1024, "trt": 100, "p": 0.9, "interval": 1500}}
    observer = ControllerObserver(tmp_path)
    answered: list[dict] = []
    retuned: list[tuple[str, dict]] = []
    queue = [10]

    def tick(elapsed: float) -> None:
        table = pa.Table.from_pylist(answered, schema=REQUEST_SCHEMA) if answered else None
        observer.tick(RoundMoment(FakeSetup(scenario), elapsed, Counters({}, {}), lambda: table,
                                  lambda: queue[0], lambda pattern, config: retuned.append((pattern, config)) or 0.001))

    observer.round_starts(FakeSetup(scenario))
    assert observer.interval_s == 1.5                      # the frame ticks it every interval of this round
    tick(1.5)                                              # nothing answered yet: nothing to decide
    assert retuned == [] and not list(read_decisions(tmp_path))
    answered += requests(40, 50.0)
    tick(3.0)                                              # the window: 40 successes, RT95 50, queue 10
    (decision,) = read_decisions(tmp_path)
    assert decision["window"] == {"answered": 40, "successes": 40, "failed": 0, "circuitBroken": 0, "rt95Ms": 50.0,
                                  "queue": 10}
    assert (decision["previous"], decision["value"]) == (1024, 170) and decision["appliedMs"] == 1.0
    assert decision["elapsedS"] == 3.0
    assert retuned == [("adaptive_breaker", {**scenario["config"], "http2MaxRequests": 170})]
    queue[0] = 0                                           # nothing in flight: the limit stays, nothing retuned
    answered += requests(10, 80.0)
    tick(4.5)
    decisions = list(read_decisions(tmp_path))
    assert len(decisions) == 2 and decisions[1]["window"]["answered"] == 10       # only the new answers
    assert decisions[1]["value"] == 170 and decisions[1]["appliedMs"] is None and len(retuned) == 1
    # a new round starts a new controller from the configuration's own start
    observer.round_starts(FakeSetup(scenario, "s/1/2"))
    (_, _, controller), = observer.current.controllers
    assert controller.value == 1024 and observer.current.seen == 0


def test_composed_controllers_decide_on_one_window_and_are_put_in_force_together(tmp_path):
    """The adaptive retry paper's setting: its retry controller beside the adaptive breaker, in one sidecar."""
    config = {"aimd_retry.attempts": 2, "aimd_retry.target": 100, "aimd_retry.interval": 2000,
              "adaptive_breaker.http2MaxRequests": 1024, "adaptive_breaker.trt": 100, "adaptive_breaker.p": 0.9,
              "adaptive_breaker.interval": 2000}
    scenario = {"id": "ab", "client": "both", "pattern": "aimd_retry+adaptive_breaker", "config": config}
    observer = ControllerObserver(tmp_path)
    answered: list[dict] = []
    retuned: list[dict] = []

    def tick(elapsed: float) -> None:
        table = pa.Table.from_pylist(answered, schema=REQUEST_SCHEMA)
        observer.tick(RoundMoment(FakeSetup(scenario), elapsed, Counters({}, {}), lambda: table, lambda: 10,
                                  lambda pattern, config: retuned.append(config) or 0.002))

    observer.round_starts(FakeSetup(scenario))
    assert observer.interval_s == 2.0
    answered += requests(40, 50.0) + requests(2, 5.0, "circuit_broken")
    tick(2.0)              # the breaker's overflows halve the retries; RT95 50 over a queue of 10 sets the limit
    decisions = {d["controller"]: d for d in read_decisions(tmp_path)}
    assert (decisions["aimd_retry"]["previous"], decisions["aimd_retry"]["value"]) == (2, 1)
    assert (decisions["adaptive_breaker"]["previous"], decisions["adaptive_breaker"]["value"]) == (1024, 170)
    assert decisions["aimd_retry"]["window"] == decisions["adaptive_breaker"]["window"]
    assert retuned == [{**config, "aimd_retry.attempts": 1, "adaptive_breaker.http2MaxRequests": 170}]
    answered += requests(40, 50.0)
    tick(4.0)              # a clean window: one retry back, and the breaker's earlier value is kept in force
    assert retuned[-1]["aimd_retry.attempts"] == 2 and retuned[-1]["adaptive_breaker.http2MaxRequests"] > 1
    assert len(retuned) == 2 and len(list(read_decisions(tmp_path))) == 4


def test_composed_controllers_must_tick_together():
    found = [e for e in errors(OPEN + "  client istio.aimd_retry + adaptive_breaker {\n"
                                      "    aimd_retry.interval = 2s\n  }\n") if e.code == "E0228"]
    assert found and "need one `interval`" in found[0].message
    assert not errors(OPEN + "  client istio.aimd_retry + adaptive_breaker {\n    aimd_retry.interval = 2s\n"
                             "    adaptive_breaker.interval = 2s\n  }\n")


def test_the_observer_is_not_ticked_in_a_round_without_a_controller(tmp_path):
    observer = ControllerObserver(tmp_path)
    observer.round_starts(FakeSetup({"id": "a", "client": "haoc", "pattern": "adaptive_breaker",
                                     "config": {"http2MaxRequests": 4, "trt": 100, "p": 0.9, "interval": 2000}}))
    assert observer.interval_s == 2.0
    observer.round_starts(FakeSetup({"id": "x", "client": "static", "pattern": "circuit_breaker",
                                     "config": {"http2MaxRequests": 1}}, "s/2/1"))
    assert observer.interval_s is None and observer.current is None      # the frame leaves it out of the round
    observer.tick(RoundMoment(FakeSetup({"id": "x"}), 30.0, Counters({}, {}), lambda: None, lambda: 1,
                              lambda pattern, config: pytest.fail("a static policy is never retuned")))
    assert not list(read_decisions(tmp_path))


def test_envoys_filter_limit_is_read_every_load_window_and_recorded_as_its_decision(tmp_path):
    from rbl.runner.controllers import SelfSetLimitObserver
    from rbl.runner.executor import has_self_set_limits
    scenario = {"id": "env", "client": "envoy", "library": "istio", "pattern": "adaptive_concurrency", "config": {},
                "load": {"kind": "open", "window_s": 2}}
    observer = SelfSetLimitObserver(tmp_path)
    answered: list[dict] = []
    limits = iter([None, 3, 40])

    def tick(elapsed: float) -> None:
        table = pa.Table.from_pylist(answered, schema=REQUEST_SCHEMA) if answered else None
        observer.tick(RoundMoment(FakeSetup(scenario), elapsed, Counters({}, {}), lambda: table, lambda: 7,
                                  None, lambda: next(limits)))

    observer.round_starts(FakeSetup(scenario))
    assert observer.interval_s == 2.0                       # every load window
    answered += requests(20, 30.0)
    tick(2.0)                                               # the filter has not run yet: nothing recorded
    tick(4.0)
    answered += requests(5, 90.0, "circuit_broken")
    tick(6.0)
    first, second = read_decisions(tmp_path)
    assert (first["previous"], first["value"], second["previous"], second["value"]) == (3, 3, 3, 40)
    assert first["window"]["answered"] == 20 and second["window"]["circuitBroken"] == 5   # only the new answers
    assert first["algorithm"] == "envoy-gradient" and first["appliedMs"] is None and first["window"]["queue"] == 7
    observer.round_starts(FakeSetup({**scenario, "pattern": "circuit_breaker"}, "s/2/1"))
    assert observer.interval_s is None                      # a round without the filter: not ticked
    header = {"load": {"kind": "open"}, "clients": [{"library": "istio", "pattern": "retry+adaptive_concurrency"}]}
    assert has_self_set_limits(header) and not has_self_set_limits({**header, "load": {"kind": "users"}})
    # a library's adaptive limiter is read the same way, named by its algorithm; a fixed bulkhead is not
    limiter = {**scenario, "library": "concurrency_limits", "pattern": "gradient2"}
    observer.round_starts(FakeSetup(limiter, "s/3/1"))
    assert observer.interval_s == 2.0 and observer.pattern == "gradient2"
    observer.round_starts(FakeSetup({**scenario, "library": "failsafe", "pattern": "bulkhead"}, "s/4/1"))
    assert observer.interval_s is None
    assert not has_self_set_limits({**header, "clients": [{"library": "failsafe", "pattern": "bulkhead"}]})
    assert has_self_set_limits({**header, "clients": [{"library": "failsafe", "pattern": "adaptive_limiter"}]})


def test_a_window_counts_the_classes_and_the_p95_of_successes():
    rows = pa.Table.from_pylist(requests(19, 10.0) + requests(1, 30.0) + requests(2, 1.0, "failed")
                                + requests(1, 100.0, "timed_out") + requests(3, 0.5, "circuit_broken"),
                                schema=REQUEST_SCHEMA)
    found = window_of(rows, 7)
    assert (found.answered, found.successes, found.failed, found.circuit_broken, found.queue) == (26, 20, 3, 3, 7)
    assert found.rt95_ms == pytest.approx(11.0)           # 19 of 10 and one 30: rank 18.05 -> 10 + 0.05 * 20
    assert json.dumps(found.record())


def test_the_istio_target_writes_a_controller_s_starting_point_which_istio_accepts(tmp_path):
    from .artifact_check import check_istio
    from .conftest import REPO, run_rbl
    done = run_rbl("compile", str(REPO / "examples" / "adaptive.rbl"), "--target", "istio", "-o", str(tmp_path / "out"),
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    files = sorted((tmp_path / "out" / "istio").glob("*/*.yaml"))
    assert len(files) == 4
    checked = check_istio(*files)
    assert checked.returncode == 0, checked.stdout
    haoc = [f for f in files if "haoc" in str(f)]
    assert haoc and all("http2MaxRequests: 1024" in f.read_text() for f in haoc)
    assert all("adaptive_breaker is a controller" in f.read_text() for f in haoc)


@pytest.mark.parametrize("given, kept", [(5, 5), (7.9, 7), (0, 1), (-3, 1), (2**40, 2147483647)])
def test_a_controller_of_one_s_own_is_kept_within_the_parameter_s_bounds(given, kept):
    from rbl.runner.controllers import OwnController

    class Fixed:
        value = 10

        def decide(self, window):
            return given
    own = OwnController("fixed", Fixed(), "adaptive_breaker")
    assert own.decide(window()) == kept


@pytest.mark.parametrize("given", [float("inf"), float("nan"), "12", None, True])
def test_a_controller_of_one_s_own_that_gives_no_number_fails_its_round(given):
    from rbl.runner.backend import RoundFailed
    from rbl.runner.controllers import OwnController

    class Odd:
        value = 10

        def decide(self, window):
            return given
    own = OwnController("odd", Odd(), "aimd_retry")
    with pytest.raises(RoundFailed, match="controller 'odd' gave"):
        own.decide(window())


def test_the_report_draws_each_of_composed_controllers_in_panels_of_its_own(tmp_path):
    from rbl.compiler.plan import plan_header
    from rbl.report.cells import Cell
    from rbl.report.controllers_section import controllers_section
    result = compile_source("space s {\n" + OPEN + "  client istio.aimd_retry + adaptive_breaker as both {\n"
                            "    aimd_retry.interval = 2s\n    adaptive_breaker.interval = 2s\n  }\n}\n", "s.rbl")
    assert result.space is not None, [d.message for d in result.diagnostics]
    header = plan_header(result.space)
    config = {"aimd_retry.attempts": 2, "aimd_retry.target": 100, "aimd_retry.interval": 2000,
              "adaptive_breaker.http2MaxRequests": 1024, "adaptive_breaker.trt": 100, "adaptive_breaker.p": 0.9,
              "adaptive_breaker.interval": 2000}
    scenario = {"id": "ab", "client": "both", "library": "istio", "pattern": "aimd_retry+adaptive_breaker",
                "config": config}
    window = {"answered": 10, "successes": 10, "failed": 0, "circuitBroken": 0, "rt95Ms": 40.0, "queue": 3}
    for second, (attempts, limit) in enumerate([(1, 300), (2, 120), (3, 90)], start=1):
        for controller, parameter, before, after in (("aimd_retry", "attempts", attempts + 1, attempts),
                                                      ("adaptive_breaker", "http2MaxRequests", 1024, limit)):
            append_decision(tmp_path, {"scenarioId": "ab", "round": 1, "client": "both", "controller": controller,
                                       "algorithm": "x", "elapsedS": 2.0 * second, "at": 0, "parameter": parameter,
                                       "previous": before, "value": after, "appliedMs": 1.0, "window": window,
                                       "state": {}})
    (tmp_path / "report").mkdir()
    figures, files = controllers_section(tmp_path, header, [Cell(scenario, rounds={1: []})], tmp_path / "report")
    assert figures and (tmp_path / "report" / "controllers.csv") in files
    svg = next(path for path in files if path.suffix == ".svg").read_text()
    # a panel per controller, each with only its own parameter's values
    assert "(aimd_retry)" in svg and "(adaptive_breaker)" in svg
    assert ">attempts<" in svg and ">http2MaxRequests<" in svg
