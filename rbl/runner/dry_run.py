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

from ..errors import EXIT_OK, EnvironmentMissing, UsageError
from .liveness import probe_target
from .local import LocalOptions

PROBES = 40


def dry_run(header: dict, lines: Iterable[str], options: LocalOptions, console: Console) -> int:
    from ..compiler.plan import axis_largest
    from ..estimate import estimate, sample_lines
    from .run import _backend, check_environment

    if options.backend not in ("local", "docker"):
        raise UsageError(f"--dry-run starts the local or docker services; the {options.backend} backend "
                         "has its own checks", hint="run it with --backend local or docker")
    check_environment(header, options, console)
    options.max_users = axis_largest(header["users"])
    libraries = {c["library"]: c["service"] for c in header["clients"]}
    with tempfile.TemporaryDirectory(prefix="rbl-dry-run-") as work:
        logs = Path(work) / "logs"
        logs.mkdir()
        run = _Scratch(Path(work), logs)
        console.print("dry run: starting the services ...", highlight=False)
        with _backend(run, header, libraries, options) as backend:
            problem = probe_target(*backend.target_probe())
            if problem:
                raise EnvironmentMissing(f"the target does not answer through the proxy: {problem}")
            request_ms = _request_ms(backend.target_url(header["target"]["path"]))
            versions = backend.client_versions()
            lost = backend.lost_services()
            if lost:
                raise EnvironmentMissing(lost[0][1])
            console.print(f"  target and fault proxy ({backend.proxy_kind}): answering; one request "
                          f"{request_ms:.1f} ms (median of {PROBES})", highlight=False, markup=False)
            for library, version in versions.items():
                console.print(f"  {library} client service ({libraries[library]}): healthy, "
                              f"{library} {version or 'version not reported'}", highlight=False, markup=False)
    rounds = header["rounds"] + header.get("warmup", 0)
    expected = estimate(sample_lines(lines, header["size"]), header["size"], rounds, request_ms)
    console.print(f"estimated duration of the run: {expected.text()}", highlight=False, markup=False)
    console.print("dry run: the services started, answered and stopped; no scenario was run and no run "
                  "directory was written", highlight=False, markup=False)
    return EXIT_OK


class _Scratch:
    """What the backends need of a run directory: its path and its logs directory."""

    def __init__(self, path: Path, logs: Path):
        self.path = path
        self.logs = logs


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
