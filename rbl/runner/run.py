"""`rbl run`: from a plan to a finished run directory, on the backend the CLI chose.

Order matters for the user: requirements are checked before anything is created or started;
services always stop (success, failure, Ctrl-C, SIGTERM); the CSV and manifest are written even
when some rounds failed, and the exit code says whether any did (3). The run directory is locked
for the whole run; a full disk stops the run with exit 5 and a manifest that says so.
"""

from __future__ import annotations

import os
import platform
import re
import sys
from contextlib import nullcontext
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Iterable

from rich.console import Console

from .. import __version__
from ..errors import EXIT_OK, EXIT_RUN_FAILED, RblError, StorageError, UsageError
from ..plan_records import is_open_loop
from ..report.keyed_table import output_width
from ..report.labels import Labeller
from ..report.other_work import shared_machine_note
from ..store import shards
from ..store.durable import is_storage_error, storage_error
from ..store.plan_file import check_header
from ..store.run_layout import CALIBRATION
from ..store.results import RunDirectory
from ..store.run_order import (RunOrder, check_order_fits, choose_order, ordered_runs, recorded_order,
                               rounds_per_scenario)
from ..store.shards import Shard
from .backend import Backend, Prepared
from .executor import DEFAULT_ROUND_TIMEOUT, ExecutionSettings, Executor, RunOutcome
from .interrupts import sigterm_as_interrupt
from .other_work import OtherWork
from .progress import RunProgress
from .summary import print_failures, print_summary
from .violations import print_violations, violation_counts


def default_run_dir(name) -> Path:
    """runs/NAME-TIME, with the plan's name made one safe path component: a plan file is input,
    and `"name": "/tmp/x/ABS"` or `"../.."` must not put the run directory anywhere else."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name if isinstance(name, str) else "")
    safe = safe.strip(".-")[:64].strip(".-") or "run"
    return Path("runs") / f"{safe}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


@dataclass(frozen=True)
class RunSettings:
    """What `rbl run` asks of the runner beyond the plan and the backend, decided once by the command."""

    round_timeout: float = DEFAULT_ROUND_TIMEOUT
    order: str | None = None              # --order: sequential, randomized or blocked (else the plan's)
    order_seed: int | None = None
    allow_violations: bool = False        # exit 0 even when a client broke an oracle
    shard: Shard | None = None            # --shard I/N: this run's part of the plan (a new run only)
    observers: tuple = ()                 # ticked during every round (round.py's Observer)
    until_resolved: int | None = None     # --until-resolved: the most rounds per scenario (until_resolved.py)


def start_run(header: dict, scenario_lines: Iterable[str], out: Path, backend: Backend, console: Console,
              settings: RunSettings = RunSettings()) -> int:
    run_order = choose_order(header, settings.order, settings.order_seed)   # a bad --order before anything exists
    check_order_fits(run_order, header)
    shard = settings.shard
    if shard is not None:
        shards.check_fits(shard, header)
    prepared = backend.check(header, console)       # everything the plan needs, before anything is created
    libraries = [c["library"] for c in header["clients"]]
    run = RunDirectory.create(out, header, scenario_lines, _new_manifest(header, list(dict.fromkeys(libraries))))
    try:
        console.print(f"run directory: {out}", highlight=False)
        if shards.apply(run, header, shard, rounds_per_scenario(header)):
            console.print(f"shard {shard}: {run.read_manifest()['shard']['scenarios']} of {header['size']} scenarios",
                          highlight=False)
        return _execute(run, header, backend, prepared, console, settings, run_order)
    finally:
        run.close()


def resume_run(out: Path, backend: Backend, console: Console, settings: RunSettings = RunSettings(),
               spec_sha256: str | None = None) -> int:
    run = RunDirectory.resume(out)
    try:
        header = run.plan_header()
        check_header(header, run.path / "plan.json")     # a run directory's plan is input too
        if spec_sha256 and header["source"]["sha256"] != spec_sha256:
            raise UsageError(f"the spec changed since {out} was started",
                             hint="resume without the spec argument, or start a new run")
        run_order = _resumed_order(run, header, settings.order, settings.order_seed, console)
        shards.apply(run, header, shards.recorded_shard(run.read_manifest()), rounds_per_scenario(header))
        left = sum(1 for scenario, number in ordered_runs(run_order, run.scenarios, rounds_per_scenario(header))
                   if (scenario["id"], number) not in run.completed)
        if not left and "until_resolved" in header:   # its first rounds are done: does the answer need more?
            from .until_resolved import step
            left = len(step(run, header).runs)
        if not left:                               # nothing to run: build and start nothing for it
            console.print(f"nothing to resume: every round of {out} is done "
                          f"(`rbl report {out}` reports it)", highlight=False, markup=False)
            return EXIT_OK
        prepared = backend.check(header, console)
        for warning in run.warnings:
            console.print(f"warning: {warning}", highlight=False, markup=False)
        console.print(f"resuming {out}: {len(run.completed)} of {header['runs']} rounds already done",
                      highlight=False)
        return _execute(run, header, backend, prepared, console, settings, run_order)
    finally:
        run.close()


def _resumed_order(run: RunDirectory, header: dict, kind: str | None, seed: int | None, console: Console) -> RunOrder:
    """A resumed run keeps the order it started with (the manifest records it, seed included)."""
    recorded = recorded_order(run.read_manifest().get("order"))
    if recorded is None:
        chosen = choose_order(header, kind, seed)
        if run.completed and chosen.kind == "randomized" and "seed" not in (header.get("order") or {}) and seed is None:
            console.print("warning: the manifest does not record this run's order; the rounds left run in a new "
                          f"randomized order (seed {chosen.seed})", highlight=False)
        return chosen
    if (kind is not None and kind != recorded.kind) or (seed is not None and seed != recorded.seed):
        raise UsageError(f"{run.path} was started in {recorded.describe()} order; a resumed run keeps it",
                         hint="resume without --order/--order-seed, or start a new run")
    return recorded


def _execute(run: RunDirectory, header: dict, backend: Backend, prepared: Prepared, console: Console,
             settings: RunSettings, order: RunOrder) -> int:
    libraries = list(dict.fromkeys(c["library"] for c in header["clients"]))
    manifest = run.read_manifest() or _new_manifest(header, libraries)
    manifest["order"] = order.record()
    manifest["warmup"] = header.get("warmup", 0)
    session = {"started_at": _now(), "runner_pid": os.getpid(), "backend": backend.name,
               **backend.session_settings(), "status": "running"}
    manifest.setdefault("sessions", []).append(session)
    manifest["status"] = "running"
    run.write_manifest(manifest)
    executor: Executor | None = None
    other_work = OtherWork() if backend.samples_other_work else nullcontext()
    try:
        with sigterm_as_interrupt(), backend.start(header, run.path, run.logs, prepared) as services:
            session["proxy"] = services.proxy_kind
            session["proxyVersion"] = services.proxy_version
            if services.proxy_kind == "envoy":
                manifest["versions"]["envoy"] = services.proxy_version
            console.print(f"fault proxy: {proxy_name(services.proxy_kind, services.proxy_version)}", highlight=False)
            session["pids"] = services.pids()
            if services.target_description:
                session["target"] = services.target_description
                console.print(f"target: {services.target_description}", highlight=False)
            execution = ExecutionSettings(settings.round_timeout, order, observers=settings.observers)
            if is_open_loop(header):
                execution = _open_loop_setup(header, run, services, prepared, backend, console, session, execution)
            for library, reported in services.client_versions().items():   # e.g. the JVM client's library
                if manifest["versions"].get(library) is None:
                    manifest["versions"][library] = reported
            run.write_manifest(manifest)
            with RunProgress(console, manifest.get("shard", {}).get("scenarios", header["size"]), rounds_per_scenario(header), Labeller(header),
                             run.scenarios, plan_size=header["size"]) as progress:
                executor = Executor(run, services, header, progress, execution)
                with other_work:                   # while the rounds run: not the services' start and stop
                    executor.execute()
        outcome = executor.outcome
        _note_other_work(session, other_work)
        counts, examples = violation_counts(run)
        manifest["oracleViolations"] = dict(counts)
        _finish(run, manifest, session, "finished with failures" if outcome.failures else "finished", outcome)
        csv_path = run.write_csv()
    except KeyboardInterrupt as interrupt:
        _note_other_work(session, other_work)
        _stop(run, manifest, session, "interrupted", executor)
        console.print(f"interrupted: {run.rows_written} rows are saved in {run.path}; "
                      f"continue with `rbl run --resume {run.path}`", highlight=False)
        interrupt.reported = True          # said once, here; the CLI adds nothing
        raise
    except BaseException as error:
        # a full disk anywhere (a service's log too) is the same stop as one in the run's own files
        stopped = storage_error(error, run.path) if is_storage_error(error) else error
        disk_full = isinstance(stopped, StorageError)
        if disk_full:
            run.release_ballast()                  # room for the manifest to say why the run stopped
        _note_other_work(session, other_work)
        _stop(run, manifest, session, "failed", executor, getattr(stopped, "message", None) or repr(stopped),
              csv=not disk_full)
        if stopped is not error:
            raise stopped from error
        raise
    # a pipe or file gets the whole table, not one squeezed to 80 columns
    print_summary(run, Console(file=sys.stdout, width=output_width(sys.stdout, 160)),
                  proxy_name(session["proxy"], session.get("proxyVersion")))
    console.print(f"{run.rows_written} rows in {run.path / 'results.jsonl'} and {csv_path}", highlight=False)
    shared = shared_machine_note(session.get("otherWork"))
    if shared:
        console.print(shared, highlight=False, markup=False)
    if counts:
        print_violations(counts, examples, console, run.path, settings.allow_violations)
    if outcome.failures:
        print_failures(outcome.failures, console, run.path)
        return EXIT_RUN_FAILED
    return EXIT_RUN_FAILED if counts and not settings.allow_violations else EXIT_OK


def _open_loop_setup(header: dict, run: RunDirectory, services, prepared: Prepared, backend: Backend,
                     console: Console, session: dict, execution: ExecutionSettings) -> ExecutionSettings:
    """An open-loop plan's load generator (the backend's check built it) and the target's capacity,
    when a rate is a share of it (stored for this backend, or calibrated now through its services);
    both recorded in the session."""
    from .capacity import CapacityError, resolve_capacity     # pyarrow: only for open-loop runs
    from .load_generator import LoadFailed
    binary = prepared.loadgen
    if binary is None:
        raise UsageError(f"the {backend.name} backend prepared no load generator for this open-loop plan",
                         hint="run (or resume) it on a backend that runs open-loop load (docs/backends.md)")
    say = lambda text: console.print(text, highlight=False, markup=False)   # noqa: E731
    try:
        record = resolve_capacity(header, run.scenarios(), services, binary, run.path / CALIBRATION, say, backend.name,
                                  backend.samples_other_work)
    except (CapacityError, LoadFailed) as error:
        raise RblError(f"the target's capacity could not be measured: {error}",
                       hint="give it with `load.capacity = N` (requests per second), or use `load.rps`") from error
    if record is not None:
        session["capacity"] = record
    return replace(execution, loadgen=binary, capacity_rps=record["capacity_rps"] if record else None)


def proxy_name(kind: str, version: str | None) -> str:
    """How a run names the fault proxy it ran on (progress, summary, report)."""
    name = "Envoy" if kind == "envoy" else "rbl's built-in proxy" if kind == "builtin" else kind
    return f"{name} {version}" if version else name


def _note_other_work(session: dict, other_work) -> None:
    """The session's record of the CPU other work took while it ran (other_work.py)."""
    record = other_work.record() if isinstance(other_work, OtherWork) else None
    if record:
        session["otherWork"] = record


def _finish(run: RunDirectory, manifest: dict, session: dict, status: str, outcome: RunOutcome,
            reason: str | None = None) -> None:
    session.update(status=status, ended_at=_now(), rounds_run=outcome.rounds_run,
                   rounds_failed=len(outcome.failures))
    if outcome.stopped:                    # run until resolved: the rounds it added, and why it stopped
        session["untilResolved"] = {"moreRounds": outcome.more_rounds, "stopped": outcome.stopped}
    if reason:
        session["reason"] = reason
    manifest["status"] = status
    manifest["rows"] = run.rows_written
    run.write_manifest(manifest)


def _stop(run: RunDirectory, manifest: dict, session: dict, status: str, executor: Executor | None,
          reason: str | None = None, csv: bool = True) -> None:
    """A run that did not finish: record how it ended and make what finished usable (the CSV),
    as far as the disk allows; the error that stopped it is what the user must see."""
    try:
        _finish(run, manifest, session, status, executor.outcome if executor else RunOutcome(), reason)
        if csv:
            run.write_csv()
    except (OSError, RblError):
        pass


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _version_of(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def _new_manifest(header: dict, libraries: list[str]) -> dict:
    return {
        "rbl_run": 1,
        "rbl_version": __version__,
        "spec": header.get("source"),
        "plan": {"name": header.get("name"), "size": header["size"], "rounds": header["rounds"],
                 "runs": header["runs"]},
        "host": {"hostname": platform.node(), "platform": platform.platform(),
                 "python": platform.python_version(), "cpus": os.cpu_count()},
        "versions": {name: _version_of(name) for name in ["httpbin", "gunicorn", *libraries]},
        "created_at": _now(),
    }
