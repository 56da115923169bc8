"""What the runner needs of a backend, the one place that knows where a plan's services run.

A backend answers one question: given a plan, how do the target, the fault proxy and the client
services come up, where do they listen, and how do they go away. Everything else (order, rounds,
fault switching, metrics, results, resume) is the runner's, once for every backend. The CLI picks
the backend; the runner only calls these methods.

This module is a seam: the backends import from the runner only this module, fault_control.py,
liveness.py, notices.py and interrupts.py (tests/test_layers.py holds them to it).
A second kind of backend, WholeRunBackend, runs whole runs elsewhere (each shard's pod runs the
local backend there) and gives back their finished run directory; the CLI dispatches on the kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ContextManager, Iterable, Mapping, Protocol, runtime_checkable

from rich.console import Console

from .fault_control import FaultControl


class RoundFailed(Exception):
    """A round could not be completed; the message is the reason recorded in failures.jsonl. The
    backends raise it too, for a client's sidecar that died during a round."""


@dataclass(frozen=True)
class Prepared:
    """What a backend's check prepared, before anything starts: handed back to its start."""

    client_artifacts: Mapping[str, Path] = field(default_factory=dict)   # library -> its built client
    loadgen: Path | None = None          # the open-loop load generator, when the plan needs one
    chain: Path | None = None            # the service a topology's tiers run (rbl-chain), when the plan has one


class Services(Protocol):
    """A plan's services while they run: their endpoints, as the executor reaches them."""

    proxy_kind: str                          # the fault proxy that runs: "builtin" or "envoy"
    proxy_version: str | None                # its release (Envoy's, or rbl's for the built-in one)
    fault: FaultControl | None               # the proxy's admin API (set once the proxy is up)
    target_description: str                  # what runs as the target (replicas, workers, CPU budgets)

    def target_url(self, path: str, library: str | None = None) -> str:
        """The URL a client service sends its requests to: the target's path through the proxy (for
        a mesh client's library, through its sidecar, which forwards to the proxy)."""

    def client_address(self, library: str) -> tuple[str, int]:
        """Where the runner posts a virtual user's job for this library's client service."""

    def entry_url(self, path: str, library: str) -> str:
        """Where open-loop load from this machine enters a mesh client: its sidecar's listener as the
        runner reaches it (target_url is where the client itself reaches it, inside its namespace)."""

    def configure_client(self, library: str, pattern: str, config: dict) -> None:
        """Before a round: what a client's configuration needs outside its jobs, in force when this
        returns (a mesh client's sidecar takes the configuration's policies); nothing for a library."""

    def use_target(self, target: dict) -> None:
        """Before a round of a plan whose target varies: the target on this point (path, cpus); a new
        CPU budget restarts its replicas. Only backends that run such plans have it."""

    def client_counters(self, library: str) -> dict[str, int] | None:
        """A mesh client's sidecar counters, cumulative (rbl/store/metrics.py SIDECAR_COLUMNS);
        None for a library client, which has no sidecar."""

    def client_queue(self, library: str) -> int | None:
        """A mesh client's sidecar's requests in flight now (what a controller reads as the queue);
        None for a library client."""

    def client_limit(self, library: str, instance: str) -> int | None:
        """The limit a pattern of the client set itself, now: a mesh client's sidecar's adaptive
        concurrency filter, or a library client's adaptive limiter shared as `instance` (its GET
        /limits); None when there is none, or it cannot be read."""

    def hop_counters(self) -> dict | None:
        """A topology's cumulative counters, {"edges": {"caller>callee": {...}}, "services": {name:
        {...}}} (rbl/runner/hops.py keeps their increase per round); None for a plan with one target."""

    def restart_client(self, library: str) -> None:
        """After a client died or hung: replace it with a fresh one."""

    def lost_services(self) -> list[tuple[str | None, str]]:
        """(library, or None for the target and proxy; why) for every service no longer running."""

    def target_probe(self) -> tuple[str, str] | None:
        """Where a request through the proxy reaches the target, and the token it answers with;
        None when the target cannot be told from an impostor (a prebuilt image)."""

    def pids(self) -> dict[str, object]:
        """The services' process or container ids, recorded in the manifest."""

    def client_versions(self) -> dict[str, str | None]:
        """The library versions the client services report on /health."""


class Backend(Protocol):
    """One place a plan's services run (processes on this machine, a Docker engine, ...)."""

    name: str
    # the services are this runner's own child processes, so the CPU other work takes can be told
    # apart from theirs (other_work.py); containers run under the engine, not under the runner
    samples_other_work: bool

    def check(self, header: dict, console: Console) -> Prepared:
        """Everything the plan needs of the machine, checked (and clients built) before anything
        is created or started; raises EnvironmentMissing or UsageError."""

    def session_settings(self) -> dict:
        """This backend's settings, recorded in the manifest's session (e.g. the proxy's seed)."""

    def start(self, header: dict, run_dir: Path, logs: Path, prepared: Prepared) -> ContextManager[Services]:
        """The plan's services, started on entering and stopped on leaving (success, failure or
        Ctrl-C); their logs go to `logs`, artifacts the backend writes to `run_dir`."""


@runtime_checkable
class WholeRunBackend(Protocol):
    """A backend that runs whole runs elsewhere (a cluster's pods, each running the local backend)
    and brings their results back as one run directory; the runner's loop runs there, not here."""

    name: str

    def run(self, header: dict, scenario_lines: Iterable[str], out: Path, console: Console) -> int:
        """A new run into `out`; the exit code of the run."""

    def resume(self, out: Path, console: Console) -> int:
        """Continue the run of `out` where its unfinished parts stopped."""
