"""Fault control through the Envoy admin API subset (rbl/dataplane/fault_proxy.py), for rbl's proxy and real Envoy alike.

A change is applied with POST /runtime_modify and then read back from GET /runtime, so the runner
knows the fault is in force before the virtual users start (the original tool slept 500 ms and
never checked).
"""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlencode

from ..errors import RblError, EXIT_INTERNAL
from .liveness import ServicesLost

STAT_PREFIX = "http.ingress_http."
ABORT_PERCENT = "fault.http.abort.abort_percent"
ABORT_STATUS = "fault.http.abort.http_status"
DELAY_PERCENT = "fault.http.delay.fixed_delay_percent"
DELAY_DURATION = "fault.http.delay.fixed_duration_ms"


# Where the fault is injected elsewhere than the proxy (a topology's service: fault.at), the backend's
# fault control adds these to the proxy's counters: the requests that service received and the faults
# it injected over the round, so the realised rate is measured where the fault is.
FAULT_POINT_REQUESTS = "fault_point.requests"
FAULT_POINT_INJECTED = "fault_point.injected"


def fault_counts(fault: dict, counters: dict[str, int]) -> tuple[int, int]:
    """(requests that met the fault's injection point, faults of the scenario's kind injected there)
    over the round: the proxy's, unless the fault was injected at a service of a topology."""
    if FAULT_POINT_REQUESTS in counters:
        return counters[FAULT_POINT_REQUESTS], counters.get(FAULT_POINT_INJECTED, 0)
    injected = counters.get("fault.aborts_injected" if fault["kind"] == "abort" else "fault.delays_injected", 0)
    return counters.get("downstream_rq_total", 0), injected


class FaultControlError(RblError):
    exit_code = EXIT_INTERNAL


def _number(value: float) -> str:
    """Whole percents as integers: Envoy reads an integer runtime percent over 100."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def runtime_values(fault: dict) -> dict[str, str]:
    """The four runtime keys for one scenario's fault; the other kind is held at 0%."""
    rate = fault["rate"]
    if fault["kind"] == "abort":
        return {ABORT_PERCENT: _number(rate), ABORT_STATUS: str(fault["status"]),
                DELAY_PERCENT: "0", DELAY_DURATION: "0"}
    return {ABORT_PERCENT: "0", ABORT_STATUS: "503",
            DELAY_PERCENT: _number(rate), DELAY_DURATION: str(fault["duration_ms"])}


class FaultControl:
    """Talks to the proxy's admin port over one keep-alive-free connection per call."""

    def __init__(self, host: str, admin_port: int, timeout: float = 5.0):
        self.host = host
        self.port = admin_port
        self.timeout = timeout
        self.applied: dict[str, str] | None = None

    def _request(self, method: str, path: str) -> bytes:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            connection.request(method, path)
            response = connection.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException) as error:
            # the proxy died or hangs: the environment is gone, not a bug in rbl
            raise ServicesLost(f"the fault proxy's admin port {self.host}:{self.port} did not answer "
                               f"{method} {path}: {error}") from error
        finally:
            connection.close()
        if response.status != 200:
            raise FaultControlError(f"the fault proxy refused {method} {path}: HTTP {response.status} "
                                    f"{body.decode(errors='replace').strip()}")
        return body

    def apply(self, fault: dict) -> None:
        """Set the scenario's fault and confirm it by reading the runtime back."""
        wanted = runtime_values(fault)
        if wanted == self.applied:
            return
        self._request("POST", "/runtime_modify?" + urlencode(wanted))
        entries = _json(self._request("GET", "/runtime?format=json"), "entries")
        for key, value in wanted.items():
            entry = entries.get(key) if isinstance(entries, dict) else None
            actual = entry.get("final_value") if isinstance(entry, dict) else None
            if not _same_number(actual, value):
                raise FaultControlError(f"the fault proxy did not take {key}={value} (reads back {actual!r})")
        self.applied = wanted

    def clear(self) -> None:
        """No fault at all (confirmed), e.g. while the runner checks the target through the proxy."""
        self.apply({"kind": "abort", "rate": 0, "status": 503})

    def reset_counters(self) -> None:
        self._request("POST", "/reset_counters")

    def counters(self) -> dict[str, int]:
        """The fault filter's and connection manager's counters, without the stat prefix."""
        stats = _json(self._request("GET", "/stats?format=json"), "stats")
        return {s["name"][len(STAT_PREFIX):]: s["value"] for s in stats
                if isinstance(s, dict) and str(s.get("name", "")).startswith(STAT_PREFIX)
                and isinstance(s.get("value"), int)}


def _same_number(actual, wanted: str) -> bool:
    try:
        return actual is not None and float(actual) == float(wanted)
    except (TypeError, ValueError):
        return False


def _json(body: bytes, key: str):
    """The `key` member of an admin answer; anything else means the admin port is not our proxy's."""
    try:
        value = json.loads(body)[key]
    except (ValueError, KeyError, TypeError) as error:
        raise ServicesLost(f"the fault proxy's admin port answered something that is not its admin API "
                           f"(no `{key}` in {body[:100]!r})") from error
    return value
