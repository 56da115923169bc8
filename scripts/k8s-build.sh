#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler and kubelet from the Go module proxy
# (no release binaries or container registry needed), cached by version under the user's cache
# directory: $XDG_CACHE_HOME/rbl-kube/<version>/bin. A second call with the binaries present is a no-op.
# Usage: scripts/k8s-build.sh [VERSION]    (prints the bin directory on its last line)
set -euo pipefail
VERSION=${1:-${RBL_KUBE_VERSION:-v1.31.4}}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/rbl-kube/$VERSION
BIN=$CACHE/bin
COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kubelet)

have_all() { for c in "${COMPONENTS[@]}"; do [ -x "$BIN/$c" ] || return 1; done; }
if have_all; then echo "$BIN"; exit 0; fi

command -v go >/dev/null || { echo "k8s-build: 'go' is not on PATH (needed to build $VERSION)" >&2; exit 2; }
mkdir -p "$CACHE/module" "$BIN"
cd "$CACHE/module"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local
# k8s.io/kubernetes requires its staging modules (k8s.io/api, client-go, ...) at v0.0.0 and replaces
# them with local directories that the published module does not carry: point each at its published
# v0.<minor>.<patch> twin instead. The list comes from the module's own go.mod, so it follows the version.
STAGING_VERSION="v0.${VERSION#v1.}"
KMOD=$(go mod download -json "k8s.io/kubernetes@$VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
{
  echo "module rblkubebuild"
  echo
  echo "go 1.22.0"
  echo
  echo "require k8s.io/kubernetes $VERSION"
  echo
  echo "replace ("
  grep -E '^\s*k8s\.io/[a-z0-9-]+ v0\.0\.0$' "$KMOD" | awk -v v="$STAGING_VERSION" '{print "\t" $1 " => " $1 " " v}'
  echo ")"
} > go.mod
cat > tools.go <<GO
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
# Without the version stamp the binaries report v0.0.0-master, which the kubelet and apiserver compare.
LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=$VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$VERSION" | cut -d. -f2)"
for c in "${COMPONENTS[@]}"; do
  [ -x "$BIN/$c" ] && continue
  start=$(date +%s)
  go build -tags tools -ldflags "$LDFLAGS" -o "$BIN/$c.tmp" "k8s.io/kubernetes/cmd/$c"
  mv "$BIN/$c.tmp" "$BIN/$c"
  echo "k8s-build: $c built in $(( $(date +%s) - start ))s" >&2
done
echo "$BIN"
