"""A deployment's images, built with the Docker engine from the run's build context and tagged by
a hash of that context, the Dockerfile, its arguments and the base images' IDs, so an unchanged
image is reused across runs and a rebuilt base is picked up."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ...errors import RblError
from ...targets.compose.deployment import Deployment


def build_images(engine, deployment: Deployment, context: Path, logs: Path) -> dict[str, str]:
    """Dockerfile -> the tag of its image, building each one that is not there yet."""
    digest = _tree_digest(context)
    tags: dict[str, str] = {}
    for service in deployment.services:
        build = service.build
        if build is None or build.dockerfile in tags:
            continue
        # the bases' IDs too: a base rebuilt under the same tag (a new local base, a newer
        # pull) must not reuse an image built on the old one
        bases = sorted((arg, ref, _image_id(engine, ref)) for arg, ref in build.args.items())
        key = hashlib.sha256(f"{digest}|{build.dockerfile}|{bases}".encode()).hexdigest()
        tag = f"{service.image.rsplit(':', 1)[0]}:{key[:12]}"
        tags[build.dockerfile] = tag
        if not _image_exists(engine, tag):
            _build(engine, context, build.dockerfile, build.args, tag, logs)
    return tags


def _image_id(engine, ref: str) -> str:
    from docker.errors import ImageNotFound
    try:
        return engine.images.get(ref).id
    except ImageNotFound:          # the build pulls it
        return "not local"


def _image_exists(engine, tag: str) -> bool:
    from docker.errors import ImageNotFound
    try:
        engine.images.get(tag)
        return True
    except ImageNotFound:
        return False


def _build(engine, context: Path, dockerfile: str, args: dict, tag: str, logs: Path) -> None:
    log_path = logs / f"build-{dockerfile.removesuffix('.Dockerfile')}.log"
    step = "(before the first step)"
    with log_path.open("w", encoding="utf-8") as log:
        # host networking for the build: package downloads (PyPI, Maven Central) need it on
        # engines whose bridge network has no route out
        for chunk in engine.api.build(path=str(context), dockerfile=dockerfile, tag=tag, buildargs=args,
                                      network_mode="host", rm=True, forcerm=True, decode=True):
            text = chunk.get("stream", "")
            log.write(text)
            if text.startswith("Step "):
                step = text.strip()
            if "error" in chunk:
                log.write(chunk["error"] + "\n")
                raise RblError(f"building {tag} failed at {step}: {chunk['error'].strip()}",
                               hint=f"the whole build log is {log_path}", exit_code=4)


def _tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()
