"""`rbl calibrate`: the capacity of a spec's target on this machine (as processes, or in containers),
for open-loop load given as a share of it."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import RblError, UsageError
from .options import SpecArg, choices
from .spec_input import compile_spec


def calibrate(spec: Path = SpecArg,
              force: bool = typer.Option(False, "--force", help="Measure again even when a capacity is stored."),
              show: bool = typer.Option(False, "--show", help="Print the stored capacity's steps, how and under how "
                                                               "much other work it was measured; measure nothing."),
              proxy: str = typer.Option("auto", "--proxy", autocompletion=choices("auto", "envoy", "builtin"),
                                        help="The fault proxy the runs will use: auto, envoy "
                                                                 "or builtin (capacity is stored per proxy)."),
              workers: Optional[int] = typer.Option(None, "--workers", min=1,
                                                    help="gunicorn workers per target replica without a CPU "
                                                         "budget [default: one per core]."),
              backend_name: str = typer.Option("local", "--backend", autocompletion=choices("local", "docker"),
                                               help="Where the runs will run: local (processes) or docker "
                                                    "(containers); capacity is stored per backend."),
              network: str = typer.Option("bridge", "--network", autocompletion=choices("bridge", "host"),
                                          help="docker backend: bridge (a network of its own) or host."),
              image: list[str] = typer.Option([], "--image", "--base-image", metavar="NAME=REF",
                                              help="docker backend: a base or prebuilt image, as for `rbl run`.")):
    """Measure the spec's target's capacity on this machine: the highest rate of successful
    requests whose p95 response time stays under the spec's `load.slo` (default 100 ms), through
    the fault proxy at 0% faults. Stored per machine, target and backend; open-loop specs that give
    `load.rate` as a share of capacity use it. A run on a cluster (--backend kubernetes) measures
    it in each shard's pod instead."""
    import tempfile
    from rich.console import Console
    from ..backends.local.backend import LocalBackend, LocalOptions
    from ..backends.local.proxy import ProxyChoice
    from ..compiler.plan import plan_header
    from ..compiler.expand import iter_scenarios
    from ..runner.interrupts import sigterm_as_interrupt
    from ..runner.capacity import (MIN_RPS, busy_note, calibrate as measure, calibration_header, slo_of,
                                   stale_note, store_capacity, stored_capacity, target_key)
    console = Console(stderr=True)
    space = compile_spec(spec).space
    header = plan_header(space)
    slo_ms = slo_of(iter_scenarios(space)) if space.workload is not None else 100.0
    if backend_name == "docker":
        if proxy != "auto" or workers is not None:
            raise UsageError("--proxy and --workers apply to the local backend",
                             hint="in containers, the target's image decides the proxy: --image envoy=none gives "
                                  "rbl's own")
        from ..backends.docker.driver import DockerBackend, DockerOptions
        backend = DockerBackend(DockerOptions(network=network, images=image))
        proxy_kind = backend.proxy_kind(header)
    elif backend_name == "local":
        if image or network != "bridge":
            raise UsageError("--image and --network apply to --backend docker")
        options = LocalOptions(proxy=proxy) if workers is None else LocalOptions(proxy=proxy, workers=workers)
        backend = LocalBackend(options)
        proxy_kind = backend.proxy.kind
    else:
        raise UsageError(f"--backend must be local or docker, got {backend_name!r}",
                         hint="on a cluster (`rbl run --backend kubernetes`), each shard's pod measures its own "
                              "target's capacity at the start of its run")
    key = target_key(header["target"], proxy_kind, slo_ms, header.get("topology"), backend.name)
    say = lambda text: console.print(text, highlight=False, markup=False)   # noqa: E731  (nothing stored is markup)
    stored = stored_capacity(key, say)
    if show:
        if force:
            raise UsageError("--show prints the stored capacity and --force measures it again: give one")
        if stored is None:
            raise RblError("no capacity of this target is stored for this machine",
                           hint=f"`rbl calibrate {spec}` measures it")
        from ..runner.capacity_view import describe_record
        for line in describe_record(stored):
            typer.echo(line)
        return
    if stored is not None and not force:
        typer.echo(f"{stored['capacity_rps']:g}")
        say(f"stored capacity (calibrated {stored['measured_at']}); --force measures it again, --show shows how")
        for note in (busy_note(stored), stale_note(stored)):
            if note:
                say(note)
        return
    target_only = calibration_header(header)
    prepared = backend.check(target_only, console)          # the load generator, built on first use
    # SIGTERM as Ctrl-C: the services stop and the temporary directory goes, as on any other end
    with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="rbl-calibrate-") as work:
        (Path(work) / "logs").mkdir()
        with backend.start(target_only, Path(work), Path(work) / "logs", prepared) as services:
            running = ProxyChoice(services.proxy_kind, services.proxy_version)     # as it runs, on either backend
            say(f"target: {services.target_description}; fault proxy: {running.describe()}")
            say(f"calibrating {header['target']['path']}: p95 under {slo_ms:g} ms")
            record = measure(prepared.loadgen, services.target_url(header["target"]["path"]), slo_ms,
                             Path(work) / "steps", say=say, samples_other_work=backend.samples_other_work)
    if record["capacity_rps"] <= 0:
        raise RblError(f"the target did not serve even {MIN_RPS} req/s with p95 under {slo_ms:g} ms",
                       hint="give it more CPU (target.cpus) or less work per request")
    path = store_capacity(key, record, say)
    typer.echo(f"{record['capacity_rps']:g}")
    say(f"capacity: {record['capacity_rps']:g} req/s (stored in {path}; --show shows its steps)")
    if busy_note(record):
        say(busy_note(record))
