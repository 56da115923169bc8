"""What the runner's records of other work (rbl/runner/other_work.py) say about a whole run: the
CPU other processes took while its rounds ran, and whether that makes it a run that shared its
machine."""

from __future__ import annotations

# Other work, in cores on average while the rounds ran, from which a run counts as sharing its
# machine: its cells measured their neighbours too (the report's A/A check fails, `rbl run` warns).
SHARED_MACHINE_CORES = 0.25


def run_other_work(manifest: dict | None) -> dict | None:
    """Other work over a whole run: every session's record (a resumed run has several; a merged one
    keeps its shards'), weighted by its seconds. {"cores", "otherCores", "otherCoresPeak",
    "seconds"}, None when no session measured it."""
    if not isinstance(manifest, dict):
        return None
    sessions = list(manifest.get("sessions") or [])
    for shard in manifest.get("shards") or []:
        if isinstance(shard, dict):
            sessions += shard.get("sessions") or []
    records = [s["otherWork"] for s in sessions if isinstance(s, dict) and _valid(s.get("otherWork"))]
    if not records:
        return None
    seconds = sum(r["seconds"] for r in records)
    mean = (sum(r["otherCores"] * r["seconds"] for r in records) / seconds if seconds > 0
            else max(r["otherCores"] for r in records))
    return {"cores": max(r["cores"] for r in records), "otherCores": round(mean, 3),
            "otherCoresPeak": max(r["otherCoresPeak"] for r in records), "seconds": round(seconds, 1)}


def _valid(record: object) -> bool:
    number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
    return isinstance(record, dict) and all(number(record.get(k)) for k in ("cores", "otherCores",
                                                                           "otherCoresPeak", "seconds"))


def shared_machine_note(record: dict | None) -> str | None:
    """What `rbl run` says at its end when the run shared its machine, None when it did not."""
    if not record or record["otherCores"] < SHARED_MACHINE_CORES:
        return None
    return (f"note: other processes used {record['otherCores']:.2g} of {record['cores']} cores on average while the "
            f"rounds ran (at most {record['otherCoresPeak']:.2g}): the measurements include their effect; "
            f"`rbl report` shows how much (the A/A check)")
