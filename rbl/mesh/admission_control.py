"""Envoy's admission control filter (the catalogue's istio.admission_control; docs/library-
semantics.md, section istio): client-side throttling after Google's SRE book, which refuses requests
with a probability that grows as the success rate over a sliding window falls below a threshold.
Istio has no API for it (a mesh installs it with an EnvoyFilter). How a sidecar carries it:
sidecar_filters.py.
"""

from __future__ import annotations

from ..clients.protocol import SIDECAR_REFUSAL_DETAILS

POLICY = "admission_control"
TYPE_URL = "type.googleapis.com/envoy.extensions.filters.http.admission_control.v3.AdmissionControl"
REFUSED_DETAILS = SIDECAR_REFUSAL_DETAILS["admission_control"]    # Envoy's details of its 503

# Envoy's defaults; a success is an answer under 500 (Envoy's default criteria, written out)
DEFAULTS = {"samplingWindow": 30_000, "aggression": 1.0, "srThreshold": 95, "rpsThreshold": 0,
            "maxRejectionProbability": 80}
SUCCESS_STATUSES = {"start": 100, "end": 500}


def _runtime(kind: str, key: str, value) -> dict:
    return {"default_value": {"value": value} if kind == "percent" else value, "runtime_key": key}


def typed_config(policy: dict | None, enabled: dict) -> dict:
    """The filter's config for a configuration's policy (None: off, every request passed);
    `enabled` is the runtime flag sidecar_filters.py gives it. Envoy truncates the window to seconds."""
    values = {**DEFAULTS, **(policy or {})}
    prefix = enabled["runtime_key"].rsplit(".", 1)[0]
    return {"@type": TYPE_URL, "enabled": enabled,
            "success_criteria": {"http_criteria": {"http_success_status": [SUCCESS_STATUSES]}},
            "sampling_window": f"{values['samplingWindow'] / 1000:.3f}s",
            "aggression": _runtime("double", f"{prefix}.aggression", float(values["aggression"])),
            "sr_threshold": _runtime("percent", f"{prefix}.sr_threshold", float(values["srThreshold"])),
            "rps_threshold": _runtime("uint", f"{prefix}.rps_threshold", values["rpsThreshold"]),
            "max_rejection_probability": _runtime("percent", f"{prefix}.max_rejection_probability",
                                                  float(values["maxRejectionProbability"]))}
