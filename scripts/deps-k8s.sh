#!/usr/bin/env bash
# Builds, idempotently, the Kubernetes pieces of the VM suite's cluster
# bed from the Go module proxy, pinned, into $CACHE/k8s-<version>:
# kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl
# (one module, k8s.io/kubernetes) and etcd (a three-line main around
# go.etcd.io/etcd/server/v3's etcdmain). A complete cached dir costs
# nothing. Beside them, a device plugin the bed runs on a node:
# github.com/squat/generic-device-plugin (pinned), which hands out device
# files by the kubelet's DeviceSpecs, and CoreDNS v1.15.0, the nodes'
# cluster DNS, and Helm v4 for the chart. scripts/deps.sh runs this in the
# background.
# Usage: scripts/deps-k8s.sh CACHE_DIR K8S_VERSION ETCD_VERSION
set -euo pipefail
cache=${1:-/var/cache/swift-build}
k8s_version=${2:-v1.37.2}
etcd_version=${3:-v3.7.3}
gdp_version=v0.0.0-20260515115838-2cc50b05d4d2
dir="$cache/k8s-${k8s_version#v}"

# the device plugin: its own cache check, so a new pin rebuilds only it
if [[ ! -x $dir/generic-device-plugin || $(cat "$dir/generic-device-plugin.version" 2>/dev/null) != "$gdp_version" ]]; then
  echo "deps-k8s: building github.com/squat/generic-device-plugin@$gdp_version into $dir"
  mkdir -p "$dir" && rm -rf "$dir/gdp.tmp" && mkdir -p "$dir/gdp.tmp"
  GOBIN="$dir/gdp.tmp" GOFLAGS=-mod=mod CGO_ENABLED=0 go install "github.com/squat/generic-device-plugin@$gdp_version"
  mv "$dir/gdp.tmp/generic-device-plugin" "$dir/generic-device-plugin" && rmdir "$dir/gdp.tmp"
  echo "$gdp_version" >"$dir/generic-device-plugin.version"
fi

# the cluster DNS: CoreDNS (its kubernetes plugin answers a headless
# Service's names), its own cache check too
coredns_version=v1.15.0
if [[ ! -x $dir/coredns || $(cat "$dir/coredns.version" 2>/dev/null) != "$coredns_version" ]]; then
  echo "deps-k8s: building github.com/coredns/coredns@$coredns_version into $dir"
  mkdir -p "$dir" && rm -rf "$dir/coredns.tmp" && mkdir -p "$dir/coredns.tmp"
  GOBIN="$dir/coredns.tmp" GOFLAGS=-mod=mod CGO_ENABLED=0 go install -ldflags "-s -w" "github.com/coredns/coredns@$coredns_version"
  mv "$dir/coredns.tmp/coredns" "$dir/coredns" && rmdir "$dir/coredns.tmp"
  echo "$coredns_version" >"$dir/coredns.version"
fi

# Helm, for the chart (deploy/helm/swift: make helm lints and renders it),
# its own cache check too
helm_version=v4.3.2
if [[ ! -x $dir/helm || $(cat "$dir/helm.version" 2>/dev/null) != "$helm_version" ]]; then
  echo "deps-k8s: building helm.sh/helm/v4@$helm_version into $dir"
  mkdir -p "$dir" && rm -rf "$dir/helm.tmp" && mkdir -p "$dir/helm.tmp"
  GOBIN="$dir/helm.tmp" GOFLAGS=-mod=mod CGO_ENABLED=0 go install -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$helm_version" \
    "helm.sh/helm/v4/cmd/helm@$helm_version"
  mv "$dir/helm.tmp/helm" "$dir/helm" && rmdir "$dir/helm.tmp"
  echo "$helm_version" >"$dir/helm.version"
fi

bins=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl etcd)
complete() {
  local b
  for b in "${bins[@]}"; do [[ -x $dir/$b ]] || return 1; done
  [[ $(cat "$dir/versions" 2>/dev/null) == "kubernetes $k8s_version etcd $etcd_version" ]]
}
complete && exit 0
echo "deps-k8s: building Kubernetes $k8s_version and etcd $etcd_version into $dir (about 11 minutes on 2 cores beside the other builds)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"

# The module zip of k8s.io/kubernetes leaves out its staging modules,
# which its go.mod replaces with ./staging/src/k8s.io/X: point each at the
# published k8s.io/X of the same release (v0.MINOR.PATCH), and leave the
# workspace files out.
src=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$k8s_version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[[ -n $src ]] || { echo "deps-k8s: go mod download k8s.io/kubernetes@$k8s_version printed no Dir" >&2; exit 1; }
cp -r "$src" "$work/k8s" && chmod -R u+w "$work/k8s"
staging="v0.${k8s_version#v1.}"
sed -i -E "s#=> \./staging/src/(k8s\.io/[a-z0-9-]+)#=> \1 $staging#" "$work/k8s/go.mod"
rm -f "$work/k8s/go.work" "$work/k8s/go.work.sum"
# the version the binaries report (hack/lib/version.sh stamps the same)
major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
(cd "$work/k8s" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dir.tmp/" \
  ./cmd/kube-apiserver ./cmd/kube-controller-manager ./cmd/kube-scheduler ./cmd/kubelet ./cmd/kubectl)

mkdir -p "$work/etcd"
cat >"$work/etcd/main.go" <<'GO'
// Command etcd is etcd's server, as its release builds it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
(cd "$work/etcd" && go mod init swift.local/etcd 2>/dev/null &&
  GOWORK=off GOFLAGS=-mod=mod go get "go.etcd.io/etcd/server/v3@$etcd_version" &&
  GOWORK=off GOFLAGS=-mod=mod go mod tidy &&
  GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir.tmp/etcd" .)
echo "kubernetes $k8s_version etcd $etcd_version" >"$dir.tmp/versions"
for f in generic-device-plugin generic-device-plugin.version coredns coredns.version helm helm.version; do
  [[ -e $dir/$f ]] && mv "$dir/$f" "$dir.tmp/"
done
rm -rf "$dir" && mv "$dir.tmp" "$dir"
echo "deps-k8s: ok ($("$dir/kubelet" --version), etcd $("$dir/etcd" --version | awk 'NR==1{print $3}'))"
