"""Where a plan runs on a cluster: the kubernetes options of `rbl compile` and `rbl run`, checked."""

from __future__ import annotations

import typer

from ..errors import UsageError

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


def cluster_options(shards, parallelism, namespace, cpu, memory, allow_shared_nodes, runner_image, pull_policy,
                    runner_clients=None):
    """The cluster options as the kubernetes manifests take them; a usage error for a bad image
    reference, or for --runner-clients without the --runner-image it describes."""
    from ..targets.kubernetes.manifests import ClusterOptions
    from ..targets.kubernetes.image import RUNNER_CLIENTS, check_image_reference, parse_runner_clients
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
