"""A running sidecar Envoy: its files, switching its configuration, reading its counters.

The sidecar reads its route (rds.json), cluster (cds.json) and the configs of its adaptive
concurrency and admission control filters (ecds-*.json, sidecar_filters.py) from files it watches.
A switch writes them atomically (a rename, which is what Envoy's file watch sees) under a new
version and waits until the admin API reports every update accepted, so a round never starts on
the last configuration's policies.
"""

from __future__ import annotations

import http.client
import json
import os
import time
from pathlib import Path

from ..errors import EXIT_INTERNAL, RblError
from ..libraries.composition import policies_of
from ..store.durable import new_file
from .adaptive_concurrency import LIMIT_STAT
from .sidecar_filters import FILTERS, POLICIES as FILTER_POLICIES, filter_resource
from .sidecar_config import (CLUSTER_NAME, ROUTE_NAME, STAT_PREFIX, SidecarAddresses, cluster, cluster_for,
                             discovery_response, route_configuration, route_configuration_of, route_for,
                             sidecar_bootstrap)

APPLY_TIMEOUT_S = 10.0
POLL_INTERVAL_S = 0.002
# Cumulative counters of the sidecar's upstream cluster that the runner records per round, each the
# sum of Envoy's counters named (a full queue of pending requests and too many active ones are two
# counters in Envoy, one circuit breaker in Istio's terms).
COUNTERS = {
    "sidecarUpstreamRequests": ("upstream_rq_total",),
    "sidecarRetries": ("upstream_rq_retry",),
    "sidecarRetrySuccesses": ("upstream_rq_retry_success",),
    "sidecarRetryOverflows": ("upstream_rq_retry_overflow",),
    "sidecarPoolOverflows": ("upstream_rq_pending_overflow", "upstream_rq_active_overflow"),
    "sidecarPerTryTimeouts": ("upstream_rq_per_try_timeout",),
    "sidecarTimeouts": ("upstream_rq_timeout",),
    "sidecarEjections": ("outlier_detection.ejections_enforced_total",),
}
UPDATES = ("cluster_manager.cds.update_success", f"http.{STAT_PREFIX}.rds.{ROUTE_NAME}.update_success")
REJECTIONS = ("cluster_manager.cds.update_rejected", f"http.{STAT_PREFIX}.rds.{ROUTE_NAME}.update_rejected")


class SidecarError(RblError):
    exit_code = EXIT_INTERNAL


class Sidecar:
    """One sidecar's files (in `directory`) and admin API; its routes follow Istio `release`'s
    defaults (None: today's)."""

    def __init__(self, directory: Path, addresses: SidecarAddresses, release: str | None = None):
        self.directory = directory
        self.addresses = addresses
        self.release = release
        self.version = 0
        self.rds = directory / "rds.json"
        self.cds = directory / "cds.json"
        self.bootstrap = directory / "envoy.json"

    def write_initial(self) -> Path:
        """The bootstrap and a first configuration (baseline), which Envoy needs to start."""
        return self.write_initial_resources(*self.resources("baseline", {}))

    def write_initial_resources(self, route: dict, clusters: list[dict], faults: bool = False) -> Path:
        """The bootstrap (with the fault filter, for `faults`) and a first route and clusters."""
        self._write_resources(route, clusters, {})
        self._write(self.bootstrap, sidecar_bootstrap(self.addresses, str(self.rds), str(self.cds), faults=faults,
                                                      filters_dir=str(self.directory)))
        return self.bootstrap

    def faults_injected(self) -> tuple[int, int]:
        """(aborts, delays) its fault filter injected since it started."""
        stats = self._stats()
        return tuple(stats.get(f"http.{STAT_PREFIX}.fault.{kind}_injected", 0) for kind in ("aborts", "delays"))

    def resources(self, pattern: str, config: dict) -> tuple[dict, list[dict]]:
        """A client's sidecar: one route and one cluster, to the fault proxy, under the configuration's policies."""
        return route_configuration(pattern, config, self.release), [cluster(pattern, config, self.addresses)]

    def resources_of(self, policies: dict[str, dict], baseline: bool) -> tuple[dict, list[dict]]:
        """resources() of policies already split (and placed: those a topology puts on its entry)."""
        route = route_for(policies, CLUSTER_NAME, baseline=baseline, release=self.release)
        virtual_host = {"name": "all", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "route": route}]}
        endpoint = (self.addresses.upstream_host, self.addresses.upstream_port)
        return route_configuration_of([virtual_host]), [cluster_for(policies, CLUSTER_NAME, [endpoint])]

    def apply(self, pattern: str, config: dict, timeout: float = APPLY_TIMEOUT_S) -> float:
        """Switch to a configuration and wait until Envoy runs it; returns the seconds it took."""
        policies = policies_of(pattern, config)
        filtered = {name: policies[name] for name in FILTER_POLICIES if name in policies}
        return self.apply_resources(*self.resources(pattern, config), filtered=filtered, timeout=timeout)

    def apply_resources(self, route: dict, clusters: list[dict], filtered: dict[str, dict] | None = None,
                        timeout: float = APPLY_TIMEOUT_S) -> float:
        """Switch to this route configuration and these clusters (and the filters' policies
        `filtered`, {name: parameters}; a filter left out is off), and wait until Envoy runs them."""
        began = time.perf_counter()
        before = self._stats()
        # a sidecar whose bootstrap has the filters has loaded their files once (a docker deployment
        # compiled before they existed has not)
        with_filters = all(f.update_stat in before for f in FILTERS)
        if filtered and not with_filters:
            raise SidecarError(f"the sidecar Envoy in {self.directory} has no {' or '.join(filtered)} filter; "
                               "compile the deployment again")
        updates = UPDATES + (tuple(f.update_stat for f in FILTERS) if with_filters else ())
        self._write_resources(route, clusters, filtered or {}, with_filters=with_filters)
        deadline = began + timeout
        while True:
            now = self._stats()
            rejected = [name for name in REJECTIONS + tuple(f.rejection_stat for f in FILTERS)
                        if now.get(name, 0) > before.get(name, 0)]
            if rejected:
                raise SidecarError(f"the sidecar Envoy rejected configuration {self.version} ({', '.join(rejected)}); "
                                   f"see {self.directory} and the sidecar's log")
            if all(now.get(name, 0) > before.get(name, 0) for name in updates):
                return time.perf_counter() - began
            if time.perf_counter() > deadline:
                raise SidecarError(f"the sidecar Envoy did not take configuration {self.version} within {timeout:g} s")
            time.sleep(POLL_INTERVAL_S)

    def counters(self) -> dict[str, int]:
        """The cluster's cumulative counters, under the names results use."""
        return self.cluster_counters((CLUSTER_NAME,))[CLUSTER_NAME]

    def active_requests(self) -> int:
        """The requests in flight to the upstream now (Envoy's gauge upstream_rq_active, which counts
        the old cluster's too while a configuration switch drains it): the queue a controller reads."""
        return self._stats().get(f"cluster.{CLUSTER_NAME}.upstream_rq_active", 0)

    def concurrency_limit(self) -> int | None:
        """The limit Envoy's adaptive concurrency filter holds now (its gradient controller's gauge);
        None while the filter is off or has not run."""
        return self._stats().get(f"http.{STAT_PREFIX}.{LIMIT_STAT}")

    def cluster_counters(self, clusters) -> dict[str, dict[str, int]]:
        """Each named cluster's cumulative counters (one read of the admin API for all)."""
        stats = self._stats()
        return {name: {column: sum(stats.get(f"cluster.{name}.{counter}", 0) for counter in counters)
                       for column, counters in COUNTERS.items()} for name in clusters}

    def _write_resources(self, route: dict, clusters: list[dict], filtered: dict[str, dict],
                         with_filters: bool = True) -> None:
        """The files of a new version; the filters' too, for a sidecar that has them."""
        self.version += 1
        version = str(self.version)
        self._write(self.rds, discovery_response(route, version))
        self._write(self.cds, {"version_info": version, "resources": clusters})
        for sidecar_filter in FILTERS if with_filters else ():
            resource = filter_resource(sidecar_filter, filtered.get(sidecar_filter.policy), self.version)
            self._write(self.directory / sidecar_filter.file, discovery_response(resource, version))

    def _write(self, path: Path, document: dict) -> None:
        """One of its files, where Envoy reads it (a sidecar elsewhere has them written there)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_json(path, document)

    def _stats(self) -> dict[str, int]:
        host, port = self.addresses.bind_host, self.addresses.admin_port
        connection = http.client.HTTPConnection(host, port, timeout=5.0)
        try:
            connection.request("GET", "/stats?format=json&usedonly")
            response = connection.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException) as error:
            raise SidecarError(f"the sidecar Envoy's admin port {host}:{port} did not answer: {error}") from error
        finally:
            connection.close()
        return {entry["name"]: entry["value"] for entry in json.loads(body).get("stats", [])
                if isinstance(entry.get("value"), int)}


def _write_json(path: Path, document: dict) -> None:
    """Written beside and renamed into place: Envoy's watch sees one complete file. The partial file is
    made new (a leftover, or a link planted in its place, is removed first and never written through)."""
    partial = path.with_name(f".{path.name}.tmp")
    with os.fdopen(new_file(partial), "w", encoding="utf-8") as out:    # no fsync: Envoy reads it at once
        out.write(json.dumps(document, indent=1))
    os.replace(partial, path)
