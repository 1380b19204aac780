#!/usr/bin/env bash
# Builds the control-plane binaries that envtest and the sandbox run — kube-apiserver,
# kube-controller-manager and etcd — from the Go module proxy, because release downloads
# (setup-envtest) are not reachable here. The result is cached outside the checkout so that
# every clone on this machine (CI included) reuses it; a second run is a no-op.
#
# Prints the directory holding the binaries on its last line (for KUBEBUILDER_ASSETS).
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.37.2}
ETCD_VERSION=${ETCD_VERSION:-3.7.3}
CACHE_ROOT=${VMIPAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vmipam}
DEST=${ENVTEST_BIN_DIR:-$CACHE_ROOT/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}}
WORK=$CACHE_ROOT/build
K8S_MINOR=${K8S_VERSION#*.}; K8S_MINOR=${K8S_MINOR%%.*}
STAGING_VERSION=v0.${K8S_MINOR}.${K8S_VERSION##*.}

log() { echo "envtest-bins: $*" >&2; }

# current BIN PATTERN: true when BIN exists and its --version output contains PATTERN. The
# output is captured first: with pipefail, `bin | grep -q` fails whenever grep exits before
# bin has written everything (SIGPIPE).
current() {
  local out
  [ -x "$DEST/$1" ] && out=$("$DEST/$1" --version 2>/dev/null) && grep -qF "$2" <<<"$out"
}

build_kube() {
  local dir=$WORK/kubernetes-$K8S_VERSION
  mkdir -p "$dir"
  log "building kube-apiserver and kube-controller-manager v$K8S_VERSION in $dir (cold: 10-20 min)"
  local gomod
  gomod=$(cd "$dir" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  {
    echo "module vmipam.local/envtest-kubernetes"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes v$K8S_VERSION"
    echo
    echo "replace ("
    # Every staging module kubernetes requires at v0.0.0 is published at v0.<minor>.<patch>.
    awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" { print "\t" $1 " => " $1 " '"$STAGING_VERSION"'" }' "$gomod" | sort -u
    echo ")"
  } >"$dir/go.mod"
  cat >"$dir/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
GO
  (cd "$dir" && go mod tidy >/dev/null)
  local v=v$K8S_VERSION ld=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$K8S_MINOR -X $pkg.gitTreeState=clean"
  done
  mkdir -p "$DEST"
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ld" -o "$DEST/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager)
}

build_etcd() {
  local dir=$WORK/etcd-$ETCD_VERSION
  mkdir -p "$dir"
  log "building etcd v$ETCD_VERSION in $dir (cold: a few minutes)"
  cat >"$dir/go.mod" <<MOD
module vmipam.local/envtest-etcd

go 1.26

require go.etcd.io/etcd/server/v3 v$ETCD_VERSION
MOD
  cat >"$dir/tools.go" <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
  (cd "$dir" && go mod tidy >/dev/null)
  mkdir -p "$DEST"
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$DEST/etcd" go.etcd.io/etcd/server/v3)
}

current kube-apiserver "Kubernetes v$K8S_VERSION" && current kube-controller-manager "Kubernetes v$K8S_VERSION" || build_kube
current etcd "etcd Version: $ETCD_VERSION" || build_etcd
current kube-apiserver "Kubernetes v$K8S_VERSION" || { log "kube-apiserver in $DEST does not report v$K8S_VERSION"; exit 1; }
current etcd "etcd Version: $ETCD_VERSION" || { log "etcd in $DEST does not report $ETCD_VERSION"; exit 1; }
echo "$DEST"
