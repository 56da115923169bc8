"""Pass: `istio.version`, the Istio release whose defaults the built-in `istio` clients follow
(docs/library-semantics.md, Istio's defaults by release). It applies to istio clients only; a field
the release does not have is refused; and where the release's default retry conditions differ from
today's (a 503 was retried before 1.24), they are written into each retry that leaves retryOn out, so
the plan, the oracles and `rbl compile --target istio` all say what that release ran. The default
retry of a client with no retry policy at all is the sidecar builders' (rbl/mesh/sidecar_config.py)."""

from __future__ import annotations

from dataclasses import replace

from ...libraries.istio import (AIMD_RETRY, BACKOFF_SINCE, DEFAULT_RETRY_ON, default_retry_on, parse_release)
from ...lang.units import Value
from ..axes import single
from ..space import ClientSpec, Param
from .context import CheckContext

ISTIO = "istio"
RETRIES = ("retry", AIMD_RETRY)          # the policies with a retryOn


def check_istio_release(ctx: CheckContext) -> None:
    release = ctx.settings.get("istio.version")
    if release is None:
        return
    library = ctx.libraries.get(ISTIO)
    indexes = [i for i, client in enumerate(ctx.clients) if library is not None and library.builtin
               and client.library is library]
    if not indexes:
        ctx.diags.error("E0219", "`istio.version` applies to istio clients, and the space has none",
                        ctx.setting_spans["istio.version"], "no `client istio.PATTERN` block",
                        help="remove it, or add an istio client (`client istio.retry { ... }`)")
        return
    text = str(release.v)
    for i in indexes:
        _check_fields(ctx, ctx.clients[i], text)
        ctx.clients[i] = _with_default_conditions(ctx.clients[i], default_retry_on(text))


def _policies(client: ClientSpec) -> list[str]:
    name = client.pattern.name
    return [] if name == "baseline" else name.split("+")


def _qualified(client: ClientSpec, policy: str, parameter: str) -> str:
    return parameter if len(_policies(client)) == 1 else f"{policy}.{parameter}"


def _check_fields(ctx: CheckContext, client: ClientSpec, release: str) -> None:
    if parse_release(release) >= BACKOFF_SINCE or "retry" not in _policies(client):
        return
    backoff = next((p for p in client.params if p.name == _qualified(client, "retry", "backoff") and p.explicit), None)
    if backoff is not None:
        since = ".".join(map(str, BACKOFF_SINCE))
        ctx.diags.error("E0229", f"Istio {release} has no `retries.backoff` (it came in {since})", backoff.span,
                        f"not a field of Istio {release}",
                        help=f"leave it out (Envoy's 25ms base applies), or set `istio.version` to {since} or later")


def _with_default_conditions(client: ClientSpec, conditions: str) -> ClientSpec:
    """The client with `conditions` as the default retryOn of each of its retries that leaves it out
    (unchanged where they are today's default, which the builders apply themselves)."""
    if conditions == DEFAULT_RETRY_ON:
        return client
    names = {p.name for p in client.params}
    added = []
    for policy in _policies(client):
        name = _qualified(client, policy, "retryOn")
        definition = client.pattern.params.get(name)
        if policy in RETRIES and name not in names and definition is not None:
            added.append(Param(definition, single(Value("string", conditions)), False, False, None))
    return replace(client, params=client.params + tuple(added)) if added else client
