# podnet.sh — pods on their own networks doing RDMA (sourced by
# scenarios.sh; runs on the 7.3 pair, whose rxe works per network
# namespace).
#
#   x-podnet, x-podnet-exclusive
#             rdma.pod_softroce on both nodes, a macvlan CNI network on the
#             link; in RDMA netns shared mode (x-podnet) or exclusive mode:
#             - a zygote pod on each node, on its own address, gets a
#               soft-RoCE device of its own (made in its namespace by the
#               shim), pre-connects to the other node's pod, and a forked
#               function passes checksummed messages across
#             - inside the pod, `ip addr` and the zygote's GID agree
#             - a second pod on node a gets a device of its own and cannot
#               open the first pod's (by name, nor by a node it makes with
#               mknod); in exclusive mode it does not even see it
#             - a pod of a tenant that may not use rxe0 is refused, and its
#               device goes with the refusal
#             - the pods deleted, the node's links, devices, resources,
#               GIDs and RoCE sockets are what they were before
#
# Facts are prefixed with the mode: shared_*, exclusive_*.

# pn_state: what the node holds of RDMA: links, devices (and uverbs),
# resource counts, rxe0's GIDs and the RoCE sockets of its namespace.
pn_state() {
	echo "links: $(rdma link show 2>&1 | sort | tr '\n' ' ')"
	echo "devices: $(ls /sys/class/infiniband 2>&1 | tr '\n' ' ')"
	echo "uverbs: $(ls /sys/class/infiniband_verbs 2>&1 | tr '\n' ' ')"
	echo "resources: $(rdma resource show 2>&1 | sort | tr '\n' ' ')"
	echo "gids: $(cat /sys/class/infiniband/rxe0/ports/1/gids/* 2>/dev/null | grep -v '^0000:0000:0000:0000:0000:0000:0000:0000$' | sort | tr '\n' ' ')"
	echo "sockets: $(awk 'NR>1 && $2 ~ /:12B7$/ {print $2}' /proc/net/udp /proc/net/udp6 | sort | tr '\n' ' ')"
}

# pn_pod FILE NAME NAMESPACE ZYGOTE ANNOTATION...: the CRI config of a pod
# on the CNI network (its own network namespace) that opts in to RDMA.
pn_pod() {
	local f=$1 pname=$2 ns=$3 zyg=$4 a extra=
	shift 4
	for a in "$@"; do
		extra="$extra,
    $a"
	done
	mkdir -p "$W/podlogs/$pname"
	cat >"$f" <<JSON
{
  "metadata": {"name": "$pname", "namespace": "$ns", "uid": "$pname-$ns-$(cat /proc/sys/kernel/random/uuid)"},
  "log_directory": "$W/podlogs/$pname",
  "linux": {"security_context": {"namespace_options": {"pid": 1}}},
  "annotations": {
    "swift.io/rdma": "true",
    "swift.io/zygote": "$zyg",
    "swift.io/zygote-container": "worker"$extra
  }
}
JSON
}

# pn_run POD-JSON: run the pod and its worker; prints "POD WORKER".
pn_run() {
	local pod wid
	pod=$(crictl_ runp --runtime swift "$1") || return 1
	wid=$(crictl_ create "$pod" "$W/pn-worker.json" "$1") || return 1
	if ! crictl_ start "$wid" >"$W/pn-start.err" 2>&1; then
		echo "$pod $wid failed"
		return 0
	fi
	echo "$pod $wid"
}

# pn_status WORKER PEER: the zygote's status once its peer is connected
# (90 s at most).
pn_status() {
	local i=0 st=
	while [ $i -lt 90 ]; do
		st=$(crictl_ exec "$1" /.swift/bin/swift-run --status 2>&1)
		echo "$st" | grep -q "^peer $2\.default .* connected " && break
		sleep 1
		i=$((i + 1))
	done
	echo "$st"
}

# pn_mode MODE: one round in RDMA netns mode MODE (shared or exclusive).
pn_mode() {
	local m=$1 me peer myip peerip st dev gidx gid podgid out
	STEP="$m: mode"
	if [ "$m" = exclusive ]; then
		# only while no other network namespace exists: a deleted pod's
		# goes a moment after it
		i=0
		until out=$(rdma system set netns exclusive 2>&1); do
			i=$((i + 1))
			if [ $i -ge 20 ]; then
				fact "${m}_set" "$out"
				return 0
			fi
			sleep 0.5
		done
	fi
	fact "${m}_set" "$(rdma system show | grep -o 'netns [a-z]*')"
	before=$(pn_state)
	echo "$before"
	# fresh addresses each round: a's pods take .101 and .102, b's .111
	rm -rf "$W/cni/ipam-pn"
	if [ "$NODE" = a ]; then
		range='"rangeStart": "10.0.3.101", "rangeEnd": "10.0.3.109"'
		myip=10.0.3.101 peerip=10.0.3.111 me=pna peer=pnb
	else
		range='"rangeStart": "10.0.3.111", "rangeEnd": "10.0.3.119"'
		myip=10.0.3.111 peerip=10.0.3.101 me=pnb peer=pna
	fi
	cninet podnet '{"type": "macvlan", "master": "eth0", "mode": "bridge",
	  "ipam": {"type": "host-local", "dataDir": "'"$W"'/cni/ipam-pn", "ranges": [[{"subnet": "10.0.3.0/24", '"$range"'}]]}}'

	STEP="$m: zygote pod"
	pn_pod "$W/$me.json" "$me" default true '"swift.io/pool": "2"' '"swift.io/listen": "18515"' \
		"\"swift.io/peers\": \"$peer-worker=$peerip:18515\""
	r=$(pn_run "$W/$me.json") || fail "crictl runp/create $me failed"
	set -- $r
	pod=$1 wid=$2
	[ "${3:-}" != failed ] || { cat "$W/pn-start.err"; fail "the zygote pod $me did not start"; }
	fact "${m}_pod_ip" "$(podip "$pod")"
	st=$(pn_status "$wid" "$peer-worker")
	echo "$st"
	fact "${m}_peer" "$(echo "$st" | sed -n "s/^peer $peer-worker\.default [^ ]* \([a-z]*\) .*/\1/p")"
	dev=$(echo "$st" | sed -n 's/^zygote .* device \([^ ]*\) .*/\1/p')
	gidx=$(echo "$st" | sed -n 's/^zygote .* gid \([0-9]*\).*/\1/p')
	fact "${m}_dev" "$dev"
	fact "${m}_dev_own" "$(case "$dev" in swp[0-9]*) echo 1 ;; *) echo 0 ;; esac)"
	# inside the pod: its address (ip addr), the device's GID the zygote uses
	out=$(crictl_ exec "$wid" /bin/sh -c "ip -4 -o addr show | sed 's/^/addr /'; echo \"gid \$(cat /sys/class/infiniband/$dev/ports/1/gids/$gidx)\"; echo \"sees \$(ls /sys/class/infiniband | tr '\n' ' ')\"; sed 's/^/max /' /sys/fs/cgroup/rdma.max; echo \"ns \$(readlink /proc/self/ns/net)\"" 2>&1)
	echo "$out"
	podaddr=$(echo "$out" | awk '$1 == "addr" && $3 != "lo" && $4 == "inet" {sub("/.*", "", $5); print $5; exit}')
	fact "${m}_ip_addr" "$podaddr"
	gid=$(echo "$out" | sed -n 's/^gid //p')
	fact "${m}_gid_agree" "$([ -n "$podaddr" ] && [ "$gid" = "$(v4gid "$podaddr")" ] && echo 1 || echo 0)"
	fact "${m}_pod_sees" "$(echo "$out" | sed -n 's/^sees //p' | sed 's/ *$//')"
	# the device is named after the pod's own network namespace
	fact "${m}_dev_of_ns" "$([ "swp$(echo "$out" | sed -n 's/^ns net:\[\([0-9]*\)\]$/\1/p')" = "$dev" ] && echo 1 || echo 0)"
	fact "${m}_rdma_max" "$(echo "$out" | sed -n "s/^max \($dev .*\)/\1/p" | sed "s/ *$//" | head -1)"
	fact "${m}_sock_in_pod" "$(awk 'NR>1 && $2 ~ /:12B7$/' "/proc/$(cpid "$wid")/net/udp" | wc -l)"
	# a second opted-in container of the pod gets the pod's device (the
	# one made for the first, checked by its node GUID)
	sed 's/"name": "worker"/"name": "sidecar"/; s/worker.log/sidecar.log/' "$W/pn-worker.json" >"$W/pn-sidecar.json"
	sid=$(crictl_ create "$pod" "$W/pn-sidecar.json" "$W/$me.json") || fail "crictl create sidecar failed"
	crictl_ start "$sid" >/dev/null || fail "crictl start sidecar failed"
	fact "${m}_sidecar_dev" "$(crictl_ exec "$sid" /bin/sh -c 'echo $SWIFT_RDMA_DEVICES')"
	xsync "$m-connected" 180

	STEP="$m: messages"
	if [ "$NODE" = b ]; then
		crictl_ exec "$wid" /.swift/bin/swift-run --peer "$peer-worker" --all -- echo 20000 >"$W/pn-echo.log" 2>&1 &
		epid=$!
		sleep 2
		xsync "$m-echo"
		xsync "$m-used" 300
		wait $epid
		cat "$W/pn-echo.log"
	else
		xsync "$m-echo"
		out=$(crictl_ exec "$wid" /.swift/bin/swift-run --peer "$peer-worker" -- pingpong 1000 256 2>&1)
		echo "$out"
		fact "${m}_verified" "$(echo "$out" | sed -n 's/^pingpong: sent [0-9]*, verified \([0-9]*\),.*/\1/p')"
		xsync "$m-used"
	fi

	[ "$m" = shared ] && pn_bench "$wid" "$peer"

	if [ "$NODE" = a ]; then
		STEP="$m: a second pod"
		nuv() { ls /sys/class/infiniband_verbs | grep -c '^uverbs'; }
		u0=$(nuv)
		pn_pod "$W/pn2.json" pn2 default false
		r=$(pn_run "$W/pn2.json") || fail "crictl runp/create pn2 failed"
		set -- $r
		pod2=$1 wid2=$2
		[ "${3:-}" != failed ] || { cat "$W/pn-start.err"; fail "the second pod did not start"; }
		out=$(crictl_ exec "$wid2" /bin/sh -c 'echo "own=$SWIFT_RDMA_DEVICES"; echo "sees=$(ls /sys/class/infiniband | tr "\n" " ")"; ls /dev/infiniband' 2>&1)
		echo "$out"
		dev2=$(echo "$out" | sed -n 's/^own=//p')
		fact "${m}_pn2_dev" "$dev2"
		fact "${m}_pn2_distinct" "$([ -n "$dev2" ] && [ "$dev2" != "$dev" ] && echo 1 || echo 0)"
		fact "${m}_pn2_sees_first" "$(echo "$out" | grep '^sees=' | grep -cw "$dev")"
		# open the first pod's device by name, then by a node of its numbers
		if crictl_ exec "$wid2" ibv_devinfo -d "$dev" >"$W/pn2-open.out" 2>&1; then
			fact "${m}_pn2_opens_by_name" 1
		else
			fact "${m}_pn2_opens_by_name" 0
		fi
		cat "$W/pn2-open.out"
		uv=$(grep -lx "$dev" /sys/class/infiniband_verbs/uverbs*/ibdev | head -1)
		nums=$(cat "$(dirname "$uv")/dev")
		out=$(crictl_ exec "$wid2" /bin/sh -c "mknod /tmp/stolen c ${nums%%:*} ${nums##*:} && echo MADE && exec 3<>/tmp/stolen && echo OPENED" 2>&1)
		echo "mknod ${nums}: $out"
		fact "${m}_pn2_mknod_made" "$(echo "$out" | grep -c MADE)"
		fact "${m}_pn2_opens_by_mknod" "$(echo "$out" | grep -c OPENED)"
		crictl_ stopp "$pod2" >/dev/null && crictl_ rmp "$pod2" >/dev/null || fail "crictl rmp pn2 failed"
		i=0
		while [ "$(nuv)" != "$u0" ] && [ $i -lt 40 ]; do
			sleep 0.5
			i=$((i + 1))
		done
		fact "${m}_pn2_dev_gone" "$([ "$(nuv)" = "$u0" ] && echo 1 || echo 0)"

		STEP="$m: a tenant that may not use rxe0"
		pn_pod "$W/pnx.json" pnx other false
		r=$(pn_run "$W/pnx.json") || fail "crictl runp/create pnx failed"
		set -- $r
		podx=$1
		fact "${m}_other_refused" "$([ "${3:-}" = failed ] && echo 1 || echo 0)"
		cat "$W/pn-start.err"
		errfact "${m}_other_error" "$W/pn-start.err" 'the pod.s own device swp[0-9]* (on its eth0) is admitted as the node device under it: device rxe0 is allocated to the container, but tenant t9 may not use it'
		# the device made for it went with the refusal (its pod still exists)
		fact "${m}_other_devs" "$(($(nuv) - u0))"
		crictl_ stopp "$podx" >/dev/null && crictl_ rmp "$podx" >/dev/null || fail "crictl rmp pnx failed"

		if [ "$m" = shared ]; then
			# a pod whose namespace holds UDP 4791 before its RDMA
			# container (a process of the pod squatting on RoCE's port,
			# which on a kernel before 7.1 would pass the socket check):
			# refused, and no device is made
			STEP="$m: a squatter on UDP 4791"
			pn_pod "$W/psq.json" psq default false
			psq=$(crictl_ runp --runtime swift "$W/psq.json") || fail "crictl runp psq failed"
			ppid=$(crictl_ inspectp -o go-template --template '{{.info.pid}}' "$psq")
			nsenter -t "$ppid" -n python3 -c 'import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", 4791)); time.sleep(120)' &
			sq=$!
			sleep 1
			u1=$(nuv)
			if wsq=$(crictl_ create "$psq" "$W/pn-worker.json" "$W/psq.json") && crictl_ start "$wsq" >"$W/pn-start.err" 2>&1; then
				fact "${m}_squat_refused" 0
			else
				fact "${m}_squat_refused" 1
			fi
			cat "$W/pn-start.err"
			errfact "${m}_squat_error" "$W/pn-start.err" 'rdma.pod_softroce: the pod.s network namespace net:\[[0-9]*\] already has a socket on UDP port 4791'
			fact "${m}_squat_devs" "$(($(nuv) - u1))"
			kill $sq 2>/dev/null
			wait $sq 2>/dev/null
			crictl_ stopp "$psq" >/dev/null && crictl_ rmp "$psq" >/dev/null || fail "crictl rmp psq failed"
		fi
		if [ "$m" = exclusive ]; then
			# hooks.exclusive_move of a node device, rxe9 (made for this on
			# a macvlan of eth0 in the node's namespace; rxe0 stays out of
			# it: a device moved out and back loses its MAD QP1): the
			# kernel moves it, but its socket is the node's, so netcheck
			# refuses the pod and the device is moved back at once
			STEP="$m: exclusive_move of a node device"
			ip link add mvt link eth0 type macvlan mode bridge && ip link set mvt up &&
				rdma link add rxe9 type rxe netdev mvt || fail "cannot make rxe9 on a macvlan of eth0"
			cp "$W/swift.toml" "$W/swift.pn.toml"
			sed -i '/^pod_softroce = /d; s/^\[hooks\]$/[hooks]\nexclusive_move = true/' "$W/swift.toml"
			pn_pod "$W/pmv.json" pmv default false '"swift.io/devices": "rxe9"'
			r=$(pn_run "$W/pmv.json") || fail "crictl runp/create pmv failed"
			set -- $r
			fact "${m}_move_refused" "$([ "${3:-}" = failed ] && echo 1 || echo 0)"
			cat "$W/pn-start.err"
			errfact "${m}_move_error" "$W/pn-start.err" 'device rxe9 [^:]*net:\[[0-9]*\]'
			fact "${m}_move_home" "$(ls /sys/class/infiniband | grep -cx rxe9)"
			crictl_ stopp "$1" >/dev/null && crictl_ rmp "$1" >/dev/null || fail "crictl rmp pmv failed"
			rdma link del rxe9 && ip link del mvt || fail "cannot delete rxe9"
			mv "$W/swift.pn.toml" "$W/swift.toml"
		fi
	fi
	xsync "$m-checked" 300

	STEP="$m: pods deleted"
	crictl_ stopp "$pod" >/dev/null && crictl_ rmp "$pod" >/dev/null || fail "crictl rmp $me failed"
	rm -f "$W/cni/net.d/"*
	# the kernel removes a namespace's devices after the namespace is gone
	i=0
	after=$(pn_state)
	while [ "$after" != "$before" ] && [ $i -lt 40 ]; do
		sleep 0.5
		i=$((i + 1))
		after=$(pn_state)
	done
	echo "$after"
	fact "${m}_pods_left" "$(crictl_ pods -q | wc -l)"
	for k in links devices uverbs resources gids sockets; do
		fact "${m}_${k}_back" "$([ "$(echo "$before" | grep "^$k:")" = "$(echo "$after" | grep "^$k:")" ] && echo 1 || echo 0)"
	done
	[ "$after" = "$before" ] || {
		echo "before:"
		echo "$before"
	}
	xsync "$m-gone" 120
	if [ "$m" = exclusive ]; then
		rdma system set netns shared || fail "cannot go back to shared mode"
	fi
}

# pn_setup: the node's config (rdma.pod_softroce, a tenant policy: t1
# for namespace default, limited to rxe0; t9 for namespace other, to
# rxe9) and the worker container's CRI config.
pn_setup() {
	need_pair
	need_rxe
	need_containerd
	[ -x "$SWIFTVM_CRICTL_DIR/crictl" ] || fail "crictl missing in SWIFTVM_CRICTL_DIR=$SWIFTVM_CRICTL_DIR (make deps)"
	for p in macvlan host-local loopback; do
		[ -x "${SWIFTVM_CNI_DIR:-/nonexistent}/$p" ] ||
			fail "CNI plugin $p missing in SWIFTVM_CNI_DIR=${SWIFTVM_CNI_DIR:-} (make deps builds them into \$SWIFT_CNI_BIN)"
	done
	fact kernel "$(uname -r)"
	# pods an earlier scenario left would hold network namespaces
	crictl_ rmp -f -a >/dev/null 2>&1
	provision t1
	cat >"$W/policy.toml" <<EOF
[tenants.t1]
namespaces = ["default"]
devices = ["rxe0", "rxe9"]
fork_sharing = true
key_file = "/var/lib/swift/provisioned/t1.keys"

[tenants.t1.container]
qps = 16
hca_handle = 4
hca_object = 256

[tenants.t9]
namespaces = ["other"]
devices = ["rxe9"]
EOF
	policy_config
	echo 'pod_softroce = true' >>"$W/swift.toml"
	sed 's/^/    /' "$W/swift.toml"
	cat >"$W/pn-worker.json" <<JSON
{
  "metadata": {"name": "worker"},
  "image": {"image": "swift.local/vmroot:1"},
  "command": ["/bin/sleep", "3600"],
  "envs": [{"key": "PATH", "value": "/usr/sbin:/usr/bin:/sbin:/bin"}],
  "log_path": "worker.log",
  "linux": {"security_context": {"namespace_options": {"pid": 1}}}
}
JSON
}

# pn_bench WORKER PEER: x-bench's swift mode and fork start between the
# two zygote pods on their own networks (make bench: data.podnet.*):
# three rounds of pingpong and bw to b's echo function, then fork start on
# a, a plain fork against one with a QP to b.
pn_bench() {
	local wid=$1 peer=$2 r out nlat=${SWIFTVM_BENCH_LAT:-2000} nbw=${SWIFTVM_BENCH_BW:-20000} nfork=${SWIFTVM_BENCH_RUNS:-30}
	STEP="podnet bench"
	for r in 1 2 3; do
		if [ "$NODE" = b ]; then
			crictl_ exec "$wid" /.swift/bin/swift-run --peer "$peer-worker" --all -- echo 5000 >"$W/pn-echo-$r.log" 2>&1 &
			p=$!
			sleep 2
			xsync "pn-swift-$r"
			wait $p
			cat "$W/pn-echo-$r.log"
			xsync "pn-round-$r" 300
			continue
		fi
		xsync "pn-swift-$r"
		crictl_ exec "$wid" /.swift/bin/swift-run --peer "$peer-worker" -- pingpong "$nlat" 240 >"$W/pn-lat-$r.log" 2>&1
		crictl_ exec "$wid" /.swift/bin/swift-run --peer "$peer-worker" -- bw "$nbw" 240 >"$W/pn-bw-$r.log" 2>&1
		cat "$W/pn-lat-$r.log" "$W/pn-bw-$r.log"
		xsync "pn-round-$r" 300
	done
	if [ "$NODE" = b ]; then
		fact bench_echo_bad "$(cat "$W"/pn-echo-*.log | sed -n 's/^echo: .* \([0-9]*\) bad$/\1/p' | awk '{s += $1} END {print s + 0}')"
		xsync pn-fork 600
		return
	fi
	fact bench_lat_n "$nlat"
	fact bench_lat_us "$(cat "$W"/pn-lat-*.log | sed -n 's/.*rtt median \([0-9.]*\) us.*/\1/p' | median)"
	fact bench_p99_us "$(cat "$W"/pn-lat-*.log | sed -n 's/.* p99 \([0-9.]*\) us.*/\1/p' | median)"
	fact bench_msgs "$(cat "$W"/pn-bw-*.log | sed -n 's/.* \([0-9]*\) msg\/s.*/\1/p' | median)"
	fact bench_verified "$(cat "$W"/pn-lat-*.log | sed -n 's/.*verified \([0-9]*\),.*/\1/p' | awk '{s += $1} END {print s + 0}')"
	out=$(crictl_ exec "$wid" /bin/sh -c "i=0; while [ \$i -lt $nfork ]; do
		echo mode plain; /.swift/bin/swift-run --no-qp --time -- noop 2>&1
		echo mode swift; /.swift/bin/swift-run --peer $peer-worker --time -- noop 2>&1
		i=\$((i + 1)); done" 2>&1 | awk '$1 == "mode" {k = $2} /total_us/ {print k, $11}')
	echo "$out"
	fact bench_fork_runs "$nfork"
	for k in plain swift; do
		fact "bench_fork_${k}_n" "$(echo "$out" | grep -c "^$k ")"
		fact "bench_fork_${k}_us" "$(echo "$out" | sed -n "s/^$k //p" | median)"
	done
	xsync pn-fork
}

scenario_x_podnet() {
	pn_setup
	pn_mode shared
	cp "$W/swift.default.toml" "$W/swift.toml"
}

scenario_x_podnet_exclusive() {
	pn_setup
	pn_mode exclusive
	fact mode_after "$(rdma system show | grep -o 'netns [a-z]*')"
	cp "$W/swift.default.toml" "$W/swift.toml"
}
