#!/usr/bin/env bash
# Installs, idempotently, what building and testing Swift needs on Debian 12:
# Debian packages, and a containerd built with `go install` into a cache dir
# (reused when present). Usage: scripts/deps.sh CACHE_DIR CONTAINERD_VERSION
set -euo pipefail
cache=${1:-/var/cache/swift-build}
ctrd_version=${2:-v2.4.2}
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
echo "deps: ok (containerd $("$ctrd_dir/containerd" --version | awk '{print $3}'), runc $(runc --version | awk 'NR==1{print $3}'))"
