"""`rbl compile --target istio`: the Istio resources that put each istio configuration in force.

For every configuration of the plan's `istio` clients, the DestinationRule and VirtualService a
user `kubectl apply`s to run it on a real mesh (docs/backends.md, Istio policies).

One file per configuration, istio/<client>/<index>.yaml, both resources `---` separated, named
rbl-<service> in every file: applying one file replaces the previous configuration's rules instead
of adding a second, conflicting pair for the same host. istio/index.json maps each file to its
client and configuration; istio/README.md says how to use them.

Each rbl parameter is one Istio field (FIELDS). What Istio makes of each field in Envoy:
istio/istio pilot/pkg/networking/core/route/retry/retry.go (ConvertPolicy: retries),
route/route.go (setTimeout: timeout) and cluster_traffic_policy.go (applyConnectionPool,
applyOutlierDetection), at commit eed52ebb66ad (the version tools/artifact-check validates with).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal

from .. import __version__
from ..errors import UsageError
from ..yaml_text import comment_text, yaml_quote
from ..libraries.composition import BASELINE, pattern_names, policies_of
from ..libraries.istio import (AIMD_RETRY, CONTROLLED, DEFAULT_ATTEMPTS, DEFAULT_RETRY_ON, ENVOY_FILTERS,
                               default_retry_on, enforced_policies, placed_policies, release_of)
from ..topology import kubernetes_service

ISTIO_DIR = "istio"
INDEX_FILE = f"{ISTIO_DIR}/index.json"
README_FILE = f"{ISTIO_DIR}/README.md"
API_VERSION = "networking.istio.io/v1"
LIBRARY = "istio"
MAX_FILES = 10_000               # one file per configuration; more would be no set to apply by hand
README_ROWS = 500                # index.json lists them all
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_SLUG_CUT = re.compile(r"[^a-z0-9]+")

# Where each parameter goes: (resource, path inside it, kind of value). "rule" is the
# DestinationRule's trafficPolicy, "route" the VirtualService's one HTTP route; a policy's `host` (its
# placement on a topology) is the resources' own spec.host / spec.hosts.
PLACEMENT = ("placement", ("host",), "service")
FIELDS: dict[str, dict[str, tuple[str, tuple[str, ...], str]]] = {
    "retry": {
        "attempts": ("route", ("retries", "attempts"), "int"),
        "perTryTimeout": ("route", ("retries", "perTryTimeout"), "duration"),
        "retryOn": ("route", ("retries", "retryOn"), "string"),
        "backoff": ("route", ("retries", "backoff"), "duration"),
        "host": PLACEMENT,
    },
    "circuit_breaker": {
        "maxConnections": ("rule", ("connectionPool", "tcp", "maxConnections"), "int"),
        "http1MaxPendingRequests": ("rule", ("connectionPool", "http", "http1MaxPendingRequests"), "int"),
        "http2MaxRequests": ("rule", ("connectionPool", "http", "http2MaxRequests"), "int"),
        "maxRequestsPerConnection": ("rule", ("connectionPool", "http", "maxRequestsPerConnection"), "int"),
        "maxRetries": ("rule", ("connectionPool", "http", "maxRetries"), "int"),
        "host": PLACEMENT,
    },
    "outlier_detection": {
        "consecutive5xxErrors": ("rule", ("outlierDetection", "consecutive5xxErrors"), "int"),
        "consecutiveGatewayErrors": ("rule", ("outlierDetection", "consecutiveGatewayErrors"), "int"),
        "interval": ("rule", ("outlierDetection", "interval"), "duration"),
        "baseEjectionTime": ("rule", ("outlierDetection", "baseEjectionTime"), "duration"),
        "maxEjectionPercent": ("rule", ("outlierDetection", "maxEjectionPercent"), "int"),
        "minHealthPercent": ("rule", ("outlierDetection", "minHealthPercent"), "int"),
        "host": PLACEMENT,
    },
    "retry_budget": {
        "percent": ("rule", ("retryBudget", "percent"), "number"),
        "minRetryConcurrency": ("rule", ("retryBudget", "minRetryConcurrency"), "int"),
        "budgetInterval": ("rule", ("retryBudget", "budgetInterval"), "duration"),
        "host": PLACEMENT,
    },
    "timeout": {
        "timeout": ("route", ("timeout",), "duration"),
        "host": PLACEMENT,
    },
}


# Policies rbl runs in its sidecars that Istio has no API for
ENVOY_ONLY = {name: f"a mesh installs Envoy's filter with an EnvoyFilter (envoy.filters.http.{name}), which rbl "
                    "does not write yet" for name in ENVOY_FILTERS}


@dataclass(frozen=True)
class MeshOptions:
    service: str = "target"          # the target's Kubernetes Service, the rules' host
    namespace: str = "default"       # where that Service (and so the rules) live

    def check(self) -> None:
        for option, value in (("--service", self.service), ("--namespace", self.namespace)):
            if not _DNS_LABEL.fullmatch(value or ""):
                raise UsageError(f"{option} {value!r} is not a valid Kubernetes name",
                                 hint="lower-case letters, digits and '-', at most 63 characters")

    @property
    def name(self) -> str:
        """Both resources' name, the same in every file (see the module's docstring)."""
        return f"rbl-{self.service}"


def _value(kind: str, value: object, where: str) -> object:
    """The Istio spelling of a plan value: ints as ints, numbers as they are, durations (whole ms) as
    "25ms"."""
    if kind == "string":
        if not isinstance(value, str):
            raise ValueError(f"{where} must be a string, got {value!r}")
        return value
    if kind == "number":
        if type(value) not in (int, float):
            raise ValueError(f"{where} must be a number, got {value!r}")
        return value
    if type(value) is not int:               # bool is no int here
        raise ValueError(f"{where} must be a whole number{' of milliseconds' if kind == 'duration' else ''}, "
                         f"got {value!r}")
    return f"{value}ms" if kind == "duration" else value


def _put(tree: dict, path: tuple[str, ...], value: object) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def translate(pattern: str, config: dict, release: str | None = None) -> tuple[dict, dict]:
    """(DestinationRule trafficPolicy, VirtualService HTTP route fields) of one configuration.
    Parameters not in the configuration stay out, so Istio's defaults apply, except a default retry
    that Istio `release` ran and today's does not (see translate_policies). Raises ValueError for a
    policy or parameter rbl has no Istio field for."""
    return translate_policies(policies_of(pattern, config), baseline=pattern == BASELINE, release=release)


def translate_policies(policies: dict[str, dict], baseline: bool = False,
                       release: str | None = None) -> tuple[dict, dict]:
    """translate() of policies already split (and placed): {policy: parameters}. Where Istio
    `release`'s default retry differs from today's (it retried a 503), a route without retries gets
    that default written out, so any release runs what `release` ran."""
    rule: dict = {}
    route: dict = {}
    # a controller's policy is written as it starts (rbl's runner retunes it; Istio has no API for that)
    for policy, parameters in enforced_policies(policies).items():
        fields = FIELDS.get(policy)
        if fields is None and policy in ENVOY_ONLY:
            raise ValueError(f"Istio has no field for {policy!r}: {ENVOY_ONLY[policy]}")
        if fields is None:
            raise ValueError(f"rbl writes no Istio field for the pattern {policy!r} (it knows {', '.join(FIELDS)})")
        for parameter, value in parameters.items():
            if parameter not in fields:
                raise ValueError(f"rbl writes no Istio field for {policy}.{parameter}")
            resource, path, kind = fields[parameter]
            if resource == "placement":          # the resources' host, not a field of them
                continue
            _put(rule if resource == "rule" else route, path, _value(kind, value, f"{policy}.{parameter}"))
    old_default = default_retry_on(release)
    if not baseline and "retries" not in route and AIMD_RETRY not in policies and old_default != DEFAULT_RETRY_ON:
        route["retries"] = {"attempts": DEFAULT_ATTEMPTS, "retryOn": old_default}
    if baseline:
        route["retries"] = {"attempts": 0}   # baseline: rbl's baseline switches Istio's default retry off
    elif route.get("retries", {}).get("attempts") == 0:
        # Istio refuses perTryTimeout and retryOn beside attempts 0 (validateHTTPRetry): they would do nothing
        route["retries"] = {"attempts": 0}
    return rule, route


def _scalar(value: object) -> str:
    if type(value) is float:                  # positional: YAML 1.1 reads 1e-05 (no dot) as a string
        return format(Decimal(repr(value)), "f")
    return str(value) if type(value) is int else yaml_quote(value)


def _yaml(tree: dict, indent: int) -> list[str]:
    """Block YAML of a tree of dicts, lists and scalars; every string through yaml_quote."""
    pad = " " * indent
    lines = []
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            lines += [f"{pad}{key}:", *_yaml(value, indent + 2)]
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            lines.append(f"{pad}{key}:")
            for item in value:
                first, *rest = _yaml(item, indent + 2)
                lines += [f"{pad}- {first.lstrip()}", *rest]
        elif isinstance(value, list):
            lines.append(f"{pad}{key}: [{', '.join(_scalar(v) for v in value)}]")
        elif isinstance(value, dict):
            lines.append(f"{pad}{key}: {{}}")
        else:
            lines.append(f"{pad}{key}: {_scalar(value)}")
    return lines


def _metadata(name: str, options: MeshOptions, label: str, index: int, config: dict) -> dict:
    return {"name": name, "namespace": options.namespace,
            "labels": {"app.kubernetes.io/managed-by": "rbl"},
            # which configuration is in force: `kubectl get destinationrule rbl-target -o yaml`
            "annotations": {"rbl.dev/client": label, "rbl.dev/configuration": str(index),
                            "rbl.dev/parameters": json.dumps(config, separators=(",", ":"), ensure_ascii=False)}}


def _resources(host: str, rule: dict, route: dict, metadata: dict) -> list[str]:
    """The DestinationRule and VirtualService of one host, as YAML lines `---` separated."""
    destination_rule = {"apiVersion": API_VERSION, "kind": "DestinationRule", "metadata": metadata,
                        "spec": {"host": host, **({"trafficPolicy": rule} if rule else {})}}
    virtual_service = {"apiVersion": API_VERSION, "kind": "VirtualService", "metadata": metadata,
                       "spec": {"hosts": [host],
                                "http": [{"name": "rbl", "route": [{"destination": {"host": host}}], **route}]}}
    return [*_yaml(destination_rule, 0), "---", *_yaml(virtual_service, 0)]


def render_configuration(header: dict, label: str, pattern: str, index: int, count: int, config: dict,
                         options: MeshOptions) -> str:
    """The file of one configuration: a DestinationRule and a VirtualService (for each service of the
    plan's topology, where it has one: rules for the services no policy is placed on restore Istio's
    defaults, so applying a file replaces every rule of the previous one)."""
    topology = header.get("topology")
    metadata = lambda name: _metadata(name, options, label, index, config)  # noqa: E731
    if topology is None:
        rule, route = translate(pattern, config, release_of(header))
        documents = _resources(options.service, rule, route, metadata(options.name))
    else:
        services = tuple(service["name"] for service in topology["services"])
        placed = placed_policies(policies_of(pattern, config), topology["entry"], services)
        documents = []
        for service in services:
            rule, route = translate_policies(placed[service], baseline=pattern == BASELINE,
                                             release=release_of(header))
            host = kubernetes_service(service)
            documents += [*(["---"] if documents else []), *_resources(host, rule, route, metadata(f"rbl-{host}"))]
    parameters = " ".join(f"{k}={v}" for k, v in config.items()) or "no parameters"
    names = options.name if topology is None else "rbl-SERVICE"
    head = [f"# rbl {__version__}: {comment_text(header.get('name'))}, client {comment_text(label)}, configuration "
            f"{index + 1} of {count}: {comment_text(parameters)}",
            f"# Put it in force: kubectl apply -f THIS_FILE. Every file names its rules {names}, so",
            "# applying another file replaces this configuration (istio/README.md says more)."]
    if release_of(header) is not None:
        head.append(f"# Istio {release_of(header)}'s defaults: where they differ from today's (its default retry also "
                    "retried a 503), they are written out.")
    for name in (name for name in pattern_names(pattern) if name in CONTROLLED):
        head.append(f"# {name} is a controller: `rbl run` retunes its {CONTROLLED[name]} while the "
                    "load runs (Istio has no API for that); this file holds its starting point.")
    return "\n".join([*head, *documents]) + "\n"


def _slug(label: str, taken: set[str]) -> str:
    """A folder name for a client label ("istio.retry+circuit_breaker" -> istio-retry-circuit-breaker)."""
    base = _SLUG_CUT.sub("-", label.lower()).strip("-")[:60].strip("-") or "client"
    slug, n = base, 2
    while slug in taken:
        slug, n = f"{base}-{n}", n + 1
    taken.add(slug)
    return slug


def mesh_clients(space) -> list:
    return [client for client in space.clients if client.library.name == LIBRARY]


def check_service_names(topology, why: str) -> None:
    """Refuse a topology whose services have no Kubernetes name of their own (`why`: who needs one)."""
    hosts = [kubernetes_service(name) for name in topology.names]
    for name, host in zip(topology.names, hosts):
        if not _DNS_LABEL.fullmatch(host) or hosts.count(host) > 1:
            raise UsageError(f"service {name!r} has no Kubernetes name of its own ({host!r}): {why}",
                             hint="name services with letters, digits and `_` (written `-`), at most 63 "
                                  "characters, and no two alike but for case")


def check_plan(space) -> None:
    """Refuse, before anything is written, a plan this target has nothing (or too much) to write for."""
    clients = mesh_clients(space)
    if not clients:
        raise UsageError(f"the plan has no {LIBRARY} client: --target istio writes Istio resources for "
                         f"{LIBRARY} clients only",
                         hint="add one, e.g. `client istio.retry { attempts in [1, 3] }`, or compile for "
                              "--target compose or kubernetes")
    if space.topology is not None:
        check_service_names(space.topology, "--target istio names each service's rules after it")
    total = sum(client.configurations for client in clients)
    if total > MAX_FILES:
        raise UsageError(f"the plan's {LIBRARY} clients have {total:,} configurations; --target istio writes "
                         f"one file per configuration, at most {MAX_FILES:,}",
                         hint="compile a smaller space: --set 'LABEL.param in [a, b]'")


def render_all(space, header: dict, options: MeshOptions, say=lambda _: None) -> dict[str, str]:
    """{file name under the output directory: text} of every istio configuration, index.json and
    README.md; made in full before anything is written, so a policy rbl cannot write leaves no
    half-written folder."""
    from ..compiler.expand import configurations
    options.check()
    check_plan(space)
    for client in space.clients:
        if client.library.name != LIBRARY:
            say(f"note: --target istio skips client {client.label} ({client.library.name} is no mesh policy)")
    texts: dict[str, str] = {}
    entries, taken, skipped = [], set(), []
    for client in mesh_clients(space):
        envoy_only = [policy for policy in pattern_names(client.pattern.name) if policy in ENVOY_ONLY]
        if envoy_only:
            skipped.append(f"client {client.label}: Istio has no field for {envoy_only[0]!r}: {ENVOY_ONLY[envoy_only[0]]}")
            continue
        folder = _slug(client.label, taken)
        for index, config in enumerate(configurations(client)):
            try:
                text = render_configuration(header, client.label, client.pattern.name, index, client.configurations,
                                            config, options)
            except ValueError as error:
                raise UsageError(f"client {client.label}: {error}",
                                 hint="this rbl cannot write that policy for Istio; leave the client out of "
                                      "--target istio") from None
            name = f"{folder}/{index}.yaml"
            texts[f"{ISTIO_DIR}/{name}"] = text
            entries.append({"file": name, "client": client.label, "pattern": client.pattern.name,
                            "configuration": index, "config": config})
    if not entries and skipped:
        raise UsageError(skipped[0], hint="--target istio writes Istio's resources; give the space a client of "
                                          "Istio's own policies")
    for why in skipped:
        say(f"note: --target istio skips {why}")
    if space.topology is None:
        where = {"service": options.service, "resource_name": options.name}
    else:
        where = {"services": {name: kubernetes_service(name) for name in space.topology.names},
                 "resource_name": "rbl-SERVICE"}
    index = {"rbl_version": __version__, "plan": "plan.json", "name": header.get("name"),
             **where, "namespace": options.namespace, "files": entries}
    texts[INDEX_FILE] = json.dumps(index, indent=2, ensure_ascii=False) + "\n"
    texts[README_FILE] = readme(header, entries, options)
    return texts


def _cell(value: object) -> str:
    return " ".join(str(value).split()).replace("|", "\\|").replace("`", "'")


def readme(header: dict, entries: list[dict], options: MeshOptions) -> str:
    """istio/README.md: how to use the files, what rbl writes and what it leaves to Istio."""
    rows = [f"| `{_cell(e['file'])}` | {_cell(e['client'])} | {e['configuration']} | "
            f"`{_cell(json.dumps(e['config'], ensure_ascii=False))}` |" for e in entries[:README_ROWS]]
    if len(entries) > README_ROWS:
        rows.append(f"| ... | {len(entries) - README_ROWS} more in index.json | | |")
    topology = header.get("topology")
    if topology is None:
        where = f"for the Service `{options.service}` in namespace\n`{options.namespace}` (`--service`, `--namespace`)"
        names = f"Both resources are named `{options.name}` in every file"
    else:
        services = ", ".join(f"`{kubernetes_service(s['name'])}`" for s in topology["services"])
        where = (f"for each Service of the topology ({services}) in\nnamespace `{options.namespace}` "
                 "(`--namespace`). A policy goes to the Service its `host` names\n(the entry "
                 f"`{kubernetes_service(topology['entry'])}` when unset, every one for `all`); every caller's "
                 "sidecar enforces it.\nA Service no policy is placed on gets resources without a policy "
                 "(Istio's defaults)")
        names = "Each Service's resources are named `rbl-SERVICE` in every file"
    return f"""# Istio policies of {_cell(header.get('name'))}

Written by `rbl compile --target istio` (rbl {__version__}). Each file puts one configuration of
one `istio` client in force on the mesh: a DestinationRule (connection pool, outlier detection)
and a VirtualService (retries, timeout) {where}.

    kubectl apply -f istio/{entries[0]['file']}

{names}, so applying another file replaces the
configuration in force (kubectl removes the fields the new file leaves out); the annotations
`rbl.dev/client`, `rbl.dev/configuration` and `rbl.dev/parameters` say which one it is.
`kubectl delete -f FILE` goes back to Istio's defaults. `index.json` lists every file with its
client, configuration index (the order of the plan's scenarios) and parameters.

## What is written, and what is left to Istio

- A parameter the spec leaves out is left out of the resource, so Istio's default applies
  (for a connection-pool limit: no limit).
- `baseline` writes `retries: {{attempts: 0}}`: rbl's baseline is the sidecar only forwarding,
  so Istio's default retry is switched off.
- A client without `retry` among its policies gets no `retries` field: Istio's default retry
  policy applies, as on any mesh (2 retries on connect-failure, refused-stream, unavailable,
  cancelled and retriable-status-codes; istio/istio pilot/pkg/networking/core/route/retry/retry.go).
- `retry` with `attempts = 0` writes `attempts: 0` alone: Istio refuses `perTryTimeout`,
  `retryOn` and `backoff` beside it, and they would do nothing.
- Durations are written in milliseconds (`perTryTimeout: "25ms"`), Istio's precision.

## Files

| file | client | configuration | parameters |
|---|---|---|---|
""" + "\n".join(rows) + "\n"


def compile_istio(space, header: dict, out_dir, fmt: str, force: bool, options: MeshOptions, say) -> list:
    """`rbl compile --target istio -o DIR`: the plan and the Istio resources, with the same
    directory safety as the other targets (CompileDirectory)."""
    from ..compiler.plan import write_plan
    from .output_dir import CompileDirectory, write_file
    texts = render_all(space, header, options, say)          # before anything is written
    directory = CompileDirectory(out_dir, force)
    directory.claim()
    files = write_plan(space, out_dir, fmt)
    # through output_dir.write_file like every compiled file: never written through a link
    files += [write_file(out_dir, name, text.encode("utf-8")) for name, text in texts.items()]
    directory.finish(files, header["source"]["path"])
    if directory.previous:
        say(f"note: replaced the previous compile of {directory.previous_spec or 'a spec'} in {out_dir}")
    count = len(texts) - 2
    say(f"wrote {out_dir}: plan and {count} Istio configuration file{'s' if count != 1 else ''} in "
        f"{ISTIO_DIR}/ (kubectl apply -f one of them; {README_FILE} says which is which)")
    return files
