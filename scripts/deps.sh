#!/usr/bin/env bash
# Installs, idempotently, what building and testing Swift needs on Debian 12:
# Debian packages, and a containerd built with `go install` into a cache dir
# (reused when present), crictl, the CNI plugins the VM's pods use, and
# containerd 1.7 for the support matrix.
# Usage: scripts/deps.sh CACHE_DIR CONTAINERD_VERSION CRICTL_VERSION CONTAINERD17_VERSION CNI_PLUGINS_VERSION
set -euo pipefail
cache=${1:-/var/cache/swift-build}
ctrd_version=${2:-v2.4.2}
crictl_version=${3:-v1.37.0}
ctrd17_version=${4:-v1.7.35}
cni_version=${5:-v1.10.0}
ctrd_dir="$cache/containerd-${ctrd_version#v}"

pkgs=(runc busybox-static iproute2 util-linux gcc make
      qemu-system-x86 cpio kmod rdma-core ibverbs-utils libibverbs-dev
      libnl-3-dev libnl-route-3-dev perftest)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ ! -x "$ctrd_dir/containerd" || ! -x "$ctrd_dir/ctr" || ! -x "$ctrd_dir/containerd-shim-runc-v2" ]]; then
  echo "deps: building containerd $ctrd_version into $ctrd_dir (takes a few minutes on 2 cores)"
  mkdir -p "$ctrd_dir.tmp"
  GOBIN="$ctrd_dir.tmp" GOFLAGS=-mod=mod go install \
    "github.com/containerd/containerd/v2/cmd/containerd@$ctrd_version" \
    "github.com/containerd/containerd/v2/cmd/ctr@$ctrd_version" \
    "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$ctrd_version"
  rm -rf "$ctrd_dir" && mv "$ctrd_dir.tmp" "$ctrd_dir"
fi
crictl_dir="$cache/crictl-${crictl_version#v}"
if [[ ! -x "$crictl_dir/crictl" ]]; then
  echo "deps: building crictl $crictl_version into $crictl_dir"
  rm -rf "$crictl_dir.tmp" && mkdir -p "$crictl_dir.tmp"
  GOBIN="$crictl_dir.tmp" GOFLAGS=-mod=mod go install "sigs.k8s.io/cri-tools/cmd/crictl@$crictl_version"
  rm -rf "$crictl_dir" && mv "$crictl_dir.tmp" "$crictl_dir"
fi

# The containernetworking plugins pods in the VM are networked with
# (macvlan on the RoCE link, host-local addresses; loopback, which
# containerd's CRI runs in every pod; bridge).
cni_dir="$cache/cni-plugins-${cni_version#v}"
cni_plugins=(main/macvlan main/bridge main/loopback ipam/host-local)
cni_plugins=("${cni_plugins[@]/#/github.com/containernetworking/plugins/plugins/}")
cni_ok=yes
for p in "${cni_plugins[@]}"; do [[ -x "$cni_dir/${p##*/}" ]] || cni_ok=no; done
if [[ $cni_ok != yes ]]; then
  echo "deps: building the CNI plugins $cni_version into $cni_dir"
  rm -rf "$cni_dir.tmp" && mkdir -p "$cni_dir.tmp"
  GOBIN="$cni_dir.tmp" GOFLAGS=-mod=mod go install "${cni_plugins[@]/%/@$cni_version}"
  rm -rf "$cni_dir" && mv "$cni_dir.tmp" "$cni_dir"
fi

# containerd 1.7 for the support matrix. `go install ...@v1.7.x` refuses
# the module (its go.mod has an exclude directive): build in a copy of it.
ctrd17_dir="$cache/containerd-${ctrd17_version#v}"
if [[ ! -x "$ctrd17_dir/containerd" || ! -x "$ctrd17_dir/ctr" || ! -x "$ctrd17_dir/containerd-shim-runc-v2" ]]; then
  echo "deps: building containerd $ctrd17_version into $ctrd17_dir (several minutes on 2 cores)"
  work=$(mktemp -d)
  src=$(cd "$work" && go mod download -json "github.com/containerd/containerd@$ctrd17_version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  cp -r "$src" "$work/src" && chmod -R u+w "$work/src"
  rm -rf "$ctrd17_dir.tmp" && mkdir -p "$ctrd17_dir.tmp"
  (cd "$work/src" && GOFLAGS=-mod=mod go build -o "$ctrd17_dir.tmp/" ./cmd/containerd ./cmd/ctr ./cmd/containerd-shim-runc-v2)
  rm -rf "$work" "$ctrd17_dir" && mv "$ctrd17_dir.tmp" "$ctrd17_dir"
fi

echo "deps: ok (containerd $("$ctrd_dir/containerd" --version | awk '{print $3}'), runc $(runc --version | awk 'NR==1{print $3}'))"
