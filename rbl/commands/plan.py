"""`rbl plan`: a spec's size, its factor breakdown, its runs and their estimated duration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .options import RoundsOpt, SetOpt, SpecArg, UsersOpt
from .spec_input import compile_spec, spec_overrides


def plan(spec: Path = SpecArg,
         json_output: bool = typer.Option(False, "--json", help="Print the size and breakdown as JSON."),
         mapping: bool = typer.Option(False, "--mapping", help="Show, per configuration, each client's native "
                                      "parameters and the waits (or breaker behaviour) they produce, side by side "
                                      "across libraries."),
         request_time: Optional[float] = typer.Option(None, "--request-time", min=0.01, metavar="MS",
                                                      help="Milliseconds one request takes on the machine that "
                                                           "will run the plan, for the estimated duration "
                                                           "[default: 1.6; `rbl run --dry-run` measures it]."),
         until_resolved: bool = typer.Option(False, "--until-resolved",
                                             help="Estimate `rbl run --until-resolved`: every scenario's first "
                                                  "rounds, and at most --max-rounds."),
         max_rounds: Optional[int] = typer.Option(None, "--max-rounds", min=1, max=1000, metavar="N",
                                                  help="--until-resolved: the most rounds per scenario "
                                                       "[default: 20]."),
         shards: Optional[int] = typer.Option(None, "--shards", min=1, max=10_000, metavar="N",
                                              help="Estimate a run split into N shards on a cluster (`rbl run "
                                                   "--backend kubernetes --shards N`): the Job's wall time."),
         parallelism: Optional[int] = typer.Option(None, "--parallelism", min=1, metavar="P",
                                                   help="--shards: pods running at once [default: all of them]."),
         rounds: Optional[int] = RoundsOpt, users: Optional[str] = UsersOpt, sets: list[str] = SetOpt):
    """Print Size(S) = |F| x |U| x sum |CONF_i| with the factor breakdown, the runs and an
    estimated duration."""
    from ..compiler.plan import plan_header
    from ..estimate import estimate, sample_space, target_restarts
    space = compile_spec(spec, json_output, spec_overrides(rounds, users, sets)).space
    if mapping:
        from ..mappingview import mapping_json, mapping_text
        typer.echo(json.dumps(mapping_json(space), indent=2) if json_output else mapping_text(space))
        return
    header = plan_header(space)
    if max_rounds is not None and not until_resolved:
        from ..errors import UsageError
        raise UsageError("--max-rounds bounds --until-resolved", hint="add --until-resolved, or give --rounds")
    if parallelism is not None and shards is None:
        from ..errors import UsageError
        raise UsageError("--parallelism bounds the pods of --shards", hint="add --shards N")
    resolved = _until_resolved(space, header, request_time, max_rounds) if until_resolved else None
    expected = estimate(sample_space(space), space.size, space.rounds + space.warmup, request_time,
                        target_restarts(header))
    from .first_run import first_run_costs
    first = first_run_costs(space, header)
    extra_s = sum(seconds for seconds, _ in first)
    cluster = _cluster(space, shards, parallelism, expected.seconds) if shards else None
    if json_output:
        keys = ("name", "size", "rounds", "runs", "breakdown", "fault", "users", "clients")
        typer.echo(json.dumps({**{k: header[k] for k in keys},
                               **({"overrides": list(space.overrides)} if space.overrides else {}),
                               "estimated_seconds": round(expected.seconds + extra_s, 1),
                               "first_run_seconds": round(extra_s, 1),
                               **({"until_resolved": resolved[0]} if resolved else {}),
                               **({"cluster": cluster[0]} if cluster else {})}, indent=2))
        return
    from ..estimate import duration_text
    from ..planview import plan_summary
    typer.echo(plan_summary(space))
    if space.workload is None:
        typer.echo(f"time    = {expected.text()}")
    else:                                  # open loop: a round lasts its load's duration, not its requests
        typer.echo(f"time    = about {duration_text(expected.seconds)} (each round its load's duration, "
                   "and its drain)")
    if resolved:
        typer.echo(resolved[1])
    if cluster:
        typer.echo(cluster[1])
    if first:
        typer.echo(f"          + about {duration_text(extra_s)} before the first round on this machine: "
                   + ", ".join(what for _, what in first))
    if space.overrides:
        typer.echo(f"overrides: {', '.join(space.overrides)}")


def _cluster(space, shards: int, parallelism: int | None, seconds: float) -> tuple[dict, str]:
    """The plan split as `rbl run --backend kubernetes --shards N` splits it: (JSON, text line). Each
    shard's share of the work is the one the shards compute (rbl/store/shards.py), applied to the
    estimate above; pods starting, images pulled and `rbl merge` come on top."""
    from ..compiler.expand import iter_scenarios
    from ..estimate import STARTUP_S, duration_text
    from ..store.shards import cluster_estimate
    split = cluster_estimate(iter_scenarios(space), space.size, shards, parallelism, space.rounds + space.warmup)
    # every pod starts its own services; the rounds are what the shards divide
    wall = STARTUP_S + max(0.0, seconds - STARTUP_S) * split.wall_share
    at_once = "all at once" if split.parallelism == shards else f"{split.parallelism} at a time"
    line = (f"cluster = {shards} shard{'s' if shards != 1 else ''}, {at_once}: about {duration_text(wall)} "
            f"(the longest shard {split.longest_share:.0%} of the work"
            + ("" if split.exact else f"; over {space.size} scenarios an even split is assumed")
            + "; each pod's start and `rbl merge` come on top)")
    # what the kubernetes backend refuses (backend_choice.py) would be said beside it; it runs everything now
    cannot: list[str] = []
    if space.topology is not None:
        pods = sum(service.replicas for service in space.topology.services)
        line += (f"\n          each shard's topology is {pods} pod{'s' if pods != 1 else ''} of its own (one per "
                 f"replica), started and ready before its shard starts")
    if space.workload is not None and space.workload.kind != "users":
        line += ("\n          each pod measures its target's capacity first when a rate is a share of it "
                 "(about 30 s; `load.capacity` skips it)")
    return ({"shards": shards, "parallelism": split.parallelism, "estimated_seconds": round(wall, 1),
             "longest_shard_share": round(split.longest_share, 4), "exact": split.exact,
             "runnable": not cannot}, line)


def _until_resolved(space, header: dict, request_time: float | None, max_rounds: int | None) -> tuple[dict, str]:
    """What `rbl run --until-resolved` would take, its first rounds, then at most --max-rounds: (JSON, text)."""
    from ..estimate import duration_text, estimate, sample_space, target_restarts
    from ..runner.until_resolved import DEFAULT_FIRST_ROUNDS, until_resolved_header
    from .run import DEFAULT_MAX_ROUNDS
    most = until_resolved_header(header, max_rounds or DEFAULT_MAX_ROUNDS)["rounds"]      # refuses too few
    first = max(space.rounds, DEFAULT_FIRST_ROUNDS)
    took = {n: estimate(sample_space(space), space.size, n + space.warmup, request_time,
                        target_restarts(header)).seconds for n in (first, most)}
    line = (f"until resolved: {first} rounds of every scenario first (about {duration_text(took[first])}), then "
            f"one more at a time where the answer is not resolved: at most {most} (about "
            f"{duration_text(took[most])} if every scenario needed them)")
    return ({"first_rounds": first, "max_rounds": most, "first_seconds": round(took[first], 1),
             "at_most_seconds": round(took[most], 1)}, line)
