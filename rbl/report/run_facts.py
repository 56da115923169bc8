"""The run's manifest as the report's "Run" table shows it: the host as named fields, not JSON."""

from __future__ import annotations

# The fields `rbl run` records (rbl/runner), in the order a reader looks for them, with their names.
HOST_FIELDS = (("hostname", "host name"), ("platform", "platform"), ("python", "Python"), ("cpus", "CPUs"))


def host_fields(host) -> list[tuple[str, str]]:
    """(name, value) per field of the manifest's `host`, known fields first; [] without one. A
    damaged manifest is left out before this (rbl/store/run_checks.py): values are scalars."""
    if not isinstance(host, dict):
        return []
    known = dict(HOST_FIELDS)
    fields = [(name, host[key]) for key, name in HOST_FIELDS if host.get(key) is not None]
    fields += [(key, value) for key, value in host.items() if key not in known and value is not None]
    return [(name, _text(value)) for name, value in fields]


def hosts(manifest: dict) -> list[tuple[str, list[tuple[str, str]]]]:
    """(row title, fields) per host the run ran on: its own, or each shard's in a merged run."""
    if not isinstance(manifest, dict):
        return []
    if manifest.get("host") is not None:
        return [("host", host_fields(manifest["host"]))]
    shards = [s for s in manifest.get("shards") or [] if isinstance(s, dict) and s.get("host") is not None]
    return [(f"host of shard {shard.get('shard', '?')}", host_fields(shard["host"])) for shard in shards]


def _text(value) -> str:
    if value is True or value is False:
        return "yes" if value else "no"
    return str(value)
