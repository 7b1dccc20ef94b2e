#!/bin/sh
# mkrootfs.sh DEST [EXTRA_BINARY...] — build a tiny container root filesystem
# from host files (no registry): static busybox with applet symlinks, the
# libibverbs utilities ibv_rc_pingpong/ibv_devinfo/ibv_devices, every verbs
# provider and /etc/libibverbs.d, any extra binaries (copied to /usr/bin), and
# all their shared libraries as found by ldd. Runs on the host; the guest
# copies the result to tmpfs before giving it to `ctr run --rootfs`.
set -eu

[ $# -ge 1 ] || { echo "usage: $0 DEST [EXTRA_BINARY...]" >&2; exit 2; }
dest=$1
shift

die() { echo "mkrootfs.sh: error: $*" >&2; exit 1; }

busybox=${SWIFT_VM_BUSYBOX:-/bin/busybox}
multiarch=/usr/lib/x86_64-linux-gnu
[ -x "$busybox" ] || die "$busybox missing (apt-get install busybox-static)"
for b in /usr/bin/ibv_rc_pingpong /usr/bin/ibv_devinfo /usr/bin/ibv_devices; do
	[ -x "$b" ] || die "$b missing (apt-get install ibverbs-utils)"
done
[ -d "$multiarch/libibverbs" ] || die "$multiarch/libibverbs missing (apt-get install rdma-core ibverbs-providers)"
[ -d /etc/libibverbs.d ] || die "/etc/libibverbs.d missing (apt-get install ibverbs-providers)"

rm -rf "$dest"
mkdir -p "$dest"
# Mirror the host's merged-/usr layout so ldd paths resolve the same way.
for d in bin sbin lib lib64 lib32 libx32; do
	if [ -L "/$d" ]; then
		t=$(readlink "/$d")
		ln -s "$t" "$dest/$d"
		case "$t" in /*) mkdir -p "$dest$t" ;; *) mkdir -p "$dest/$t" ;; esac
	fi
done
mkdir -p "$dest/usr/bin" "$dest/usr/sbin" "$dest/usr/lib" "$dest/etc" \
	"$dest/proc" "$dest/sys" "$dest/dev" "$dest/tmp" "$dest/run" "$dest/root" "$dest/var/tmp"
for d in bin sbin lib lib64; do
	[ -e "$dest/$d" ] || mkdir -p "$dest/$d"
done
chmod 1777 "$dest/tmp" "$dest/var/tmp"

# copy SRC [DESTPATH]: copy a file (dereferenced) to the same path in dest.
copy() {
	src=$1
	dst=${2:-$1}
	mkdir -p "$dest$(dirname "$dst")"
	cp -L "$src" "$dest$dst"
}

# libs FILE: copy FILE's shared libraries (ldd) to their paths in dest.
libs() {
	ldd "$1" 2>/dev/null | while read -r a b c _; do
		case "$a" in
		/*) p=$a ;;
		*) if [ "$b" = "=>" ]; then p=$c; else continue; fi ;;
		esac
		case "$p" in
		/*) ;;
		*) continue ;;
		esac
		[ -e "$dest$p" ] || copy "$p"
	done
}

copy "$busybox" /usr/bin/busybox
for a in $("$busybox" --list); do
	[ "$a" = busybox ] && continue
	[ -e "$dest/usr/bin/$a" ] || ln -s busybox "$dest/usr/bin/$a"
done

for b in /usr/bin/ibv_rc_pingpong /usr/bin/ibv_devinfo /usr/bin/ibv_devices "$@"; do
	copy "$b" "/usr/bin/$(basename "$b")"
	libs "$b"
done

for p in "$multiarch"/libibverbs/*.so; do
	copy "$p"
	libs "$p"
done
mkdir -p "$dest/etc/libibverbs.d"
cp -L /etc/libibverbs.d/* "$dest/etc/libibverbs.d/"

cat >"$dest/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$dest/etc/group" <<'EOF'
root:x:0:
nogroup:x:65534:
EOF
cat >"$dest/etc/hosts" <<'EOF'
127.0.0.1	localhost
10.0.2.15	guest
EOF
echo "rootfs: $(du -sh "$dest" | cut -f1) in $dest"
