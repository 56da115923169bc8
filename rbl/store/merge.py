"""`rbl merge DIR... -o OUT`: the shards of one plan (shards.py) joined into one run directory
that `rbl report` and `rbl diff` read as if the plan had run on one machine.

Checked before anything is written: every directory is a run directory of the same plan (the
plan's digest, recomputed from its files, equals the one its manifest recorded and the others'),
and every round of the plan is in exactly one of them. A round in two directories is an overlap,
a round in none a gap: both are listed with the shard each scenario belongs to, and the exit code
is 3 (the same as a run with failed rounds); nothing is written unless --allow-gaps says to write
what there is. The rows keep their values; they are written in plan order (scenario, round, user).
An open-loop round keeps its per-request records (requests/SCENARIO/round-N.parquet, read and
checked like the rest, written anew); one whose records are missing is no complete round (a gap).

The shards are untrusted input, read through RunDirectory (run_reader.py) and never changed: a
damaged plan or manifest is an error naming it, a line that is not a row is left out with a
warning naming it, and a round in which a virtual user appears twice is no complete round (a gap).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..errors import EXIT_OK, EXIT_RUN_FAILED, UsageError
from ..plan_records import is_open_loop
from .controllers import CONTROLLERS
from .hops import HOPS
from .record_lines import append_line
from .results import MANIFEST, PLAN, RESULTS, SCENARIOS, RunDirectory
from .run_order import rounds_per_scenario
from .run_reader import check_member
from .shard_logs import copy_logs
from .shards import Shard, assign, plan_digest, recorded_shard

MAX_LISTED = 20          # missing or overlapping scenarios named; then "and N more"
# what the merged manifest keeps of each shard's sessions: when and how it ran, and what it ran on
# (the target it started, and the capacity it measured for open-loop rates given as shares)
SHARD_SESSION_KEYS = ("started_at", "ended_at", "status", "rounds_run", "rounds_failed", "proxy", "proxyVersion",
                      "proxy_seed", "reason", "otherWork", "target", "capacity")


@dataclass
class ShardDir:
    path: Path
    shard: Shard
    manifest: dict
    rounds: dict[tuple[str, int], list[dict]] = field(default_factory=dict)
    complete: set[tuple[str, int]] = field(default_factory=set)      # rounds with every user once
    failures: list[dict] = field(default_factory=list)
    requests: dict[tuple[str, int], object] = field(default_factory=dict)   # open-loop rounds' tables


# the records a run keeps per round beside its rows, each with its scenarioId and round
ROUND_RECORDS = (HOPS, CONTROLLERS)


@dataclass
class MergeResult:
    out: Path | None
    rows: int
    shards: list[ShardDir]
    gaps: list[str]
    overlaps: list[str]
    code: int


def _read(path: Path, say) -> tuple[ShardDir, dict, str]:
    if not path.is_dir():
        raise UsageError(f"{path} is not a directory", hint="give the run directories of the shards (their -o)")
    run = RunDirectory(path)
    if not check_member(path, PLAN) or not check_member(path, SCENARIOS):
        raise UsageError(f"{path} is not an rbl run directory (no {PLAN} and {SCENARIOS})",
                         hint="give the run directories `rbl run --shard I/N -o DIR` wrote")
    header = run.plan_header(strict=True)
    digest = plan_digest(header, run.scenarios(header, strict=True))
    manifest, problem = run.manifest()
    if problem:
        # it says which shard the directory is: without it the rounds cannot be placed
        raise UsageError(f"{path / MANIFEST} is damaged: {problem}",
                         hint="repair it, or run the shard again in a new run directory")
    shard = recorded_shard(manifest) or Shard(0, 1)       # an unsharded run is the one shard of its plan
    recorded = (manifest.get("shard") or {}).get("plan_sha256")
    if recorded is not None and recorded != digest:
        raise UsageError(f"{path}: its plan is not the one its shard was started with (digest {digest[:12]}, "
                         f"recorded {str(recorded)[:12]})", hint="the run directory was edited; run the shard again")
    found = ShardDir(path, shard, manifest)
    read = run.rounds()
    for message in read.bad_lines(str(path / RESULTS)):
        say(f"warning: {message}; left out")
    for message in read.repeats():
        say(f"warning: {path / RESULTS}: {message}; the round is left out (`rbl run --resume {path}` redoes it)")
    scenarios = list(run.scenarios(header))
    users_of = {s["id"]: s["users"] for s in scenarios}
    found.rounds = read.rounds
    found.complete = {key for key in read.rounds if read.complete(key, users_of[key[0]])}
    _read_requests(found, {s["id"] for s in scenarios if is_open_loop(s)}, say)
    found.failures = run.failures()               # read now: nothing is written before every input is read
    return found, header, digest


def _read_requests(found: ShardDir, open_loop: set[str], say) -> None:
    """The per-request tables of the shard's complete open-loop rounds, read (and checked) before
    anything is written; a round whose table is missing is left out, with a warning."""
    if not open_loop:
        return
    from .requests import read_round_requests, round_path     # pyarrow: only for open-loop plans
    for key in sorted(k for k in found.complete if k[0] in open_loop):
        table = read_round_requests(found.path, *key)
        if table is None:
            found.complete.discard(key)
            say(f"warning: {round_path(found.path, *key)} is missing: the round's per-request records are "
                f"lost, so the round is left out (a gap)")
        else:
            found.requests[key] = table


def merge(dirs: list[Path], out: Path | None, allow_gaps: bool = False, say=print) -> MergeResult:
    if not dirs:
        raise UsageError("nothing to merge", hint="give the shards' run directories: rbl merge DIR... -o OUT")
    if len(set(p.resolve() for p in dirs)) != len(dirs):
        raise UsageError("a run directory is given twice")
    read = [_read(path, say) for path in dirs]
    first, header, digest = read[0]
    for other, _, other_digest in read[1:]:
        if other_digest != digest:
            raise UsageError(f"{other.path} is a shard of another plan than {first.path} "
                             f"(plan digests {other_digest[:12]} and {digest[:12]})",
                             hint="merge only the shards of one plan (the same spec, overrides and rbl version)")
    shards = [r[0] for r in read]
    run = RunDirectory(first.path)
    scenarios = list(run.scenarios(header))
    per_scenario = rounds_per_scenario(header)
    owner = _owners(scenarios, shards, per_scenario)
    sources: dict[tuple[str, int], list[ShardDir]] = defaultdict(list)
    for shard in shards:
        for key in shard.complete:
            sources[key].append(shard)
    gaps, overlaps = [], []
    missing_by_scenario: dict[str, list[int]] = defaultdict(list)
    for scenario in scenarios:
        for round_number in range(1, per_scenario + 1):
            found = sources.get((scenario["id"], round_number), [])
            if not found:
                missing_by_scenario[scenario["id"]].append(round_number)
            elif len(found) > 1:
                overlaps.append(f"scenario {scenario['index'] + 1} ({scenario['id']}) round {round_number} is in "
                                f"{' and '.join(str(s.path) for s in found)}")
    given = {s.shard.index for s in shards if s.shard.count == shards[0].shard.count}
    for scenario in scenarios:
        rounds = missing_by_scenario.get(scenario["id"])
        if rounds:
            gaps.append(f"scenario {scenario['index'] + 1} ({scenario['id']}, {scenario['client']}, "
                        f"{scenario['users']} users, {scenario['fault']['kind']} {scenario['fault']['rate']:g}%): "
                        f"{_rounds_text(rounds, per_scenario)} missing; {owner(scenario)}")
    if overlaps:
        _report("overlap", overlaps, say)
    if gaps:
        count = shards[0].shard.count
        absent = [f"{k}/{count}" for k in range(count) if k not in given]
        if absent:
            say(f"shards not given: {', '.join(absent)}")
        _report("gap", gaps, say)
    if (gaps and not allow_gaps) or overlaps:
        return MergeResult(None, 0, shards, gaps, overlaps, EXIT_RUN_FAILED)
    if out is None:
        raise UsageError("no output directory", hint="give -o OUT")
    rows = _write(out, header, scenarios, shards, sources, digest, say)
    return MergeResult(out, rows, shards, gaps, overlaps, EXIT_RUN_FAILED if gaps else EXIT_OK)


def _owners(scenarios: list[dict], shards: list[ShardDir], per_scenario: int):
    """Which shard a scenario belongs to, for the message about a gap."""
    counts = {s.shard.count for s in shards}
    if len(counts) != 1:
        return lambda scenario: "its shard depends on the shard count, and the directories use several"
    count = counts.pop()
    shard_of, _ = assign(scenarios, count, per_scenario)
    paths = {s.shard.index: s.path for s in shards}

    def owner(scenario: dict) -> str:
        k = shard_of[scenario["index"]]
        if k in paths:
            return f"shard {k}/{count} ({paths[k]}): continue it with `rbl run --resume {paths[k]}`"
        return f"shard {k}/{count}, not given: run it with `rbl run PLAN --shard {k}/{count}`"
    return owner


def _rounds_text(rounds: list[int], per_scenario: int) -> str:
    if len(rounds) == per_scenario:
        return "every round" if per_scenario > 1 else "its round"
    return ("round " if len(rounds) == 1 else "rounds ") + ", ".join(map(str, rounds))


def _report(kind: str, lines: list[str], say) -> None:
    say(f"{len(lines)} {kind}{'s' if len(lines) != 1 else ''}:")
    for line in lines[:MAX_LISTED]:
        say(f"  {line}")
    if len(lines) > MAX_LISTED:
        say(f"  ... and {len(lines) - MAX_LISTED} more")


def _write(out: Path, header: dict, scenarios: list[dict], shards: list[ShardDir],
           sources: dict[tuple[str, int], list[ShardDir]], digest: str, say) -> int:
    lines = (json.dumps(s, separators=(",", ":"), ensure_ascii=False) for s in scenarios)
    manifest = _manifest(header, shards, digest)
    merged = RunDirectory.create(out, header, lines, manifest)
    rounds_of: dict[str, list[int]] = defaultdict(list)
    for scenario_id, round_number in sources:
        rounds_of[scenario_id].append(round_number)
    records = {shard.path: _round_records(shard.path, say) for shard in shards}
    try:
        for scenario in scenarios:                          # plan order: scenario, round, user
            for round_number in sorted(rounds_of.get(scenario["id"], ())):
                shard = sources[(scenario["id"], round_number)][0]
                rows = sorted(shard.rounds[(scenario["id"], round_number)], key=lambda r: r["userId"])
                requests = shard.requests.get((scenario["id"], round_number))
                if requests is not None:           # first, as the runner writes them: no row without its records
                    from .requests import write_round_requests
                    write_round_requests(out, scenario["id"], round_number, requests)
                merged.append_round(rows)
                for name, record in records[shard.path].get((scenario["id"], round_number), ()):
                    append_line(out, name, record)         # the round's hops along a topology, its controllers
        for shard in shards:                               # failed rounds stay on record, with their shard
            for failure in shard.failures:
                merged.record_failure({**failure, "shard": str(shard.shard)})
        manifest["rows"] = merged.rows_written
        merged.write_manifest(manifest)
        merged.write_csv()
        for shard in shards:
            copy_logs(shard.path, merged.logs / f"shard-{shard.shard.index}-of-{shard.shard.count}", say)
        return merged.rows_written
    finally:
        merged.close()


def _round_records(path: Path, say) -> dict[tuple[str, int], list[tuple[str, dict]]]:
    """A shard's records of each round beside its rows (ROUND_RECORDS), by (scenario, round); a line
    that is not one is left out with a warning naming it."""
    found: dict[tuple[str, int], list[tuple[str, dict]]] = defaultdict(list)
    for name in ROUND_RECORDS:
        if not (path / name).is_file():
            continue
        with (path / name).open(encoding="utf-8", errors="replace") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    found[(str(record["scenarioId"]), int(record["round"]))].append((name, record))
                except (ValueError, KeyError, TypeError):
                    say(f"warning: {path / name}:{number} is not a round's record; left out")
    return found


def _manifest(header: dict, shards: list[ShardDir], digest: str) -> dict:
    first = shards[0].manifest
    versions: dict = {}
    violations: dict[str, int] = {}
    for shard in shards:
        for name, value in (shard.manifest.get("versions") or {}).items():
            versions.setdefault(name, value)
        for oracle, count in (shard.manifest.get("oracleViolations") or {}).items():
            if isinstance(count, int):
                violations[oracle] = violations.get(oracle, 0) + count
    return {
        "rbl_run": 1,
        "rbl_version": first.get("rbl_version"),
        "spec": first.get("spec") or header.get("source"),
        "plan": {"name": header.get("name"), "size": header["size"], "rounds": header["rounds"],
                 "runs": header["runs"]},
        "plan_sha256": digest,
        "order": first.get("order"),
        "warmup": header.get("warmup", 0),
        "versions": versions,
        "oracleViolations": violations,
        "merged_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "shards": [{"shard": str(s.shard), "path": str(s.path), "host": s.manifest.get("host"),
                    "status": s.manifest.get("status"), "rows": sum(len(r) for r in s.rounds.values()),
                    "sessions": [{k: v for k, v in session.items()
                                  if k in SHARD_SESSION_KEYS}
                                 for session in s.manifest.get("sessions") or [] if isinstance(session, dict)]}
                   for s in sorted(shards, key=lambda s: (s.shard.count, s.shard.index))],
        "sessions": [],
        "status": "merged",
    }


def describe(result: MergeResult) -> str:
    # manifest_problem has checked each host: an object whose hostname is text without control characters
    hosts = sorted({str((s.manifest.get("host") or {}).get("hostname")) for s in result.shards})
    return (f"merged {len(result.shards)} shard{'s' if len(result.shards) != 1 else ''} "
            f"({', '.join(hosts)}) into {result.out}: {result.rows} rows")

