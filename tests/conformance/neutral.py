"""Native configurations produced the way a user gets them: a spec that configures one client
with a library-neutral value (`use ...`), compiled by rbl, the scenario's config taken as is."""

from __future__ import annotations

from rbl.compiler.expand import iter_scenarios
from rbl.compiler.pipeline import compile_source


def native_config(library: str, pattern: str, neutral: str) -> dict:
    spec = (f"space conformance {{\n  users = 1\n  fault.kind = abort\n  fault.status = 503\n  fault.rate = 0%\n"
            f"  client {library}.{pattern} {{ use {neutral} }}\n}}\n")
    result = compile_source(spec, "conformance.rbl")
    assert result.ok, [d.message for d in result.diagnostics]
    (scenario,) = iter_scenarios(result.space)
    return scenario["config"]
