"""`rbl run`'s flags turned into one frozen RunOptions, once, before anything is compiled or started
(as ruff's CheckCommand::partition turns a command's flags into typed arguments once): the rules
that refuse a combination of flags run here and in backend_choice.py, and the command, the backend
and the runner read typed fields from then on. The path of the options: flags -> RunOptions (here) -> the backend
(BackendChoice.build) and RunSettings (runner/run.py) -> ExecutionSettings -> each round's frame."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import UsageError
from ..runner.run import RunSettings
from .backend_choice import BackendChoice


@dataclass(frozen=True)
class RunOptions:
    spec: Path | None                    # a spec, a compiled plan.json, or `rbl compile -o`'s directory
    output: Path | None                  # -o: the run directory to create
    resume: Path | None                  # --resume: the run directory to continue
    dry_run: bool
    report: bool                         # --report: build the report when the run ends
    overrides: tuple                     # --rounds, --users, --set, applied when the spec compiles
    backend: BackendChoice
    settings: RunSettings

    @property
    def compiles_a_spec(self) -> bool:
        return self.spec is not None and not (self.spec.suffix == ".json" or self.spec.is_dir())


def run_options(spec: Path | None, output: Path | None, resume: Path | None, shard: str | None, dry_run: bool,
                report: bool, overrides: list, backend: BackendChoice, settings: RunSettings) -> RunOptions:
    """The options of one `rbl run`, or a usage error for flags that cannot go together."""
    if resume is not None:
        if output is not None:
            raise UsageError("--resume continues RUN_DIR in place; do not also give -o")
        if shard is not None:
            raise UsageError("--resume continues RUN_DIR as the shard it was started as; do not also give --shard")
        if not backend.runs_elsewhere and (overrides or dry_run):
            raise UsageError("--resume continues RUN_DIR with its own plan; --rounds, --users, --set and "
                             "--dry-run apply to a new run")
    elif spec is None:
        raise UsageError("nothing to run", "give a spec (rbl run examples/quickstart.rbl) or --resume RUN_DIR")
    options = RunOptions(spec, output, resume, dry_run, report, tuple(overrides), backend, settings)
    if resume is None and overrides and not options.compiles_a_spec:
        raise UsageError("--rounds, --users and --set apply to a spec (.rbl), not to a compiled plan",
                         hint="compile the spec with them: rbl compile SPEC --rounds 1 -o DIR")
    if settings.until_resolved is not None:
        if resume is not None:
            raise UsageError("--until-resolved applies to a new run; a resumed run keeps its own plan (a run "
                             "started with it goes on until resolved when resumed)")
        if shard is not None or backend.runs_elsewhere:
            raise UsageError("--until-resolved decides each next round from every scenario's rows so far; a shard "
                             "has only some of them", hint="run it without --shard, on the local or docker backend")
    if shard is not None:
        if backend.runs_elsewhere:
            raise UsageError("--shard runs one shard here; --backend kubernetes runs --shards N of them")
        from ..store.shards import parse_shard
        options = replace(options, settings=replace(settings, shard=parse_shard(shard)))
    return options
