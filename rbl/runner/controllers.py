"""Controllers: policies retuned while the load runs (the catalogue's istio.adaptive_breaker and
istio.aimd_retry; docs/library-semantics.md, section istio). On a round whose client has one or
two (composed, sharing one `interval`), the round frame ticks ControllerObserver every `interval`: it
measures the window since the last decision (the requests answered meanwhile, the sidecar's requests
in flight), asks each controller for its parameter's next value, puts what changed in force through
the sidecar's watched files in one retune (the frame's), and records each decision (store/controllers.py).

The algorithms are the papers', step for step:
- AdaptiveBreaker: "HAOC", Algorithm 1 of the adaptive overload control paper (HAOC '21).
- AimdRetry: Algorithm 2 of the adaptive retry paper (IC2E '23).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..libraries.composition import pattern_names
from ..libraries.self_limiting import SELF_LIMITING, self_limiting_pattern
from ..libraries.istio import (BUILT_IN_CONTROLLERS, CONTROLLED, CONTROLLED_BOUNDS, CONTROLLER_GROUP,
                               aimd_per_try_timeout_ms)
from ..store.controllers import append_decision
from .backend import RoundFailed
from .round import RoundMoment

MAX_LIMIT = 2147483647       # the catalogue's bound on http2MaxRequests
FAILED = ("failed", "timed_out", "rejected")


@dataclass(frozen=True)
class Window:
    """What a controller sees: the requests answered since its last decision, and the queue now."""

    answered: int
    successes: int
    failed: int                  # failed, timed out or rejected
    circuit_broken: int
    rt95_ms: float | None        # p95 of the successes' response times (linear between closest ranks)
    queue: int | None            # the sidecar's requests in flight

    def record(self) -> dict:
        return {"answered": self.answered, "successes": self.successes, "failed": self.failed,
                "circuitBroken": self.circuit_broken, "rt95Ms": self.rt95_ms, "queue": self.queue}


def window_of(rows: pa.Table, queue: int | None) -> Window:
    classes = rows.column("cls")
    successes = rows.filter(pc.equal(classes, "success"))
    times = pc.drop_null(successes.column("response_ms")).to_numpy(zero_copy_only=False).astype(float)
    rt95 = round(float(np.quantile(times, 0.95, method="linear")), 3) if times.size else None
    count = lambda names: int(pc.sum(pc.is_in(classes, pa.array(names))).as_py() or 0)  # noqa: E731
    return Window(rows.num_rows, successes.num_rows, count(FAILED), count(("circuit_broken",)), rt95, queue)


class AdaptiveBreaker:
    """HAOC's Algorithm 1: alpha = RT95 / queue, smoothAlpha = p * smoothAlpha + (1 - p) * alpha,
    limit = TRT / smoothAlpha; both alphas start at TRT / the starting limit."""

    name = "haoc"
    parameter = "http2MaxRequests"

    def __init__(self, params: dict):
        self.trt_ms = float(params["trt"])
        self.p = float(params["p"])
        self.value = int(params["http2MaxRequests"])
        self.alpha = self.smooth_alpha = self.trt_ms / self.value

    def decide(self, window: Window) -> int:
        # without a success there is no RT95, without requests in flight no ratio: keep the alphas
        if window.rt95_ms is not None and window.queue:
            self.alpha = window.rt95_ms / window.queue
            self.smooth_alpha = self.p * self.smooth_alpha + (1 - self.p) * self.alpha
            self.value = max(1, min(MAX_LIMIT, int(self.trt_ms / self.smooth_alpha)))
        return self.value

    def state(self) -> dict:
        return {"alpha": round(self.alpha, 6), "smoothAlpha": round(self.smooth_alpha, 6)}


class AimdRetry:
    """The adaptive retry's Algorithm 2: halve the attempts after a window whose carried RT95
    exceeded the target or that had a failed or circuit-broken request, else add one; never above
    the target in ms. Its per-try timeout follows (max(1, target / attempts) ms)."""

    name = "aimd"
    parameter = "attempts"

    def __init__(self, params: dict):
        self.target_ms = float(params["target"])
        self.value = int(params["attempts"])

    def decide(self, window: Window) -> int:
        if window.answered == 0:
            return self.value                       # nothing was answered: nothing to judge
        late = window.rt95_ms is not None and window.rt95_ms > self.target_ms
        if late or window.failed or window.circuit_broken:
            self.value = self.value // 2
        else:
            self.value = min(self.value + 1, int(self.target_ms))
        return self.value

    def state(self) -> dict:
        return {"perTryTimeoutMs": aimd_per_try_timeout_ms(self.target_ms, self.value)}


BUILT_IN = {"haoc": AdaptiveBreaker, "aimd": AimdRetry}


class ControllerFailed(RoundFailed):
    """A controller of one's own could not be loaded, or failed to decide."""


def installed_controllers() -> dict[str, object]:
    """The controllers of one's own: name -> entry point, of the group rbl.controllers."""
    return {point.name: point for point in entry_points(group=CONTROLLER_GROUP)}


def controllers_of(pattern: str, config: dict) -> list[tuple[str, str, object]]:
    """(controller pattern, its config key prefix, a fresh controller) of each controller of a
    configuration, in the pattern's order (a client may compose several: the adaptive retry paper
    runs its retry controller beside the adaptive breaker)."""
    names = pattern_names(pattern)
    return [_controller(name, "" if len(names) == 1 else f"{name}.", config) for name in names if name in CONTROLLED]


def _controller(name: str, prefix: str, config: dict) -> tuple[str, str, object]:
    """The built-in algorithm, or the one its `controller` names among those installed
    (docs/controllers.md), made from the pattern's parameters."""
    params = {key[len(prefix):]: value for key, value in config.items() if key.startswith(prefix)}
    algorithm = params.get("controller", BUILT_IN_CONTROLLERS[name])
    if algorithm == BUILT_IN_CONTROLLERS[name]:
        return name, prefix, BUILT_IN[algorithm](params)
    point = installed_controllers().get(algorithm)
    if point is None:
        raise ControllerFailed(f"no controller named {algorithm!r} is installed (entry points of {CONTROLLER_GROUP})")
    try:
        return name, prefix, OwnController(algorithm, point.load()(dict(params)), name)
    except Exception as error:                       # a controller of one's own: whatever it raises
        raise ControllerFailed(f"controller {algorithm!r} could not be made: {type(error).__name__}: {error}") \
            from error


class OwnController:
    """A controller of one's own, held to the interface (docs/controllers.md): its `decide(window)`
    must return a whole number, kept within the controlled parameter's bounds; what it raises fails
    the round with its message."""

    def __init__(self, name: str, inner, pattern: str):
        self.name, self.inner = name, inner
        self.parameter = CONTROLLED[pattern]
        self.low, self.high = CONTROLLED_BOUNDS[pattern]
        self.value = self._bounded(getattr(inner, "value", None))

    def _bounded(self, value) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ControllerFailed(f"controller {self.name!r} gave {value!r}, not a number of {self.parameter}")
        return max(self.low, min(self.high, int(value)))

    def decide(self, window: Window) -> int:
        try:
            value = self.inner.decide(window)
        except Exception as error:
            raise ControllerFailed(f"controller {self.name!r} failed: {type(error).__name__}: {error}") from error
        self.value = self._bounded(value)
        return self.value

    def state(self) -> dict:
        state = getattr(self.inner, "state", None)
        try:
            found = state() if callable(state) else {}
            json.dumps(found, allow_nan=False)
            return found if isinstance(found, dict) else {"state": str(found)}
        except Exception:                           # its record must stay valid JSON, whatever it keeps
            return {}


@dataclass
class _Round:
    controllers: list[tuple[str, str, object]]     # controllers_of's, deciding together
    config: dict                 # the configuration in force: each controlled parameter at its value now
    seen: int = 0                # rows of the round's requests read at earlier decisions


class ControllerObserver:
    """Runs the controllers of a round whose client has any: the frame ticks it every `interval` of
    that round (round_starts sets it; composed controllers share one, `rbl check` sees to it), and
    not at all in a round without one. Each tick every controller decides on the same window, and
    what changed is put in force in one retune."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.current: _Round | None = None
        self.interval_s: float | None = None

    def round_starts(self, setup) -> None:
        """A new round: new controllers from the configuration's own start, or none."""
        scenario = setup.scenario
        found = controllers_of(scenario["pattern"], scenario["config"])
        if not found:
            self.current, self.interval_s = None, None
            return
        self.current = _Round(found, dict(scenario["config"]))
        self.interval_s = float(scenario["config"][f"{found[0][1]}interval"]) / 1000

    def tick(self, moment: RoundMoment) -> None:
        state = self.current
        if state is None or moment.retune is None:
            return
        table = moment.requests()
        if table is None:
            return
        rows = table.slice(state.seen)
        state.seen = table.num_rows
        window = window_of(rows, moment.queue())
        decided = []
        for name, prefix, controller in state.controllers:
            before = controller.value
            after = controller.decide(window)
            state.config[f"{prefix}{controller.parameter}"] = after
            decided.append((name, controller, before, after))
        scenario = moment.setup.scenario
        applied_ms = None
        if any(after != before for _, _, before, after in decided):
            applied_ms = round(moment.retune(scenario["pattern"], dict(state.config)) * 1000, 3)
        for name, controller, before, after in decided:
            append_decision(self.run_dir, {
                "scenarioId": scenario["id"], "round": moment.setup.round_number, "client": scenario["client"],
                "controller": name, "algorithm": controller.name, "elapsedS": round(moment.elapsed_s, 3),
                "at": time.time(), "parameter": controller.parameter, "previous": before, "value": after,
                "appliedMs": applied_ms if after != before else None, "window": window.record(),
                "state": controller.state()})


class SelfSetLimitObserver:
    """A pattern whose limit moves by itself (Envoy's adaptive concurrency filter in the round's
    sidecar, an adaptive limiter in the round's library client: rbl/libraries/self_limiting.py) cannot
    be set, only read. Every load window of an open-loop round whose configuration has one, this reads
    the limit beside the window's measurements and records it as the pattern's decision in
    controllers.jsonl, so the report draws it as it draws a controller's."""

    PARAMETER = "concurrencyLimit"

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.interval_s: float | None = None
        self.pattern: str | None = None
        self.seen = 0
        self.last: int | None = None

    def round_starts(self, setup) -> None:
        scenario = setup.scenario
        self.pattern = self_limiting_pattern(scenario.get("library", ""), scenario["pattern"])
        window_s = (scenario.get("load") or {}).get("window_s")
        self.interval_s = float(window_s) if self.pattern and window_s else None
        self.seen, self.last = 0, None

    def tick(self, moment: RoundMoment) -> None:
        table = moment.requests()
        limit = moment.limit()
        if table is None or limit is None:      # nothing answered yet, or the limiter not built yet
            return
        rows = table.slice(self.seen)
        self.seen = table.num_rows
        window = window_of(rows, moment.queue())
        scenario = moment.setup.scenario
        append_decision(self.run_dir, {
            "scenarioId": scenario["id"], "round": moment.setup.round_number, "client": scenario["client"],
            "controller": self.pattern, "algorithm": SELF_LIMITING[(scenario["library"], self.pattern)],
            "elapsedS": round(moment.elapsed_s, 3), "at": time.time(), "parameter": self.PARAMETER,
            "previous": self.last if self.last is not None else limit, "value": limit, "appliedMs": None,
            "window": window.record(), "state": {}})
        self.last = limit
