"""`rbl compile`: a spec into its plan and the files that stand the experiment up (compose, kubernetes, istio)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import UsageError
from .cluster import (CpuOpt, MemoryOpt, NamespaceOpt, ParallelismOpt, PullPolicyOpt, RunnerClientsOpt,
                      RunnerImageOpt, SharedNodesOpt, ShardsOpt, cluster_options)
from .options import RoundsOpt, SetOpt, SpecArg, UsersOpt
from .plan_size import check_plan_fits
from .spec_input import compile_spec, spec_overrides


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
    from ..targets.compose.artifacts import plan_deployment, write_artifacts
    from ..targets.output_dir import CompileDirectory
    from ..compiler.expand import iter_scenario_lines
    from ..compiler.plan import FORMATS, plan_header, write_json_plan, write_plan, write_scenarios

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
        from ..targets.kubernetes.image import check_image_reference
        check_image_reference(runner_image)          # before the spec is compiled
    space = compile_spec(spec, overrides=spec_overrides(rounds, users, sets)).space
    if str(output) != "-":
        check_plan_fits(space, spec, output, fmt, target)
    if str(output) == "-":
        if image:
            raise UsageError("--image applies to the compose file, which `-o -` does not write")
        if fmt == "json":
            write_json_plan(plan_header(space), iter_scenario_lines(space), sys.stdout)
        else:
            write_scenarios(space, fmt, sys.stdout)
        return
    header = plan_header(space)
    if space.topology is not None and target == "kubernetes":
        from .backend_choice import TOPOLOGY_LINE, spec_location
        raise UsageError(f"{spec_location(spec, TOPOLOGY_LINE)}--target kubernetes writes a Job whose shards run "
                         "on their own; a topology's replicas are pods that must be ready, and their addresses "
                         "given to the shards, before the Job starts: `rbl run --backend kubernetes` does that",
                         hint="`rbl run SPEC --backend kubernetes` deploys the topology and runs it; `rbl compile "
                              "--target istio -o DIR` writes its policies for a real mesh, `--target compose` its "
                              "services and sidecars as containers")
    if space.topology is not None and target == "compose":
        from ..targets.compose.topology_services import check_container_names
        from ..targets.istio import check_service_names
        check_service_names(space.topology, "--target compose names each service's containers after it")
        check_container_names(space.topology)
    if space.topology is not None and service is not None:
        raise UsageError("--service names the one target of a space without a topology; a topology's rules are "
                         "named after its services", hint="leave out --service")
    if target == "istio":
        from ..targets.istio import MeshOptions, compile_istio
        compile_istio(space, header, output, fmt, force, MeshOptions(service or "target", namespace or "default"),
                      say=lambda text: typer.echo(text, err=True))
        return
    if target == "kubernetes":
        from ..targets.kubernetes.manifests import compile_kubernetes
        cluster = cluster_options(shards, parallelism, namespace, cpu, memory, allow_shared_nodes, runner_image,
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
