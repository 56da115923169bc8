"""A client service with a deliberately wrong parameter mapping, to prove the checks catch one:
it forwards protocol v1 to a real client service, rewriting one parameter on the way, the way a
client that mapped that parameter wrongly would behave."""

from __future__ import annotations

from typing import Callable

from .wrong_clients import rewriting_client


def mismapped_client(real_url: str, rewrite: Callable[[str, dict], dict]):
    """A context manager yielding the URL of a forwarder that applies rewrite(pattern, params) to
    every job's params."""
    def rewrite_job(job: dict) -> dict:
        for step in job.get("strategy", []):
            step["params"] = rewrite(step["pattern"], dict(step["params"]))
        return job
    return rewriting_client(real_url, rewrite_job)


def changed_keys(before: dict, after: dict) -> list[str]:
    """The parameter(s) that differ between two native configurations."""
    return [key for key in before if before[key] != after.get(key)]
