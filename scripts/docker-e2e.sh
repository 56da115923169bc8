#!/bin/sh
# The docker backend end to end against a real Docker engine, from a bare machine of ours:
# installs docker.io and debootstrap if missing, starts dockerd if none answers (and stops it
# afterwards), makes the local base images if missing (scripts/make-base-image.sh: no registry is
# reachable from our machines): one with Python and Java (--java), and one that adds this host's
# Node.js and Go (--node --go, made from the first without downloading Debian again) for the
# Node.js and Go clients; then runs the tests marked `docker` (closed and open loop, a topology).
#
# usage (root): scripts/docker-e2e.sh [pytest arguments]
set -eu
cd "$(dirname "$0")/.."
base="${RBL_DOCKER_BASE:-rbl-local/debian-python-java:bookworm}"
polyglot_base="${RBL_DOCKER_POLYGLOT_BASE:-rbl-local/debian-python-java-node-go:bookworm}"
started_dockerd=""

if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
    apt-get update -qq && apt-get install -y -qq docker.io debootstrap >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
    dockerd >/tmp/rbl-dockerd.log 2>&1 &
    started_dockerd=$!
    for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
fi
cleanup() { if [ -n "$started_dockerd" ]; then kill "$started_dockerd" 2>/dev/null || true; wait "$started_dockerd" 2>/dev/null || true; fi; }
trap cleanup EXIT INT TERM
docker info >/dev/null 2>&1 || { echo "dockerd did not start; see /tmp/rbl-dockerd.log" >&2; exit 4; }

if ! docker image inspect "$base" >/dev/null 2>&1; then
    scripts/make-base-image.sh --java "$base" >/dev/null
fi
if ! docker image inspect "$polyglot_base" >/dev/null 2>&1; then
    scripts/make-base-image.sh --node --go --from "$base" "$polyglot_base" >/dev/null
fi
RBL_DOCKER_BASE="$base" RBL_DOCKER_POLYGLOT_BASE="$polyglot_base" python3 -m pytest -q -m docker tests/test_docker_backend.py \
    tests/test_docker_open_loop.py tests/test_docker_topology.py "$@"
