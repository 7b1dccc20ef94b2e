#!/bin/sh
# build.sh — build (or reuse) the soft-RoCE test guest: a Debian kernel and a
# busybox initramfs holding the rxe/9p/virtio modules and guest/init. Two
# kernels: 6.1 (Debian 12's own, from the host's apt sources) and 7.3
# (trixie-backports, whose rxe works per network namespace; fetched through
# a private apt configuration, never the host's sources).
#
# Idempotent: everything slow is cached under $SWIFT_VM_CACHE
# (default /var/cache/swift-build/vm). The initramfs name carries a hash of
# this script, guest/init and busybox, so editing either rebuilds it.
#
# On success the last two lines of stdout are
#   KERNEL=/path/to/vmlinuz
#   INITRD=/path/to/initramfs.cpio.gz
#
# Environment:
#   SWIFT_VM_CACHE       cache directory
#   SWIFT_VM_KERNEL      6.1 (default) or 7.3
#   SWIFT_VM_KERNEL_PKG  6.1's kernel package (default: newest linux-image-6.1.0-*-amd64)
#   SWIFT_VM_KERNEL73    7.3's exact Debian version (default below)
#   SWIFT_DEBIAN_MIRROR  Debian mirror for 7.3 (default: the host's first .../debian source)
#   SWIFT_VM_NO_APT=1    never call apt-get (fail if the kernel is not cached)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
cache=${SWIFT_VM_CACHE:-/var/cache/swift-build/vm}
busybox=${SWIFT_VM_BUSYBOX:-/bin/busybox}

series=${SWIFT_VM_KERNEL:-6.1}
k73=${SWIFT_VM_KERNEL73:-7.3.4-1~bpo13+1}
k73abi=7.3.4+deb13-amd64

# Modules per DESIGN.md §3. crc32_generic must be loaded before rdma_rxe
# ("failed to init crc32 algorithm" otherwise). Order matters only for that;
# dependencies are resolved with modprobe --show-depends. 7.3 builds
# virtio, virtio_pci, crc32 and fscache in (its packages list no
# modules.builtin, so they are left out of its list by name).
common="failover net_failover virtio_net configfs netfs 9pnet 9p 9pnet_virtio
udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe ib_cm iw_cm rdma_cm
rdma_ucm veth macvlan bridge"
case $series in
6.1) modules="crc32_generic virtio virtio_ring virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci fscache $common" ;;
7.3) modules=$common ;;
*) echo "build.sh: SWIFT_VM_KERNEL=$series: want 6.1 or 7.3" >&2; exit 1 ;;
esac

log() { echo "build.sh: $*" >&2; }
die() { echo "build.sh: error: $*" >&2; exit 1; }

missing=""
for t in dpkg-deb depmod modprobe cpio gzip sha256sum; do
	command -v "$t" >/dev/null 2>&1 || missing="$missing $t"
done
[ -x "$busybox" ] || missing="$missing $busybox(busybox-static)"
[ -z "$missing" ] || die "missing tools:$missing (apt-get install kmod cpio busybox-static; 'make deps' installs them)"
if ldd "$busybox" >/dev/null 2>&1; then
	die "$busybox is dynamically linked; install busybox-static (apt-get install busybox-static)"
fi

mkdir -p "$cache"

# debian_mirror: $SWIFT_DEBIAN_MIRROR, else the first .../debian URI of the
# host's apt sources (one-line or deb822).
debian_mirror() {
	if [ -n "${SWIFT_DEBIAN_MIRROR:-}" ]; then
		echo "${SWIFT_DEBIAN_MIRROR%/}"
		return
	fi
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		u=$(awk '$1 == "deb" || tolower($1) == "uris:" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:\/\/.*\/debian\/?$/) { print $i; exit } }' "$f")
		if [ -n "$u" ]; then
			echo "${u%/}"
			return
		fi
	done
}

# fetch73 DIR: the 7.3 kernel's two packages (linux-binary: the kernel;
# linux-modules) into DIR, through a private apt configuration under
# $cache/apt-7.3 (its lists fetched once; the host's sources untouched).
fetch73() {
	[ "${SWIFT_VM_NO_APT:-0}" != 1 ] || die "the 7.3 kernel is not cached in $1 and SWIFT_VM_NO_APT=1"
	mirror=$(debian_mirror)
	[ -n "$mirror" ] || die "no .../debian URI in the host's apt sources: set SWIFT_DEBIAN_MIRROR (e.g. http://deb.debian.org/debian)"
	keyring=/usr/share/keyrings/debian-archive-keyring.gpg
	[ -r "$keyring" ] || die "$keyring is missing (Debian package debian-archive-keyring)"
	a=$cache/apt-7.3
	mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$a/debs"
	echo "deb [signed-by=$keyring] $mirror trixie-backports main" >"$a/sources.list.new"
	if ! cmp -s "$a/sources.list.new" "$a/sources.list" 2>/dev/null; then
		rm -rf "$a/lists" && mkdir -p "$a/lists/partial"
	fi
	mv "$a/sources.list.new" "$a/sources.list"
	set -- "$1" -o "Dir::Etc::SourceList=$a/sources.list" -o Dir::Etc::SourceParts=/dev/null \
		-o "Dir::State::Lists=$a/lists" -o "Dir::Cache=$a/cache" -o APT::Sandbox::User=root
	dir=$1
	shift
	pkgs="linux-binary-$k73abi=$k73 linux-modules-$k73abi=$k73"
	rm -f "$a/debs/"*.deb
	# shellcheck disable=SC2086 # pkgs is a word list
	if ! (cd "$a/debs" && apt-get "$@" -qq download $pkgs >&2 2>/dev/null); then
		log "private apt-get update ($mirror trixie-backports)"
		apt-get "$@" -qq update >&2 || die "private apt-get update of $mirror trixie-backports failed"
		# shellcheck disable=SC2086
		(cd "$a/debs" && apt-get "$@" -qq download $pkgs >&2) ||
			die "apt-get download $pkgs failed (no longer served? pin another with SWIFT_VM_KERNEL73; served: $(apt-cache "$@" madison "linux-binary-$k73abi" 2>/dev/null | awk '{print $3}' | tr '\n' ' '))"
	fi
	mv "$a/debs/"*.deb "$dir/"
}

# The initramfs's name: a hash of this script, init and busybox.
hash=$(cat "$here/build.sh" "$here/init" "$busybox" | sha256sum | cut -c1-16)

# in_cache DIR: the guest's kernel and initramfs in DIR (kdir, kernel,
# initrd); when both are built there already, print them and end.
in_cache() {
	kdir=$1
	mkdir -p "$kdir"
	initrd=$kdir/initramfs-$hash.cpio.gz
	kernel=$kdir/vmlinuz
	if [ -s "$kernel" ] && [ -s "$initrd" ]; then
		log "cached: $kernel $initrd"
		echo "KERNEL=$kernel"
		echo "INITRD=$initrd"
		exit 0
	fi
}

if [ "$series" = 7.3 ]; then
	pkg=linux-$k73abi
	in_cache "$cache/$pkg"
	debs="$kdir/linux-binary-${k73abi}_${k73}_amd64.deb $kdir/linux-modules-${k73abi}_${k73}_amd64.deb"
	for d in $debs; do
		[ -s "$d" ] || {
			fetch73 "$kdir"
			break
		}
	done
else

# Pick the kernel package: what linux-image-amd64 depends on, else the newest
# linux-image-6.1.0-N-amd64 apt knows; fall back to what is already cached.
pick_pkg() {
	if [ -n "${SWIFT_VM_KERNEL_PKG:-}" ]; then
		echo "$SWIFT_VM_KERNEL_PKG"
		return
	fi
	p=""
	if command -v apt-cache >/dev/null 2>&1; then
		p=$(apt-cache depends linux-image-amd64 2>/dev/null |
			sed -n 's/^ *Depends: \(linux-image-6\.1\.0-[0-9]*-amd64\)$/\1/p' | head -n1)
		if [ -z "$p" ]; then
			p=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' 2>/dev/null |
				awk '{print $1}' | sort -V | tail -n1)
		fi
	fi
	if [ -z "$p" ]; then
		p=$(ls -d "$cache"/linux-image-6.1.0-*-amd64 2>/dev/null | sort -V | tail -n1 | xargs -r basename)
	fi
	echo "$p"
}

pkg=$(pick_pkg)
if [ -z "$pkg" ] && [ "${SWIFT_VM_NO_APT:-0}" != 1 ] && command -v apt-get >/dev/null 2>&1; then
	log "no linux-image-6.1.0-*-amd64 known to apt; running apt-get update"
	apt-get update -qq >&2 || true
	pkg=$(pick_pkg)
fi
[ -n "$pkg" ] || die "cannot find a linux-image-6.1.0-*-amd64 package (run apt-get update; Debian 12 bookworm apt sources needed)"

in_cache "$cache/$pkg"

# Fetch the kernel package (cached). A download failure usually means stale
# apt lists (the package was superseded): update, pick again, retry once.
download() {
	dl=$(mktemp -d "$kdir/dl.XXXXXX")
	log "apt-get download $pkg"
	if (cd "$dl" && apt-get -o APT::Sandbox::User=root download "$pkg" >&2); then
		mv "$dl"/*.deb "$kdir"/
		rmdir "$dl"
		return 0
	fi
	rm -rf "$dl"
	return 1
}
deb=$(ls "$kdir"/"$pkg"_*.deb 2>/dev/null | head -n1 || true)
if [ -z "$deb" ]; then
	[ "${SWIFT_VM_NO_APT:-0}" != 1 ] || die "$pkg not cached in $kdir and SWIFT_VM_NO_APT=1"
	command -v apt-get >/dev/null 2>&1 || die "apt-get not found"
	if ! download; then
		log "apt-get download failed; running apt-get update and retrying"
		apt-get update -qq >&2 || true
		pkg=$(pick_pkg)
		[ -n "$pkg" ] || die "no linux-image-6.1.0-*-amd64 package after apt-get update"
		in_cache "$cache/$pkg"
		download || die "apt-get download $pkg failed"
	fi
	deb=$(ls "$kdir"/"$pkg"_*.deb | head -n1)
fi
debs=$deb
fi

work=$(mktemp -d "$kdir/work.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

for deb in $debs; do
	log "extracting $deb"
	dpkg-deb -x "$deb" "$work/root"
done
# 7.3's packages use /usr/lib/modules (merged /usr); depmod and modprobe
# look under lib/modules
[ -e "$work/root/lib" ] || ln -s usr/lib "$work/root/lib"
kver=$(ls "$work/root/lib/modules" | head -n1)
[ -n "$kver" ] || die "no /lib/modules in $debs"
depmod -b "$work/root" "$kver"

# Resolve the load order: first occurrence of every insmod line wins.
: >"$work/order"
for m in $modules; do
	out=$(modprobe -d "$work/root" -S "$kver" --show-depends "$m" 2>&1) ||
		die "modprobe --show-depends $m: $out"
	echo "$out" | while read -r verb path _rest; do
		[ "$verb" = insmod ] || continue
		grep -qxF "$path" "$work/order" || echo "$path" >>"$work/order"
	done
done

stage=$work/stage
mkdir -p "$stage/bin" "$stage/dev" "$stage/proc" "$stage/sys" "$stage/newroot" "$stage/lib/modules"
cp "$busybox" "$stage/bin/busybox"
cp "$here/init" "$stage/init"
chmod 755 "$stage/init" "$stage/bin/busybox"
# init needs a console before it can mount devtmpfs.
mknod -m 600 "$stage/dev/console" c 5 1 2>/dev/null || true
mknod -m 666 "$stage/dev/null" c 1 3 2>/dev/null || true

: >"$stage/lib/modules/load.list"
while read -r path; do
	name=$(basename "$path")
	case "$name" in
	*.ko.xz) xz -dc "$path" >"$stage/lib/modules/${name%.xz}"; name=${name%.xz} ;;
	*.ko.zst) zstd -qdc "$path" >"$stage/lib/modules/${name%.zst}"; name=${name%.zst} ;;
	*.ko.gz) gzip -dc "$path" >"$stage/lib/modules/${name%.gz}"; name=${name%.gz} ;;
	*) cp "$path" "$stage/lib/modules/$name" ;;
	esac
	echo "/lib/modules/$name" >>"$stage/lib/modules/load.list"
done <"$work/order"
echo "$kver" >"$stage/lib/modules/kernel.version"
log "modules: $(tr '\n' ' ' <"$stage/lib/modules/load.list")"

(cd "$stage" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) >"$work/initrd"
if [ -f "$work/root/boot/vmlinuz-$kver" ]; then
	cp "$work/root/boot/vmlinuz-$kver" "$work/vmlinuz"
else
	cp "$work/root/lib/modules/$kver/vmlinuz" "$work/vmlinuz"
fi
mv "$work/vmlinuz" "$kernel"
rm -f "$kdir"/initramfs-*.cpio.gz
mv "$work/initrd" "$initrd"
log "built $initrd (kernel $kver)"
echo "KERNEL=$kernel"
echo "INITRD=$initrd"
