"""Checks during a run that the services the runner started are still the ones answering."""

from __future__ import annotations

import http.client
from urllib.parse import urlsplit

from ..dataplane.target_token import TOKEN_HEADER
from ..errors import EXIT_ENVIRONMENT, RblError
PROBE_PATH = "/status/200"
PROBE_TIMEOUT = 10.0


class ServicesLost(RblError):
    """The target or the proxy died, or something else answers in its place: the run stops,
    since no later round could measure what the plan asks for."""

    exit_code = EXIT_ENVIRONMENT


def process_problem(process) -> str | None:
    """Why a child process no longer counts as the runner's service, or None.

    poll() reaps a dead child, so while it returns None the PID cannot have been reused by
    another process: alive and ours are one check.
    """
    code = process.poll()
    if code is None:
        return None
    return f"exited (killed by signal {-code})" if code < 0 else f"exited with code {code}"


# The proxy's own 503 (its upstream overflowed or failed), or no answer in time: what a target still
# working off an overloaded round's queue gives; an impostor answers otherwise, a gone target refuses
# the connection (rbl/runner/round.py waits this one out)
BUSY = "the fault proxy's upstream did not answer in time:"


def probe_target(base_url: str, token: str, timeout: float = PROBE_TIMEOUT) -> str | None:
    """Why a request through the proxy did not reach the run's own target, or None.

    The target adds the run's random token to every response (target_app.py): an impostor on the
    target's port, or a proxy forwarding elsewhere, cannot answer with it.
    """
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        connection.request("GET", PROBE_PATH)
        response = connection.getresponse()
        response.read()
    except TimeoutError:
        # connected to (or queued at) something that does not answer yet: a target whose workers are
        # all still busy with an overloaded round's backlog looks so; a gone one refuses the connection
        return f"{BUSY} GET {PROBE_PATH} got no answer within {timeout:g} s"
    except (OSError, http.client.HTTPException) as error:
        return f"a request through the fault proxy to the target failed: {error}"
    finally:
        connection.close()
    answered = response.getheader(TOKEN_HEADER)
    if answered is None and response.status == 503:
        return f"{BUSY} GET {PROBE_PATH} answered HTTP 503 without the run's token"
    if answered != token:
        what = "without the run's token" if answered is None else "with another run's token"
        return (f"the fault proxy's upstream is not this run's target: GET {PROBE_PATH} answered "
                f"HTTP {response.status} {what}")
    return None
