#!/bin/sh
# Makes a local base image for rbl's container images on a machine that cannot pull from a
# registry: a minimal Debian (debootstrap) with Python 3 and venv, and with --java also a JDK 17
# and Maven, imported into the local Docker engine. Use it with
#   rbl compile SPEC -o DIR --image python=IMAGE --image maven=IMAGE --image java=IMAGE --image envoy=none
# The CA certificates installed on this host (/usr/local/share/ca-certificates) are copied in, so
# builds behind a TLS-inspecting proxy or a private mirror can reach PyPI and Maven Central.
#
# usage: scripts/make-base-image.sh [--java] [IMAGE]   (needs root, debootstrap and a Docker engine)
set -eu
java=""
if [ "${1:-}" = "--java" ]; then java=1; shift; fi
image="${1:-rbl-local/debian-python${java:+-java}:bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
packages="python3,python3-venv,python3-pip,ca-certificates"
if [ -n "$java" ]; then packages="$packages,openjdk-17-jdk-headless,maven"; fi

command -v debootstrap >/dev/null || { echo "needs debootstrap (apt-get install -y debootstrap)" >&2; exit 4; }
docker info >/dev/null 2>&1 || { echo "needs a running Docker engine (apt-get install -y docker.io; dockerd &)" >&2; exit 4; }

rootfs=$(mktemp -d)
trap 'umount "$rootfs/proc" 2>/dev/null || true; rm -rf "$rootfs"' EXIT INT TERM
echo "debootstrap bookworm ($packages) into $rootfs ..." >&2
debootstrap --variant=minbase --include="$packages" bookworm "$rootfs" "$mirror" >&2
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
    mount -t proc proc "$rootfs/proc"              # Java's truststore hook needs /proc
    chroot "$rootfs" update-ca-certificates --fresh >&2   # also rebuilds Java's truststore
    umount "$rootfs/proc"
fi
rm -rf "$rootfs/var/cache/apt/archives"/*.deb "$rootfs/var/lib/apt/lists"/*
tar -C "$rootfs" -c . | docker import --change 'ENV LANG=C.UTF-8' - "$image" >&2
echo "$image"
