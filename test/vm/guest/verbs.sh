# verbs.sh — the verbs cache scenarios, sourced by scenarios.sh (which
# provides log, fail, fact, ctr_, rootfs, zstop, median, need_rxe,
# need_containerd, $W, $R, $name, $RUNTIME, $CPATH).
#
#   verbs             swiftctl cache build/check/show; containers with
#                     swift.io/verbs=cached, trimmed and stock run the
#                     full control-plane sequence (swift-profile, per-call
#                     timings) and an RC pingpong; the cached one has the
#                     trimmed libibverbs.d with libswiftverbs.so as a
#                     provider entry (no LD_PRELOAD) and cached answers,
#                     the trimmed one the list alone; one without
#                     swift.io/verbs gets the mode cache build measured
#                     faster, and the shim's log says so;
#                     then error-triggered revalidation with a cache whose
#                     max_sge is wrong (QPs sized from it: create fails,
#                     the library re-queries, says so once, retries right);
#                     a setuid copy of swift-profile run by an unprivileged
#                     caller ignores its SWIFT_VERBS_SYSFS (valid), which an
#                     ordinary run obeys (stale)
#   verbs-invalidate  cache built with rxe0; rxe1 added (on dummy0, or lo
#                     when the guest has no dummy module): cache
#                     check says stale and why, new containers run stock and
#                     see both devices, in a container started before the
#                     preload finds the cache stale, logs why once and
#                     serves nothing (it lists rxe0: its /dev has only the
#                     nodes it was created with);
#                     rebuild: valid again; rxe1 deleted and added again
#                     (same name, number, GUID): stale, "registered again";
#                     rxe1 removed: no crash, the right device list, a clear
#                     log line
#   verbs-bench       stock, cached and trimmed containers side by side,
#                     fresh process per run, $SWIFTVM_VERBS_RUNS runs each
#                     (default 20), alternating rounds, and
#                     swift-profile-static in the stock one ("static":
#                     every provider linked in, none loaded), and the
#                     trimmed one with LD_BIND_NOW=1 ("bindnow");
#                     raw swift-profile output in
#                     $R/verbs-bench-{stock,cached,trimmed,static}.prof for
#                     the host; the same without address space
#                     randomization in $R/verbs-bench-*-noaslr.prof; and
#                     swift-spawn: a program that does not use RDMA, in the
#                     cached container as it is and with LD_PRELOAD removed,
#                     and with libswiftverbs.so preloaded (the delivery the
#                     cache had before it became a provider entry)

VERBS_STATE=/var/lib/swift/verbs

# verbs_reset: no cache, no extra device (every verbs scenario starts here).
verbs_reset() {
	rm -rf "$VERBS_STATE"
	# only the rxe1 these scenarios make (on dummy0 or lo): alloc's rxe1
	# (on the veth swa0) had rdma.max limits, and deleting such a device
	# hits a kernel BUG on 6.1 (pods.sh, second_rxe): it stays
	p=$(cat /sys/class/infiniband/rxe1/parent 2>/dev/null)
	[ -n "$p" ] && [ "$p" != swa0 ] && rdma link delete rxe1 2>/dev/null
	ip link del dummy0 2>/dev/null
	true
}

# vcache ARGS...: swiftctl cache ... against the guest's node config.
vcache() {
	swiftctl cache "$@" --config "$W/swift.toml"
}

# vbuild RUNS: build the cache; its output goes to the log.
vbuild() {
	log "swiftctl cache build --runs $1"
	vcache build --runs "$1" --quiet || return 1
	vcache check
}

# vrootfs ID: a rootfs copy for ID with swift-profile, swift-profile-static,
# swift-spawn and a dynamically linked true (true-dyn) in it.
vrootfs() {
	rf=$(rootfs "$1")
	cp "$SWIFTVM_BIN_DIR/swift-profile" "$rf/usr/bin/swift-profile" || fail "no swift-profile in $SWIFTVM_BIN_DIR (make build)"
	cp "$SWIFTVM_BIN_DIR/swift-profile-static" "$rf/usr/bin/swift-profile-static" || fail "no swift-profile-static in $SWIFTVM_BIN_DIR (make build)"
	cp "$SWIFTVM_BIN_DIR/swift-spawn" "$rf/usr/bin/swift-spawn" || fail "no swift-spawn in $SWIFTVM_BIN_DIR (make build)"
	# a dynamically linked program that does not use RDMA (busybox is static)
	cp /usr/bin/true "$rf/usr/bin/true-dyn" || fail "no /usr/bin/true"
	echo "$rf"
}

# vargs MODE: the annotations for a verbs mode ("" = no swift.io/verbs).
vargs() {
	echo "--annotation swift.io/rdma=true"
	[ -n "$1" ] && echo "--annotation swift.io/verbs=$1"
}

# vrun ID MODE CMD...: ctr run --rm with swift.io/rdma=true and the mode.
vrun() {
	id=$1
	mode=$2
	shift 2
	rf=$(vrootfs "$id")
	log "ctr run --rm $id (verbs mode '${mode:-default}')"
	# shellcheck disable=SC2046
	ctr_ run --rm --net-host --env "$CPATH" --runtime "$RUNTIME" $(vargs "$mode") --rootfs "$rf" "$id" "$@"
}

# vstart ID MODE: a detached container (sleep) to exec into.
vstart() {
	rf=$(vrootfs "$1")
	log "ctr run -d $1 (verbs mode '${2:-default}')"
	# shellcheck disable=SC2046
	ctr_ run -d --net-host --env "$CPATH" --runtime "$RUNTIME" $(vargs "$2") --rootfs "$rf" "$1" /bin/sleep 3600 ||
		fail "ctr run -d $1 failed"
}

VN=0
vexec() {
	id=$1
	shift
	VN=$((VN + 1))
	bounded "${SWIFTVM_EXEC_TIMEOUT:-120}" "$id" ctr_ task exec --exec-id "v$VN-$$" "$id" "$@"
}

# vprobe ID KEY PATTERN: in the running container ID, the devices
# ibv_devices lists and one swift-profile run on rxe0; facts KEY_exec_exit,
# KEY_devices, KEY_cache_state, KEY_profile_exit and KEY_log (how many lines
# match the grep pattern PATTERN: the preload's one line).
vprobe() {
	vexec "$1" /bin/sh -c 'echo "devices=$(ibv_devices 2>/dev/null | awk "NR > 2 {print \$1}" | sort | tr "\n" " ")"; swift-profile --runs 1 --device rxe0 --pingpong 10' >"$W/$1.log" 2>&1
	fact "$2_exec_exit" $?
	cat "$W/$1.log"
	fact "$2_devices" "$(sed -n 's/^devices=//p' "$W/$1.log" | sed 's/ *$//')"
	fact "$2_cache_state" "$(sed -n 's/^run=.* cache=\([a-z]*\) .*/\1/p' "$W/$1.log" | head -n1)"
	fact "$2_profile_exit" "$(sed -n 's/^run=[0-9]* exit=\([0-9]*\) .*/\1/p' "$W/$1.log" | head -n1)"
	fact "$2_log" "$(grep -c "$3" "$W/$1.log")"
}

# wait_ibdev NAME GLOB: until a uverbs node in GLOB (under
# /sys/class/infiniband_verbs) belongs to device NAME; fails after 10 s.
wait_ibdev() {
	i=0
	# shellcheck disable=SC2086
	until grep -qx "$1" /sys/class/infiniband_verbs/$2/ibdev 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 50 ] || fail "$1 has no uverbs node $2 after 10s"
		sleep 0.2
	done
}

# What a verbs container reports about itself, then the sequence and an RC
# pingpong (server and client in the container, over rxe0).
VERBS_PROBE='echo "ld_preload=$LD_PRELOAD"
echo "verbs_cache_env=$SWIFT_VERBS_CACHE"
echo "driver_files=$(ls /etc/libibverbs.d | tr "\n" " ")"
echo "devices=$(ibv_devices | awk "NR > 2 {print \$1}" | sort | tr "\n" " ")"
swift-profile --runs 3 --device rxe0 --pingpong 100 || echo "profile_failed=$?"
ibv_rc_pingpong -d rxe0 -g 1 -n 100 -p $PP_PORT >/tmp/s.log 2>&1 &
s=$!
sleep 1
ok=no
for i in 1 2 3 4 5 6 7 8 9 10; do
  if ibv_rc_pingpong -d rxe0 -g 1 -n 100 -p $PP_PORT 127.0.0.1 >/tmp/c.log 2>&1; then ok=yes; break; fi
  grep -q "Couldn.t connect" /tmp/c.log || break
  sleep 1
done
wait $s
echo "rc_server_exit=$?"
echo "rc_client=$ok"
cat /tmp/c.log'

# vfacts PREFIX FILE: facts from a container's VERBS_PROBE output.
vfacts() {
	p=$1
	f=$2
	fact "${p}_ld_preload" "$(sed -n 's/^ld_preload=//p' "$f" | head -n1)"
	fact "${p}_cache_env" "$(sed -n 's/^verbs_cache_env=//p' "$f" | head -n1)"
	fact "${p}_driver_files" "$(sed -n 's/^driver_files=//p' "$f" | head -n1 | sed 's/ *$//')"
	fact "${p}_devices" "$(sed -n 's/^devices=//p' "$f" | head -n1 | sed 's/ *$//')"
	fact "${p}_runs_ok" "$(grep -c '^run=[0-9]* exit=0 ' "$f")"
	fact "${p}_cache_state" "$(sed -n 's/^run=.* cache=\([a-z]*\) .*/\1/p' "$f" | sort -u | tr '\n' ' ' | sed 's/ *$//')"
	fact "${p}_served_min" "$(sed -n 's/^run=.* served=\([0-9]*\) .*/\1/p' "$f" | sort -n | head -n1)"
	fact "${p}_profile_pingpong" "$(sed -n 's/^run=.* pingpong=\([a-z]*\) .*/\1/p' "$f" | sort -u | tr '\n' ' ' | sed 's/ *$//')"
	fact "${p}_critical_us" "$(grep '^run=[0-9]* exit=0 ' "$f" | tr ' ' '\n' | sed -n 's/^critical_us=//p' | median)"
	for c in ibv_get_device_list ibv_open_device ibv_query_device ibv_query_port ibv_create_qp ibv_modify_qp_rtr; do
		fact "${p}_${c}_us" "$(grep '^run=[0-9]* exit=0 ' "$f" | tr ' ' '\n' | sed -n "s/^${c}_us=//p" | median)"
	done
	fact "${p}_rc_client" "$(sed -n 's/^rc_client=//p' "$f")"
	fact "${p}_rc_server_exit" "$(sed -n 's/^rc_server_exit=//p' "$f")"
	fact "${p}_rc_pingpong" "$(grep 'bytes in' "$f" | head -n1)"
}

scenario_verbs() {
	need_rxe
	need_containerd
	verbs_reset
	vbuild 3 || fail "cache build or check failed"
	fact check "$(vcache check | cut -d: -f1)"
	vcache show
	vcache show --json >"$W/verbs-manifest.json"
	fact driver_files "$(sed -n '/"driver_files"/,/]/p' "$W/verbs-manifest.json" | grep -o '"[a-z0-9_]*\.driver"' | tr -d '"' | tr '\n' ' ' | sed 's/ *$//')"
	fact speedup_build "$(sed -n 's/.*"speedup": \([0-9.]*\).*/\1/p' "$W/verbs-manifest.json")"

	PP_PORT=18610 vrun vcached cached /bin/sh -c "PP_PORT=18610; $VERBS_PROBE" >"$W/vcached.log" 2>&1
	fact cached_exit $?
	PP_PORT=18611 vrun vstock stock /bin/sh -c "PP_PORT=18611; $VERBS_PROBE" >"$W/vstock.log" 2>&1
	fact stock_exit $?
	PP_PORT=18612 vrun vtrim trimmed /bin/sh -c "PP_PORT=18612; $VERBS_PROBE" >"$W/vtrim.log" 2>&1
	fact trimmed_exit $?
	echo "--- cached container"
	cat "$W/vcached.log"
	echo "--- stock container"
	cat "$W/vstock.log"
	echo "--- trimmed container"
	cat "$W/vtrim.log"
	vfacts cached "$W/vcached.log"
	vfacts stock "$W/vstock.log"
	vfacts trimmed "$W/vtrim.log"
	fact cached_entry "$(sed -n 's/^run=.* entry=\([a-z]*\) .*/\1/p' "$W/vcached.log" | sort -u | tr '\n' ' ' | sed 's/ *$//')"
	fact cached_patched_min "$(sed -n 's/^run=.* patched=\([0-9]*\) .*/\1/p' "$W/vcached.log" | sort -n | head -n1)"

	# no swift.io/verbs: the mode cache build measured faster, logged
	dm=$(sed -n 's/.*"default_mode": "\([a-z]*\)".*/\1/p' "$W/verbs-manifest.json")
	fact default_mode "$dm"
	vrun vdef "" /bin/sh -c 'echo "ld_preload=$LD_PRELOAD"; echo "driver_files=$(ls /etc/libibverbs.d | tr "\n" " ")"' >"$W/vdef.log" 2>&1
	cat "$W/vdef.log"
	fact default_ld_preload "$(sed -n 's/^ld_preload=//p' "$W/vdef.log")"
	fact default_driver_files "$(sed -n 's/^driver_files=//p' "$W/vdef.log" | sed 's/ *$//')"
	sleep 1
	grep 'swift: .*verbs' "$R/containerd.log" | tail -n 4
	fact shim_default_note "$(grep -c "swift: verbs: $dm, the node's default (measured at build: cached [0-9.]* ms, trimmed [0-9.]* ms: $dm is faster)" "$R/containerd.log")"

	# Error-triggered revalidation: a copy of the cache whose max_sge is
	# twice the device's (checksum resealed, so the preload trusts it). A
	# process that sizes its QPs from ibv_query_device gets the wrong
	# value, ibv_create_qp fails, the preload re-queries the device, says
	# once that the cache is wrong, and retries with the real limit.
	log "error-triggered revalidation with a wrong max_sge"
	d=$(vcache check | sed 's/^valid: //')
	rm -rf "$W/vtamper"
	cp -a "$d" "$W/vtamper"
	python3 -c '
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
off = 384 + 192 + 120  # device 0, struct ibv_device_attr.max_sge
v = struct.unpack_from("<i", b, off)[0]
struct.pack_into("<i", b, off, v * 2)
h = 0xcbf29ce484222325
for x in b[24:]:
    h = ((h ^ x) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
struct.pack_into("<Q", b, 16, h)
open(p, "wb").write(b)
print("max_sge %d -> %d" % (v, v * 2))
' "$W/vtamper/snapshot.bin" || fail "cannot rewrite the snapshot copy"
	# the library as a provider entry of the copy: it finds the snapshot
	# beside itself
	mkdir "$W/vtamper/prof.d"
	cp "$W/vtamper/libibverbs.d/"* "$W/vtamper/prof.d/"
	echo "driver $W/vtamper/libswiftverbs" >"$W/vtamper/prof.d/swiftverbs.driver"
	swift-profile --runs 1 --device rxe0 --pingpong 10 --size-from-device --config-dir "$W/vtamper/prof.d" >"$W/vreval.log" 2>&1
	fact reval_exit $?
	cat "$W/vreval.log"
	fact reval_cache_state "$(sed -n 's/^run=.* cache=\([a-z]*\) .*/\1/p' "$W/vreval.log")"
	fact reval_served "$(sed -n 's/^run=.* served=\([0-9]*\) .*/\1/p' "$W/vreval.log")"
	fact reval_revalidations "$(sed -n 's/^run=.* revalidations=\([0-9]*\) .*/\1/p' "$W/vreval.log")"
	fact reval_retries "$(sed -n 's/^run=.* retries=\([0-9]*\) .*/\1/p' "$W/vreval.log")"
	fact reval_pingpong "$(sed -n 's/^run=.* pingpong=\([a-z]*\) .*/\1/p' "$W/vreval.log")"
	fact reval_max_sge "$(sed -n 's/^run=.* max_sge=\([0-9]*\) .*/\1/p' "$W/vreval.log")"
	fact reval_qp_send_sge "$(sed -n 's/^run=.* qp_send_sge=\([0-9]*\).*/\1/p' "$W/vreval.log")"
	fact reval_log "$(grep -c '^swiftverbs: cached attributes no longer match the device (rxe0): using the real verbs calls$' "$W/vreval.log")"

	# A caller without privilege points a setuid verbs program at a sysfs
	# tree of its own (SWIFT_VERBS_SYSFS): the library must ignore it
	# (AT_SECURE) and find the cache valid; the same variable in an
	# ordinary process is obeyed (the cache is then stale), so the test
	# can tell the two apart.
	log "a setuid verbs program ignores the caller's SWIFT_VERBS_* variables"
	rm -rf "$W/vsecure"
	cp -a "$(vcache check | sed 's/^valid: //')" "$W/vsecure"
	mkdir "$W/vsecure/prof.d"
	cp "$W/vsecure/libibverbs.d/"* "$W/vsecure/prof.d/"
	echo "driver $W/vsecure/libswiftverbs" >"$W/vsecure/prof.d/swiftverbs.driver"
	sp=/tmp/swift-profile-suid-$$
	cp "$(command -v swift-profile)" "$sp" && chown root:root "$sp" && chmod 4755 "$sp" || fail "cannot make a setuid copy of swift-profile"
	SWIFT_VERBS_SYSFS=/nonexistent "$sp" --runs 1 --device rxe0 --pingpong 0 --config-dir "$W/vsecure/prof.d" >"$W/vplain.log" 2>&1
	fact forged_plain_cache_state "$(sed -n 's/^run=.* cache=\([a-z]*\) .*/\1/p' "$W/vplain.log")"
	setpriv --reuid 65534 --regid 65534 --clear-groups env SWIFT_VERBS_SYSFS=/nonexistent SWIFT_VERBS_CACHE=/nonexistent \
		"$sp" --runs 1 --device rxe0 --pingpong 0 --config-dir "$W/vsecure/prof.d" >"$W/vsuid.log" 2>&1
	fact forged_suid_exit $?
	cat "$W/vplain.log" "$W/vsuid.log"
	fact forged_suid_cache_state "$(sed -n 's/^run=.* cache=\([a-z]*\) .*/\1/p' "$W/vsuid.log")"
	fact forged_suid_entry "$(sed -n 's/^run=.* entry=\([a-z]*\) .*/\1/p' "$W/vsuid.log")"
	rm -rf "$W/vsecure" "$sp"
	rm -rf "$W/vtamper"
	verbs_reset
	log "done"
}

scenario_verbs_invalidate() {
	need_rxe
	need_containerd
	verbs_reset
	vbuild 2 || fail "cache build or check failed"
	fact check_initial "$(vcache check | cut -d: -f1)"
	vstart vold cached
	vexec vold /bin/sh -c 'echo "ld_preload=$LD_PRELOAD"'

	# A second netdev for rxe1: dummy0 when the guest kernel can make one
	# (the dummy module is not in the test initramfs), else lo, which rxe
	# accepts as well.
	nd=lo
	if ip link add dummy0 type dummy 2>/dev/null; then
		ip link set dummy0 up
		ip addr add 10.0.3.15/24 dev dummy0
		nd=dummy0
	fi
	log "add rxe1 on $nd"
	fact rxe1_netdev "$nd"
	rdma link add rxe1 type rxe netdev "$nd" || fail "rdma link add rxe1 type rxe netdev $nd"
	wait_ibdev rxe1 'uverbs*'
	rdma link show
	ibv_devices
	fact host_devices "$(ibv_devices | awk 'NR > 2 {print $1}' | sort | tr '\n' ' ' | sed 's/ *$//')"
	out=$(vcache check 2>&1)
	fact check_after_add_exit $?
	echo "$out"
	fact check_after_add "$(echo "$out" | head -n1)"

	log "new containers: the cache is stale, so they run stock and see both devices"
	vrun vnew "" /bin/sh -c 'echo "ld_preload=$LD_PRELOAD"; echo "devices=$(ibv_devices | awk "NR > 2 {print \$1}" | sort | tr "\n" " ")"' >"$W/vnew.log" 2>&1
	cat "$W/vnew.log"
	fact new_ld_preload "$(sed -n 's/^ld_preload=//p' "$W/vnew.log")"
	fact new_devices "$(sed -n 's/^devices=//p' "$W/vnew.log" | sed 's/ *$//')"
	vrun vnew2 cached /bin/sh -c 'echo "ld_preload=$LD_PRELOAD"; echo "devices=$(ibv_devices | awk "NR > 2 {print \$1}" | sort | tr "\n" " ")"' >"$W/vnew2.log" 2>&1
	cat "$W/vnew2.log"
	fact new_cached_ld_preload "$(sed -n 's/^ld_preload=//p' "$W/vnew2.log")"
	fact new_cached_devices "$(sed -n 's/^devices=//p' "$W/vnew2.log" | sed 's/ *$//')"
	sleep 1
	grep 'verbs cache is stale' "$R/containerd.log" | tail -n 2
	fact shim_warned "$(grep -c 'verbs cache is stale (device rxe1 (uverbs1) added)' "$R/containerd.log")"

	log "a container started before the change: the preload notices (and its /dev has uverbs0 only)"
	vprobe vold old '^swiftverbs: verbs cache is stale (device rxe1 (uverbs1) is not in the cache)'

	log "rebuild: valid again, and cached containers see both devices"
	vbuild 2 || fail "rebuild failed"
	fact check_rebuilt "$(vcache check | cut -d: -f1)"
	vrun vre cached /bin/sh -c 'echo "ld_preload=$LD_PRELOAD"; echo "devices=$(ibv_devices | awk "NR > 2 {print \$1}" | sort | tr "\n" " ")"; swift-profile --runs 1 --device rxe0 --pingpong 10' >"$W/vre.log" 2>&1
	cat "$W/vre.log"
	fact rebuilt_devices "$(sed -n 's/^devices=//p' "$W/vre.log" | sed 's/ *$//')"
	fact rebuilt_cache_state "$(sed -n 's/^run=.* cache=\([a-z]*\) .*/\1/p' "$W/vre.log" | head -n1)"

	log "register rxe1 again (deleted and added on $nd): same name, number and GUID, a new registration"
	vstart vrereg cached
	before="$(cat /sys/class/infiniband_verbs/uverbs1/dev /sys/class/infiniband/rxe1/node_guid | tr '\n' ' ')"
	rdma link delete rxe1 || fail "rdma link delete rxe1"
	rdma link add rxe1 type rxe netdev "$nd" || fail "rdma link add rxe1 again"
	wait_ibdev rxe1 uverbs1
	after="$(cat /sys/class/infiniband_verbs/uverbs1/dev /sys/class/infiniband/rxe1/node_guid | tr '\n' ' ')"
	echo "before: $before; after: $after"
	[ "$before" = "$after" ] && fact rereg_same_numbers_and_guid yes
	out=$(vcache check 2>&1)
	fact check_after_rereg_exit $?
	echo "$out"
	fact check_after_rereg "$(echo "$out" | head -n1 | sed 's/ (class entry inode .*//')"
	vprobe vrereg rereg '^swiftverbs: verbs cache is stale (device rxe1 (uverbs1) was registered again since the cache was built)'
	vbuild 2 || fail "rebuild after registering rxe1 again failed"
	fact check_rebuilt_rereg "$(vcache check | cut -d: -f1)"

	log "remove rxe1, which the cache knows"
	vstart vkeep cached
	rdma link delete rxe1 || fail "rdma link delete rxe1"
	sleep 1
	out=$(vcache check 2>&1)
	fact check_after_remove_exit $?
	echo "$out"
	fact check_after_remove "$(echo "$out" | head -n1)"
	vprobe vkeep removed '^swiftverbs: verbs cache is stale (device rxe1 (uverbs1) is gone)'

	zstop vold vrereg vkeep
	verbs_reset
	log "done"
}

scenario_verbs_bench() {
	need_rxe
	need_containerd
	n=${SWIFTVM_VERBS_RUNS:-20}
	rounds=4
	per=$(((n + rounds - 1) / rounds))
	verbs_reset
	vbuild 3 || fail "cache build or check failed"
	vcache show
	vstart vbstock stock
	vstart vbcached cached
	vstart vbtrimmed trimmed
	for a in "" -noaslr; do
		for p in stock cached trimmed static bindnow; do
			: >"$R/verbs-bench-$p$a.prof"
		done
	done
	# Alternate rounds so that drift (page cache, TCG translation cache)
	# hits both paths alike; one warm-up exec each first. Each round runs
	# the three paths with address space randomization (as deployed) and
	# without it (swift-profile --no-aslr: QEMU then reuses its translation
	# of library code across processes, closer to what a real CPU pays).
	vexec vbstock swift-profile --runs 1 --device rxe0 --pingpong 0 >/dev/null 2>&1
	vexec vbcached swift-profile --runs 1 --device rxe0 --pingpong 0 >/dev/null 2>&1
	vexec vbtrimmed swift-profile --runs 1 --device rxe0 --pingpong 0 >/dev/null 2>&1
	r=0
	while [ $r -lt $rounds ]; do
		log "round $((r + 1))/$rounds: $per runs each"
		for a in "" -noaslr; do
			flag=${a:+--no-aslr}
			# shellcheck disable=SC2086
			vexec vbstock swift-profile --runs "$per" --device rxe0 --pingpong 10 $flag >>"$R/verbs-bench-stock$a.prof" 2>>"$W/vbstock.err"
			# shellcheck disable=SC2086
			vexec vbcached swift-profile --runs "$per" --device rxe0 --pingpong 10 $flag >>"$R/verbs-bench-cached$a.prof" 2>>"$W/vbcached.err"
			# provider trimming alone
			# shellcheck disable=SC2086
			vexec vbtrimmed swift-profile --runs "$per" --device rxe0 --pingpong 10 $flag >>"$R/verbs-bench-trimmed$a.prof" 2>>"$W/vbtrimmed.err"
			# toward the bound: the same with every symbol bound at load
			# shellcheck disable=SC2086
			vexec vbtrimmed env LD_BIND_NOW=1 swift-profile --runs "$per" --device rxe0 --pingpong 10 $flag >>"$R/verbs-bench-bindnow$a.prof" 2>>"$W/vbtrimmed.err"
			# every provider linked in: no provider to load at all (reference)
			# shellcheck disable=SC2086
			vexec vbstock swift-profile-static --runs "$per" --device rxe0 --pingpong 10 $flag >>"$R/verbs-bench-static$a.prof" 2>>"$W/vbstock.err"
		done
		r=$((r + 1))
	done
	# What the cache costs processes that never use RDMA: a dynamically
	# linked true in the cached container as it is, against the same with
	# LD_PRELOAD removed; and with libswiftverbs.so preloaded, as the cache
	# was delivered before it became a provider entry.
	for a in "" -noaslr; do
		flag=${a:+--no-aslr}
		for how in "" _preload; do
			k=spawn$how
			[ -n "$a" ] && k=spawn${how}_noaslr
			pre=
			[ -n "$how" ] && pre="--preload /.swift/verbs/libswiftverbs.so"
			# shellcheck disable=SC2086
			line=$(vexec vbcached swift-spawn --runs 40 $flag $pre /usr/bin/true-dyn 2>>"$W/vbcached.err")
			echo "$line"
			for f in plain_us with_us overhead_us aslr preload; do
				fact "${k}_$f" "$(echo "$line" | tr ' ' '\n' | sed -n "s/^$f=//p")"
			done
		done
	done
	for a in "" -noaslr; do
		cat "$R/verbs-bench-stock$a.prof" "$R/verbs-bench-cached$a.prof" "$R/verbs-bench-trimmed$a.prof" "$R/verbs-bench-static$a.prof" \
			"$R/verbs-bench-bindnow$a.prof"
	done
	echo "--- stderr"
	cat "$W/vbstock.err" "$W/vbcached.err" "$W/vbtrimmed.err"
	fact runs "$n"
	for a in "" -noaslr; do
		for p in stock cached trimmed static bindnow; do
			f="$R/verbs-bench-$p$a.prof"
			k=$p
			[ -n "$a" ] && k="${p}_noaslr"
			fact "${k}_n" "$(grep -c '^run=[0-9]* exit=0 ' "$f")"
			fact "${k}_cache_state" "$(sed -n 's/^run=.* cache=\([a-z]*\) .*/\1/p' "$f" | sort -u | tr '\n' ' ' | sed 's/ *$//')"
			fact "${k}_aslr" "$(sed -n 's/^run=.* aslr=\([a-z]*\) .*/\1/p' "$f" | sort -u | tr '\n' ' ' | sed 's/ *$//')"
			fact "${k}_critical_us" "$(grep '^run=[0-9]* exit=0 ' "$f" | tr ' ' '\n' | sed -n 's/^critical_us=//p' | median)"
		done
	done
	zstop vbstock vbcached vbtrimmed
	verbs_reset
	log "done"
}
