#!/usr/bin/env bash
# Installs, idempotently, what building and testing Swift needs on Debian 12:
# Debian packages, and a containerd built with `go install` into a cache dir
# (reused when present), crictl, the CNI plugins the VM's pods use, and for
# the support matrix containerd 1.7 (built) and Debian's own containerd
# packages of trixie and sid (fetched through a private apt configuration;
# the host's apt sources are never changed).
# Usage: scripts/deps.sh CACHE_DIR CONTAINERD_VERSION CRICTL_VERSION CONTAINERD17_VERSION CNI_PLUGINS_VERSION
#          [DEBIAN_CONTAINERD_PINS]
# DEBIAN_CONTAINERD_PINS: space-separated suite=version pairs, each an exact
# Debian version of the containerd package (trixie=1.7.24~ds1-6+deb13u1).
# The Debian mirror is $SWIFT_DEBIAN_MIRROR when set, else the first .../debian
# URI of the host's own apt sources.
set -euo pipefail
cache=${1:-/var/cache/swift-build}
ctrd_version=${2:-v2.4.2}
crictl_version=${3:-v1.37.0}
ctrd17_version=${4:-v1.7.35}
cni_version=${5:-v1.10.0}
debian_pins=${6-trixie=1.7.24~ds1-6+deb13u1 sid=2.1.9+ds1-5}
ctrd_dir="$cache/containerd-${ctrd_version#v}"

pkgs=(runc busybox-static iproute2 util-linux gcc make clang-format
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

# The Kubernetes bed of the VM suite (kube-apiserver, -controller-manager,
# -scheduler, kubelet, kubectl, etcd: scripts/deps-k8s.sh), the longest
# build, in the background from the start; $SWIFT_K8S_VERSIONS is
# "K8S_VERSION ETCD_VERSION" (the Makefile's).
k8s_versions=${SWIFT_K8S_VERSIONS:-v1.37.2 v3.7.3}
# shellcheck disable=SC2086 # two words
"$(dirname "$0")/deps-k8s.sh" "$cache" $k8s_versions >/tmp/swift-deps-k8s.log 2>&1 &
k8s_pid=$!

# The VM suite's two guests (Debian 12's 6.1 kernel, trixie-backports'
# 7.3), built in the background beside the Go builds below and cached
# under $SWIFT_VM_CACHE (test/vm/guest/build.sh; a cached guest costs
# nothing).
vm_cache=${SWIFT_VM_CACHE:-$cache/vm}
guest_pids=()
for k in 6.1 7.3; do
  SWIFT_VM_CACHE=$vm_cache SWIFT_VM_KERNEL=$k "$(dirname "$0")/../test/vm/guest/build.sh" >"/tmp/swift-guest-$k.log" 2>&1 &
  guest_pids+=($!)
done

# Debian's containerd packages for the support matrix, each in
# $cache/containerd-deb-<upstream version> (containerd, ctr and
# containerd-shim-runc-v2 at its top, as in the other containerd dirs; the
# exact Debian version in its debian-version file). A cached dir costs no
# apt call at all. Otherwise one private `apt-get update` (lists and
# archives below $cache/apt-private; only when a pinned version is missing
# from the lists there) and `apt-get download containerd=<version>`, then
# `dpkg-deb -x`. This runs in the background while the Go builds below run.
debian_mirror() {
  if [[ -n ${SWIFT_DEBIAN_MIRROR:-} ]]; then echo "${SWIFT_DEBIAN_MIRROR%/}"; return; fi
  local f uri
  # One-line sources: "deb [options] URI suite components".
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -r $f ]] || continue
    uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:\/\//) { print $i; break } }' "$f" |
      grep -m1 -E '/debian/?$' || true)
    [[ -n $uri ]] && { echo "${uri%/}"; return; }
  done
  # deb822 sources: "URIs: URI...".
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -r $f ]] || continue
    uri=$(awk 'tolower($1) == "uris:" { for (i = 2; i <= NF; i++) print $i }' "$f" |
      grep -m1 -E '^https?://.*/debian/?$' || true)
    [[ -n $uri ]] && { echo "${uri%/}"; return; }
  done
  return 1
}

fetch_debian_containerd() {
  local pin suite version dir f todo=()
  for pin in $debian_pins; do
    suite=${pin%%=*} version=${pin#*=}
    dir="$cache/containerd-deb-${version%%[~+-]*}"
    if [[ -x $dir/containerd && -x $dir/ctr && -x $dir/containerd-shim-runc-v2 &&
          $(cat "$dir/debian-version" 2>/dev/null) == "$version" ]]; then
      continue
    fi
    todo+=("$pin")
  done
  ((${#todo[@]})) || return 0

  local apt_dir="$cache/apt-private" mirror keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  mirror=$(debian_mirror) || {
    echo "deps: no .../debian URI in the host's apt sources; set SWIFT_DEBIAN_MIRROR (e.g. http://<mirror>/debian)" >&2
    return 1
  }
  [[ -r $keyring ]] || { echo "deps: $keyring is missing (Debian package debian-archive-keyring)" >&2; return 1; }
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/debs"
  local suites=() p
  for p in $debian_pins; do suites+=("${p%%=*}"); done
  for p in "${suites[@]}"; do
    echo "deb [signed-by=$keyring] $mirror $p main"
  done > "$apt_dir/sources.list.new"
  # A changed mirror or suite list invalidates the lists fetched for the old one.
  if ! cmp -s "$apt_dir/sources.list.new" "$apt_dir/sources.list"; then
    rm -rf "$apt_dir/lists" && mkdir -p "$apt_dir/lists/partial"
    mv "$apt_dir/sources.list.new" "$apt_dir/sources.list"
  else
    rm -f "$apt_dir/sources.list.new"
  fi
  local apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o APT::Sandbox::User=root)
  served() { apt-cache "${apt_opts[@]}" madison containerd 2>/dev/null || true; }
  local updated=no
  update() {
    echo "deps: private apt update ($mirror: ${suites[*]})"
    apt-get "${apt_opts[@]}" -qq update >"$apt_dir/update.log" 2>&1 || {
      echo "deps: private apt-get update failed:" >&2; cat "$apt_dir/update.log" >&2; return 1
    }
    updated=yes
  }
  require_served() {
    [[ $(served) == *" $version "* ]] && return 0
    echo "deps: Debian containerd=$version ($suite) is no longer served by $mirror; it serves:" >&2
    served >&2
    echo "deps: pin a served version (Makefile DEBIAN_CONTAINERD) or set SWIFT_DEBIAN_MIRROR to a mirror that has it" >&2
    return 1
  }
  download() {
    rm -rf "$apt_dir/debs/"* && (cd "$apt_dir/debs" && apt-get "${apt_opts[@]}" -qq download "containerd=$version")
  }
  for pin in "${todo[@]}"; do
    suite=${pin%%=*} version=${pin#*=}
    dir="$cache/containerd-deb-${version%%[~+-]*}"
    if [[ $updated == no && $(served) != *" $version "* ]]; then
      update || return 1
    fi
    require_served || return 1
    echo "deps: fetching Debian's containerd $version ($suite) into $dir"
    if ! download; then
      # Lists kept from an earlier run may name a file the mirror dropped.
      [[ $updated == no ]] && update && require_served && download || {
        echo "deps: apt-get download containerd=$version failed" >&2; return 1
      }
    fi
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp/root"
    dpkg-deb -x "$apt_dir/debs/"containerd_*.deb "$dir.tmp/root"
    for f in containerd ctr containerd-shim-runc-v2; do
      mv "$dir.tmp/root/usr/bin/$f" "$dir.tmp/$f"
    done
    rm -rf "$dir.tmp/root" "$apt_dir/debs/"*
    echo "$version" > "$dir.tmp/debian-version"
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  done
}
deb_pid=
if [[ -n $debian_pins ]]; then
  fetch_debian_containerd &
  deb_pid=$!
  trap '[[ -n $deb_pid ]] && kill "$deb_pid" 2>/dev/null; true' EXIT
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

if [[ -n $deb_pid ]]; then
  wait "$deb_pid" || { deb_pid=; echo "deps: fetching Debian's containerd packages failed" >&2; exit 1; }
  deb_pid=
fi

for i in "${!guest_pids[@]}"; do
  k=$([[ $i == 0 ]] && echo 6.1 || echo 7.3)
  wait "${guest_pids[$i]}" || { echo "deps: building the $k VM guest failed:" >&2; cat "/tmp/swift-guest-$k.log" >&2; exit 1; }
done

wait "$k8s_pid" || { echo "deps: building Kubernetes failed:" >&2; cat /tmp/swift-deps-k8s.log >&2; exit 1; }
tail -n 1 /tmp/swift-deps-k8s.log

echo "deps: ok (containerd $("$ctrd_dir/containerd" --version | awk '{print $3}'), runc $(runc --version | awk 'NR==1{print $3}'))"
