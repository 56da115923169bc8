"""Which fault proxy a local run starts: real Envoy when it is installed (the default), or rbl's
built-in proxy, which is the one whose fault decisions a seed makes repeatable."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ... import __version__
from ...errors import EnvironmentMissing, UsageError
from ...targets.envoy_binary import INSTALL_ADVICE, envoy_binary, envoy_version

PROXY_KINDS = ("auto", "builtin", "envoy")


@dataclass(frozen=True)
class ProxyChoice:
    kind: str                       # "envoy" or "builtin"
    version: str | None             # Envoy's release, or rbl's for the built-in proxy
    binary: Path | None = None      # Envoy's binary
    note: str | None = None         # why `auto` chose the built-in proxy, said once at the start

    def describe(self) -> str:
        name = "Envoy" if self.kind == "envoy" else "rbl's built-in proxy"
        return f"{name} {self.version or '(version unknown)'}"


def choose_proxy(kind: str, seeded: bool = False) -> ProxyChoice:
    """--proxy KIND, with or without --seed, as the proxy that will run; a bad KIND, a missing
    Envoy for `envoy`, or a seed Envoy cannot take are refused before anything starts."""
    if kind not in PROXY_KINDS:
        raise UsageError(f"--proxy must be one of {', '.join(PROXY_KINDS)}, got {kind!r}")
    builtin = ProxyChoice("builtin", __version__)
    if kind == "builtin":
        return builtin
    binary = envoy_binary()
    if kind == "envoy":
        if binary is None:
            raise EnvironmentMissing("--proxy envoy needs Envoy, and none is installed",
                                     hint=f"{INSTALL_ADVICE}; or use --proxy builtin")
        if seeded:
            raise UsageError("--seed seeds the built-in proxy's fault decisions; Envoy's cannot be seeded",
                             hint="leave out --seed, or use --proxy builtin")
        return ProxyChoice("envoy", envoy_version(binary), binary)
    if seeded:
        return ProxyChoice("builtin", __version__, note="note: --seed: rbl's built-in fault proxy runs (Envoy's "
                                                        "fault decisions cannot be seeded)")
    if binary is None:
        return ProxyChoice("builtin", __version__, note=f"note: Envoy is not installed, so rbl's built-in fault "
                                                        f"proxy runs; to run on Envoy, {INSTALL_ADVICE}")
    return ProxyChoice("envoy", envoy_version(binary), binary)
