"""`rbl run --dry-run`: everything a run does before its first round, and nothing after. The
requirements are checked and clients built, the services start and are checked (the target
answers through the proxy with this run's token, each client reports its library version), one
request time is measured and the plan's duration estimated from it; then everything stops. No
run directory is written (logs go to a temporary directory, removed at the end)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Iterable

from rich.console import Console

from ..errors import EXIT_OK, EnvironmentMissing
from .backend import Backend
from .liveness import probe_target

PROBES = 40


def dry_run(header: dict, lines: Iterable[str], backend: Backend, console: Console) -> int:
    from ..estimate import estimate, sample_lines, target_restarts
    from .run import proxy_name

    prepared = backend.check(header, console)
    libraries = {c["library"]: c["service"] for c in header["clients"]}
    with tempfile.TemporaryDirectory(prefix="rbl-dry-run-") as work:
        logs = Path(work) / "logs"
        logs.mkdir()
        console.print("dry run: starting the services ...", highlight=False)
        with backend.start(header, Path(work), logs, prepared) as services:
            probe = services.target_probe()
            problem = probe_target(*probe) if probe else None
            if problem:
                raise EnvironmentMissing(f"the target does not answer through the proxy: {problem}")
            request_ms = _request_ms(services.target_url(header["target"]["path"]))
            versions = services.client_versions()
            lost = services.lost_services()
            if lost:
                raise EnvironmentMissing(lost[0][1])
            proxy = proxy_name(services.proxy_kind, services.proxy_version)
            console.print(f"  target and fault proxy ({proxy}): answering; one request {request_ms:.1f} ms "
                          f"(median of {PROBES})", highlight=False, markup=False)
            for library, version in versions.items():
                console.print(f"  {library} client service ({libraries[library]}): healthy, "
                              f"{library} {version or 'version not reported'}", highlight=False, markup=False)
    rounds = header["rounds"] + header.get("warmup", 0)
    expected = estimate(sample_lines(lines, header["size"]), header["size"], rounds, request_ms,
                        target_restarts(header))
    console.print(f"estimated duration of the run: {expected.text()}", highlight=False, markup=False)
    console.print("dry run: the services started, answered and stopped; no scenario was run and no run "
                  "directory was written", highlight=False, markup=False)
    return EXIT_OK


def _request_ms(url: str) -> float:
    """The median time of one request over a kept-alive connection, as the clients send them."""
    import http.client
    from urllib.parse import urlsplit
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    times = []
    try:
        for _ in range(PROBES):
            started = time.perf_counter()
            connection.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""))
            connection.getresponse().read()
            times.append((time.perf_counter() - started) * 1000.0)
    finally:
        connection.close()
    return median(times)
