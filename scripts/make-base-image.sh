#!/bin/sh
# Makes a local base image for rbl's container images on a machine that cannot pull from a
# registry: a minimal Debian (debootstrap) with Python 3 and venv, and with --java also a JDK 17
# and Maven, imported into the local Docker engine. Use it with
#   rbl compile SPEC -o DIR --image python=IMAGE --image maven=IMAGE --image java=IMAGE --image envoy=none
# The CA certificates installed on this host (/usr/local/share/ca-certificates) are copied in, so
# builds behind a TLS-inspecting proxy or a private mirror can reach PyPI and Maven Central.
#
# --node and --go copy this host's Node.js (node and its npm) and Go toolchain into the image:
# without a registry there is no node:20 or golang:1.23 image to pull, and Debian bookworm's own
# packages are too old (nodejs 18, below the Node.js client's engines >=20; golang 1.19, below its
# go.mod's go 1.23). Add them with --image node=IMAGE --image golang=IMAGE --image debian=IMAGE.
# --from IMAGE starts from an existing local image's files instead of debootstrap (e.g. to add
# Node.js and Go to a base made earlier without downloading Debian again).
#
# usage: scripts/make-base-image.sh [--java] [--node] [--go] [--from IMAGE] [IMAGE]
#        (needs root, a Docker engine, and debootstrap unless --from)
set -eu
java="" node="" go="" from=""
while [ $# -gt 0 ]; do
    case "$1" in
        --java) java=1 ;;
        --node) node=1 ;;
        --go) go=1 ;;
        --from) [ $# -ge 2 ] || { echo "--from needs an image" >&2; exit 2; }; from="$2"; shift ;;
        --help|-h) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "unknown option $1 (options: --java --node --go --from IMAGE)" >&2; exit 2 ;;
        *) break ;;
    esac
    shift
done
[ $# -le 1 ] || { echo "expected at most one IMAGE, got: $*" >&2; exit 2; }
image="${1:-rbl-local/debian-python${java:+-java}${node:+-node}${go:+-go}:bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
packages="python3,python3-venv,python3-pip,ca-certificates"
if [ -n "$java" ]; then packages="$packages,openjdk-17-jdk-headless,maven"; fi
if [ -n "$node" ]; then packages="$packages,libstdc++6"; fi     # node links libstdc++
if [ -n "$java" ] && [ -n "$from" ]; then
    echo "--java installs Debian packages with debootstrap; it does not combine with --from" >&2; exit 2
fi

command -v debootstrap >/dev/null || [ -n "$from" ] || { echo "needs debootstrap (apt-get install -y debootstrap)" >&2; exit 4; }
docker info >/dev/null 2>&1 || { echo "needs a running Docker engine (apt-get install -y docker.io; dockerd &)" >&2; exit 4; }

if [ -n "$from" ] && ! docker image inspect "$from" >/dev/null 2>&1; then
    echo "--from: no local image $from (docker images lists them)" >&2; exit 4
fi
# The host's toolchains, checked before anything is downloaded.
if [ -n "$node" ]; then
    node_bin=$(node -p process.execPath 2>/dev/null) || { echo "--node: no node on this host" >&2; exit 4; }
    node_major=$("$node_bin" -p 'process.versions.node.split(".")[0]')
    [ "$node_major" -ge 20 ] || { echo "--node: this host's Node.js is $("$node_bin" -v); the client needs >= 20" >&2; exit 4; }
    npm_dir="$(npm root -g 2>/dev/null)/npm"
    [ -f "$npm_dir/bin/npm-cli.js" ] || { echo "--node: no npm at $npm_dir" >&2; exit 4; }
fi
if [ -n "$go" ]; then
    goroot=$(go env GOROOT 2>/dev/null) || { echo "--go: no go on this host" >&2; exit 4; }
    go_minor=$("$goroot/bin/go" env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
    [ "${go_minor:-0}" -ge 23 ] || { echo "--go: this host's Go is $("$goroot/bin/go" env GOVERSION); the client needs >= 1.23" >&2; exit 4; }
fi

rootfs=$(mktemp -d) container=""
trap 'umount "$rootfs/proc" 2>/dev/null || true; rm -rf "$rootfs"; [ -z "$container" ] || docker rm -f "$container" >/dev/null 2>&1' EXIT INT TERM
if [ -n "$from" ]; then
    echo "files of $from into $rootfs ..." >&2
    container=$(docker create "$from" /bin/true)
    docker export "$container" | tar -C "$rootfs" -x
    docker rm "$container" >/dev/null; container=""
else
    echo "debootstrap bookworm ($packages) into $rootfs ..." >&2
    debootstrap --variant=minbase --include="$packages" bookworm "$rootfs" "$mirror" >&2
fi
if [ -n "$node" ]; then
    echo "Node.js $("$node_bin" -v) and npm from $node_bin, $npm_dir ..." >&2
    mkdir -p "$rootfs/usr/local/bin" "$rootfs/usr/local/lib/node_modules"
    cp "$node_bin" "$rootfs/usr/local/bin/node"
    cp -a "$npm_dir" "$rootfs/usr/local/lib/node_modules/npm"
    ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
    ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
    # fails here (not in a later image build) if the image lacks a library node needs
    out=$(chroot "$rootfs" /usr/bin/env PATH=/usr/local/bin:/usr/bin:/bin npm --version 2>&1) || { echo "$out" >&2; exit 4; }
fi
if [ -n "$go" ]; then
    echo "Go $("$goroot/bin/go" env GOVERSION) from $goroot ..." >&2
    mkdir -p "$rootfs/usr/local"
    cp -a "$goroot" "$rootfs/usr/local/go"
    # GOROOT given: without /proc in the chroot go cannot find its own location
    out=$(chroot "$rootfs" /usr/bin/env GOROOT=/usr/local/go /usr/local/go/bin/go version 2>&1) || { echo "$out" >&2; exit 4; }
fi
# (--from keeps that image's CA store: a base this script made has the host's CAs already)
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1 && [ -z "$from" ]; then
    cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
    mount -t proc proc "$rootfs/proc"              # Java's truststore hook needs /proc
    chroot "$rootfs" update-ca-certificates --fresh >&2   # also rebuilds Java's truststore
    umount "$rootfs/proc"
fi
rm -rf "$rootfs/var/cache/apt/archives"/*.deb "$rootfs/var/lib/apt/lists"/*
set -- --change 'ENV LANG=C.UTF-8'
if [ -n "$go" ]; then
    # GOTOOLCHAIN=local: the copied toolchain builds; Go never tries to download another
    set -- "$@" --change 'ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV GOTOOLCHAIN=local'
fi
if [ -n "$node" ]; then
    # Node.js trusts only its bundled CAs; this adds the system store (with this host's CAs, see above)
    set -- "$@" --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt'
fi
tar -C "$rootfs" -c . | docker import "$@" - "$image" >&2
echo "$image"
