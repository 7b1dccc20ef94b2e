# xscenarios.sh — the scenarios of a pair of guests (sourced by
# scenarios.sh). Both guests run every scenario; each does its node's part
# (SWIFTVM_NODE is a or b) and they meet at barriers in the directory both
# mount. Facts are per node; the host reads them as a.KEY and b.KEY.
#
#   x-data     a zygote on each node, pre-connected over the link: a forked
#              function on a exchanges 1,000 checksummed messages with an
#              echo function on b
#   x-keys     b refuses zygotes holding another tenant's key, a rotated-out
#              key, no key; accepts the key before its newest
#   x-tamper   a relay that changes one byte after authentication: both
#              sides refuse, nothing is connected
#   x-restart  b's zygote deleted and created again: a reconnects, counts
#              return; the link down for 3 s heals
#   x-cri      a pod through CRI on a: a sidecar and a zygote container
#              (default name) that connects to b's and passes data
NODE=${SWIFTVM_NODE:-}
PEER=${SWIFTVM_PEER:-}
MYIP=${SWIFTVM_NODE_IP:-}
PEERIP=${SWIFTVM_PEER_IP:-}
XS=/run/swiftvm-shared

need_pair() {
	[ -n "$NODE" ] && [ -d "$XS" ] || fail "scenario $name runs on a pair of guests (x- scenarios)"
}

# xsync STEP [SECONDS]: wait (default 120 s) until the other node reached STEP too.
xsync() {
	touch "$XS/$name.$NODE.$1"
	i=0
	while [ ! -e "$XS/$name.$PEER.$1" ]; do
		i=$((i + 1))
		[ $i -lt $((${2:-120} * 10)) ] || fail "node $PEER never reached $1 of $name"
		sleep 0.1
	done
}

# xput KEY VALUE / xget KEY: hand a value to the other node (after a sync).
xput() { printf '%s' "$2" >"$XS/$name.$NODE.val.$1.tmp" && mv "$XS/$name.$NODE.val.$1.tmp" "$XS/$name.$NODE.val.$1"; }
xget() { cat "$XS/$name.$PEER.val.$1" 2>/dev/null; }

# provision TENANT: the same keyring on both nodes, as an operator
# provisions it: node a generates it, both install it in keys_dir.
provision() {
	if [ "$NODE" = a ]; then
		rm -f "$XS/$name.$1.keys"
		swiftctl keys gen --id "${2:-k1}" "$XS/$name.$1.keys" || fail "swiftctl keys gen"
	fi
	xsync "key-$1"
	mkdir -p /var/lib/swift/provisioned
	install -m 0400 "$XS/$name.$1.keys" "/var/lib/swift/provisioned/$1.keys" || fail "cannot install the keyring"
	swiftctl keys show "/var/lib/swift/provisioned/$1.keys"
}

scenario_x_data() {
	need_pair
	need_rxe
	need_containerd
	# the link itself: ibv_rc_pingpong between the guests, 256 B
	if [ "$NODE" = b ]; then
		ibv_rc_pingpong -d rxe0 -g 1 -n 500 -s 256 >"$W/rawpp.log" 2>&1 &
		rpid=$!
		xsync raw-server
		wait $rpid
	else
		xsync raw-server
		for i in 1 2 3 4 5 6 7 8 9 10; do
			ibv_rc_pingpong -d rxe0 -g 1 -n 500 -s 256 "$PEERIP" >"$W/rawpp.log" 2>&1 && break
			sleep 0.5
		done
		cat "$W/rawpp.log"
		fact raw_rtt_us "$(sed -n 's/.* = \([0-9.]*\) usec\/iter/\1/p' "$W/rawpp.log")"
	fi
	xsync raw-done
	provision t1
	# node b's root (as a host-network pod with CAP_NET_RAW would) sniffs
	# the exchange and the RoCE packets on the link
	if [ "$NODE" = b ]; then
		/run/swiftvm/rootfs/usr/bin/sniff 90 18515 18515 >"$W/xsniff.out" 2>&1 &
		snf=$!
	fi
	zrun "x$NODE" "x$NODE" 18515 t1 "x$PEER=$PEERIP:18515" 2
	zwait "x$NODE" "x$PEER" connected || fail "x$NODE never connected to x$PEER"
	st=$(zexec "x$NODE" /.swift/bin/swift-run --status)
	echo "$st"
	fact pool "$(echo "$st" | sed -n "s/^peer x$PEER .* \(free [0-9]* assigned [0-9]*\)/\1/p")"
	if [ "$NODE" = b ]; then
		zexec xb /.swift/bin/swift-run --peer xa --all -- echo 20000 >"$W/xecho.log" 2>&1 &
		epid=$!
		sleep 2
		xsync echo
		xsync pingpong 300
		wait $epid
		cat "$W/xecho.log"
		fact echo "$(grep '^echo: [0-9]* messages' "$W/xecho.log")"
		kill "$snf" 2>/dev/null
		wait "$snf" 2>/dev/null
		sniffed "$st" xa "$W/xsniff.out"
	else
		xsync echo
		out=$(zexec xa /.swift/bin/swift-run --peer xb --time -- pingpong 1000 256 2>&1)
		echo "$out"
		fact pingpong_verified "$(echo "$out" | sed -n 's/^pingpong: sent [0-9]*, verified \([0-9]*\),.*/\1/p')"
		fact rtt_us "$(echo "$out" | sed -n 's/.*rtt median \([0-9.]*\) us.*/\1/p')"
		xsync pingpong
	fi
	echo "--- x$NODE.out"
	cat "$W/x$NODE.out"
	zstop "x$NODE"
}

# zcount ID: the zygote of container ID: its fds and its verbs objects.
zcount() {
	p=$(zpid "$1")
	[ -n "$p" ] || { echo "none none"; return; }
	o=0
	for k in qp cq mr pd; do
		o=$((o + $(rdma resource show "$k" 2>/dev/null | grep -c " pid $p ")))
	done
	echo "$(ls "/proc/$p/fd" | wc -l) $o"
}

# x-keys: node b's zygote (tenant t1, keyring k3 then k2: rotated twice)
# refuses, one after the other, a zygote on node a holding another
# tenant's key, a rotated-out key (k1) and no provisioned key; and accepts
# one holding k2, the key before the newest, still in b's ring.
scenario_x_keys() {
	need_pair
	need_rxe
	need_containerd
	if [ "$NODE" = a ]; then
		swiftctl keys gen --id k1 "$XS/$name.r" >/dev/null || fail "keys gen"
		cp "$XS/$name.r" "$XS/$name.k1.keys"
		swiftctl keys rotate --id k2 "$XS/$name.r" >/dev/null || fail "keys rotate"
		grep '^k2 ' "$XS/$name.r" >"$XS/$name.k2.keys"
		swiftctl keys rotate --id k3 "$XS/$name.r" >/dev/null || fail "keys rotate"
		cp "$XS/$name.r" "$XS/$name.b.keys"
		swiftctl keys gen --id t2key "$XS/$name.t2.keys" >/dev/null || fail "keys gen"
	fi
	xsync rings
	mkdir -p /var/lib/swift/provisioned
	if [ "$NODE" = b ]; then
		install -m 0400 "$XS/$name.b.keys" /var/lib/swift/provisioned/t1.keys
		swiftctl keys show /var/lib/swift/provisioned/t1.keys
		zrun xb xb 18515 t1 "xa=$PEERIP:18515" 2
		before=$(rdma resource show qp | wc -l)
		xsync b-up
		xsync cases-done 300
		after=$(rdma resource show qp | wc -l)
		echo "--- xb.out"
		cat "$W/xb.out"
		fact refused_other_tenant "$(grep -c 'refused peer xa at 10.0.3.1:[0-9]*: claims tenant t2, failed authentication for tenant t1' "$W/xb.out")"
		fact refused_rotated_out "$(grep -c 'refused peer xa at 10.0.3.1:[0-9]*: tenant t1: key k1 is not in this node.s keyring' "$W/xb.out")"
		fact refused_no_key "$(grep -c 'refused peer xa at 10.0.3.1:[0-9]*: tenant t1: key local is not in this node.s keyring' "$W/xb.out")"
		fact accepted_k2 "$(grep -c 'peer xa at 10.0.3.1:[0-9]*: 2 QP(s) connected; linked' "$W/xb.out")"
		fact qps_left "$((after - before))"
		zstop xb
		return
	fi
	xsync b-up
	# each case: install (or remove) a's ring for its tenant, start xa, wait
	keycase() { # CASE TENANT RING|none STATE
		rm -f /var/lib/swift/provisioned/*.keys /var/lib/swift/keys/*.keys
		[ "$3" = none ] || install -m 0400 "$XS/$name.$3.keys" "/var/lib/swift/provisioned/$2.keys"
		zrun xa xa 18515 "$2" "xb=$PEERIP:18515" 2
		if zwait xa xb "$4"; then fact "$1" "$4"; else fact "$1" "not-$4"; fi
		zexec xa /.swift/bin/swift-run --status | grep -c '^qp ' >"$W/$1.qps"
		fact "$1_qps" "$(cat "$W/$1.qps")"
		echo "--- xa.out ($1)"
		cat "$W/xa.out"
		zstop xa
	}
	keycase other_tenant t2 t2 refused
	keycase rotated_out t1 k1 refused
	keycase no_key t1 none refused
	keycase k2 t1 k2 connected
	xsync cases-done
}

# x-tamper: a relay on node a between a's zygote and b's changes one byte
# of the exchange after both proved the key: of a's QPs (to b), then of b's
# reply (to a). Each time both sides refuse, and neither keeps a QP.
scenario_x_tamper() {
	need_pair
	need_rxe
	need_containerd
	provision t1
	hc=/run/swiftvm/rootfs/usr/bin/hostile-client
	for dir in 0 1; do
		if [ "$NODE" = b ]; then
			zrun xb xb 18515 t1 "xa=$PEERIP:18600" 2
			before=$(rdma resource show qp | wc -l)
			xsync "up-$dir"
			xsync "tried-$dir" 120
			fact "b_qps_$dir" "$(zexec xb /.swift/bin/swift-run --status | grep '^qp ' | grep -vc ' state pending ')"
			fact "b_objects_$dir" "$(($(rdma resource show qp | wc -l) - before))"
			fact "b_refused_$dir" "$(grep -c 'refused peer xa at 10.0.3.1:[0-9]*: tenant t1: its QPs were changed in transit\|refused peer xa at 10.0.3.1:[0-9]*: closed the connection mid-exchange' "$W/xb.out")"
			echo "--- xb.out ($dir)"
			cat "$W/xb.out"
			zstop xb
			xsync "down-$dir"
			continue
		fi
		xsync "up-$dir"
		# a byte inside the QPs: the hello (8 + 3 names of 128 + key id 16
		# + nonce 16 + flags 4 + count 4 + ephemeral key 32 = 464), the
		# proof (32), the link proof (32), then QPs; back, the challenge
		# (nonce 16, ephemeral key 32, proof 32 = 80), the reply's status
		# and count (8), then QPs
		offset=$((464 + 64 + 10))
		[ "$dir" = 1 ] && offset=$((80 + 8 + 10))
		$hc flipproxy 10.0.3.1 18600 "$PEERIP" 18515 "$dir" "$offset" 12 >"$W/proxy-$dir.log" 2>&1 &
		ppid=$!
		sleep 0.5
		zrun xa xa 18515 t1 "xb=10.0.3.1:18600" 2
		sleep 8
		st=$(zexec xa /.swift/bin/swift-run --status)
		echo "$st"
		fact "a_state_$dir" "$(echo "$st" | sed -n 's/^peer xb [^ ]* \([a-z]*\) .*/\1/p')"
		# connected ones: a dial in flight holds pending rows, never usable
		fact "a_qps_$dir" "$(echo "$st" | grep '^qp ' | grep -vc ' state pending ')"
		fact "a_failed_$dir" "$(grep -c 'peer xb not connected (peer xb refused: Bad message)\|peer xb not connected (peer xb: its QPs were changed in transit' "$W/xa.out")"
		zstop xa
		kill $ppid 2>/dev/null
		wait $ppid
		cat "$W/proxy-$dir.log"
		fact "flipped_$dir" "$(sed -n 's/.* flipped=\([0-9]*\)/\1/p' "$W/proxy-$dir.log" | tail -n 1)"
		xsync "tried-$dir"
		xsync "down-$dir" 120
	done
}

# x-restart: node b's zygote container is deleted and created again; a's
# pool reconnects within a bound, its rows to the old b are gone, functions
# run again, and each side's fds and verbs objects are where they started.
# Then the link goes down for 3 s and comes back: the pool is the same
# (shorter than the link's timeout) and the first function passes data.
scenario_x_restart() {
	need_pair
	need_rxe
	need_containerd
	provision t1
	zrun "x$NODE" "x$NODE" 18515 t1 "x$PEER=$PEERIP:18515" 2
	zwait "x$NODE" "x$PEER" connected || fail "x$NODE never connected to x$PEER"
	sleep 1
	fact counts_before "$(zcount "x$NODE")"
	if [ "$NODE" = b ]; then
		xsync counted
		zstop xb
		xsync b-deleted
		sleep 2
		t0=$(date +%s%N)
		zrun xb xb 18515 t1 "xa=$PEERIP:18515" 2
		xput recreated "$t0"
		# when the new zygote answers (its exchange listens by then)
		i=0
		until zexec xb /.swift/bin/swift-run --status >/dev/null 2>&1 || [ $i -ge 80 ]; do sleep 0.1; i=$((i + 1)); done
		xput answering "$(date +%s%N)"
		xsync b-recreated
		zwait xb xa connected || fail "xb never reported xa connected again"
		sleep 1
		fact counts_after "$(zcount xb)"
		zexec xb /.swift/bin/swift-run --peer xa --all -- echo 15000 >"$W/xecho.log" 2>&1 &
		epid=$!
		sleep 2
		xsync echo
		xsync used 120
		wait $epid
		fact echo "$(grep '^echo: [0-9]* messages' "$W/xecho.log")"
		# serving again before a's link goes down, so a's first try
		# after the flap is what is measured
		zexec xb /.swift/bin/swift-run --peer xa --all -- echo 15000 >"$W/xecho2.log" 2>&1 &
		epid=$!
		sleep 2
		xsync echo2 120
		xsync used2 180
		wait $epid
		fact echo2 "$(grep '^echo: [0-9]* messages' "$W/xecho2.log")"
		echo "--- xb.out"
		cat "$W/xb.out"
		zstop xb
		return
	fi
	old=$(zexec xa /.swift/bin/swift-run --status | sed -n 's/^qp .* remote \([0-9]*\) .*/\1/p' | sort | tr '\n' ' ')
	xsync counted
	xsync b-deleted
	i=0
	while zexec xa /.swift/bin/swift-run --status | grep -q '^peer xb .* connected ' && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
	fact after_delete "$(zexec xa /.swift/bin/swift-run --status | sed -n 's/^peer xb [^ ]* \([a-z]*\) \(free [0-9]* assigned [0-9]*\)/\1 \2/p')"
	xsync b-recreated
	t0=$(xget recreated)
	zwait xa xb connected || fail "xa never connected to the new xb"
	t1=$(date +%s%N)
	fact reconnect_ms "$(( (t1 - t0) / 1000000 ))"
	tu=$(xget answering)
	fact reconnect_after_up_ms "$(( t1 > tu ? (t1 - tu) / 1000000 : 0 ))"
	sleep 1
	new=$(zexec xa /.swift/bin/swift-run --status | sed -n 's/^qp .* remote \([0-9]*\) .*/\1/p' | sort | tr '\n' ' ')
	echo "remote QPNs before: $old; after: $new"
	stale=0
	for q in $new; do case " $old " in *" $q "*) stale=$((stale + 1)) ;; esac; done
	fact stale_rows "$stale"
	fact rows_after "$(echo $new | wc -w)"
	fact counts_after "$(zcount xa)"
	xsync echo
	out=$(zexec xa /.swift/bin/swift-run --peer xb -- pingpong 100 256 2>&1)
	echo "$out"
	fact after_restart_verified "$(echo "$out" | sed -n 's/^pingpong: sent [0-9]*, verified \([0-9]*\),.*/\1/p')"
	xsync used
	xsync echo2 120
	log "the link goes down for 3 s"
	ip link set eth0 down
	sleep 3
	ip link set eth0 up
	i=0
	until grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null || [ $i -ge 50 ]; do sleep 0.2; i=$((i + 1)); done
	t0=$(date +%s%N)
	# tries until 60 s have passed (a failed try takes up to 10 s: the
	# function waits that long for a missing echo)
	while :; do
		out=$(zexec xa /.swift/bin/swift-run --peer xb -- pingpong 100 256 2>&1)
		echo "$out" | grep -q 'verified 100,' && break
		echo "$out"
		[ $(( ($(date +%s%N) - t0) / 1000000000 )) -lt 60 ] || break
		sleep 1
	done
	echo "$out"
	fact after_link_verified "$(echo "$out" | sed -n 's/^pingpong: sent [0-9]*, verified \([0-9]*\),.*/\1/p')"
	fact heal_ms "$(( ($(date +%s%N) - t0) / 1000000 ))"
	flap=$(zexec xa /.swift/bin/swift-run --status | sed -n 's/^qp .* remote \([0-9]*\) .*/\1/p' | sort | tr '\n' ' ')
	echo "remote QPNs after the flap: $flap"
	if [ "$flap" = "$new" ]; then fact flap_kept_pool yes; else fact flap_kept_pool no; fi
	xsync used2
	echo "--- xa.out"
	cat "$W/xa.out"
	zstop xa
}

# crictl_ ARGS...: crictl against this node's containerd.
crictl_() {
	[ -f "$W/crictl.yaml" ] || printf 'runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 60\n' \
		"$W/containerd.sock" "$W/containerd.sock" >"$W/crictl.yaml"
	"$SWIFTVM_CRICTL_DIR/crictl" --config "$W/crictl.yaml" "$@"
}

# zpod_json FILE NAME NAMESPACE LOGDIR ANNOTATION...: the CRI config of a
# host-network pod of tenant t1 whose container worker runs the zygote,
# with more annotations ('"key": "value"' each).
zpod_json() {
	local f=$1 name=$2 ns=$3 logs=$4 a extra=
	shift 4
	for a in "$@"; do
		extra="$extra,
    $a"
	done
	mkdir -p "$logs"
	cat >"$f" <<JSON
{
  "metadata": {"name": "$name", "namespace": "$ns", "uid": "$name-$ns-$(cat /proc/sys/kernel/random/uuid)"},
  "log_directory": "$logs",
  "linux": {"security_context": {"namespace_options": {"network": 2, "pid": 1}}},
  "annotations": {
    "swift.io/rdma": "true",
    "swift.io/zygote": "true",
    "swift.io/zygote-container": "worker",
    "swift.io/tenant": "t1"$extra
  }
}
JSON
}

# x-cri: on node a, a host-network pod through CRI (crictl, runtime handler
# swift) whose pod annotations ask for RDMA and a zygote and name the
# container that runs it (swift.io/zygote-container=worker); no
# swift.io/name, so the zygote is named after pod and container, in the
# pod's namespace: xpod-worker.default. Its sidecar gets the devices but
# no zygote (a second one would collide on the exchange port). b's zygote
# is a local caller's that takes a name in that namespace, xb.default,
# which the pod's peer list names as xb. The pod's zygote connects to b's
# and a function in it exchanges checksummed messages with one on b, each
# side naming the other bare. A pod of another namespace that claims the
# worker's name is refused at Create; one that takes the same bare names
# in namespace other gets its own namespace's, xpod-worker.other, and links
# with xb.default across namespaces (each lists the other's full name):
# the pair keys the shims derive for the two names match. Deleting the
# pods leaves nothing.
scenario_x_cri() {
	need_pair
	need_rxe
	need_containerd
	provision t1
	if [ "$NODE" = b ]; then
		zrun xb xb.default 18515 t1 "xpod-worker.default=$PEERIP:18515,xpod-worker.other=$PEERIP:18517" 2
		zwait xb 'xpod-worker\.default' connected || fail "xb never connected to the pod's zygote xpod-worker.default"
		fact peer_state "$(zexec xb /.swift/bin/swift-run --status | sed -n 's/^peer xpod-worker\.default [^ ]* \([a-z]*\) .*/\1/p')"
		zexec xb /.swift/bin/swift-run --peer xpod-worker --all -- echo 20000 >"$W/xecho.log" 2>&1 &
		epid=$!
		sleep 2
		xsync echo
		xsync used 300
		wait $epid
		cat "$W/xecho.log"
		fact echo "$(grep '^echo: [0-9]* messages' "$W/xecho.log")"
		xsync pod-gone 120
		fact peer_after "$(zexec xb /.swift/bin/swift-run --status | sed -n 's/^peer xpod-worker\.default [^ ]* \([a-z]*\) \(free [0-9]* assigned [0-9]*\)/\1 \2/p')"
		echo "--- xb.out"
		cat "$W/xb.out"
		zstop xb
		return
	fi
	[ -x "$SWIFTVM_CRICTL_DIR/crictl" ] || fail "crictl missing in SWIFTVM_CRICTL_DIR=$SWIFTVM_CRICTL_DIR (make deps)"
	crictl_ version || fail "CRI not answering on $W/containerd.sock"
	crictl_ images
	before_qps=$(rdma resource show qp | wc -l)
	zpod_json "$W/pod.json" xpod default "$W/podlogs" '"swift.io/pool": "2"' "\"swift.io/peers\": \"xb=$PEERIP:18515\""
	for c in worker sidecar; do
		cat >"$W/$c.json" <<JSON
{
  "metadata": {"name": "$c"},
  "image": {"image": "swift.local/vmroot:1"},
  "command": ["/bin/sleep", "3600"],
  "envs": [{"key": "PATH", "value": "/usr/sbin:/usr/bin:/sbin:/bin"}],
  "log_path": "$c.log",
  "linux": {"security_context": {"namespace_options": {"network": 2, "pid": 1}}}
}
JSON
	done
	pod=$(crictl_ runp --runtime swift "$W/pod.json") || fail "crictl runp failed"
	wid=$(crictl_ create "$pod" "$W/worker.json" "$W/pod.json") || fail "crictl create worker failed"
	sid=$(crictl_ create "$pod" "$W/sidecar.json" "$W/pod.json") || fail "crictl create sidecar failed"
	crictl_ start "$wid" || fail "crictl start worker failed"
	crictl_ start "$sid" || fail "crictl start sidecar failed"
	i=0
	st=
	while [ $i -lt 60 ]; do
		st=$(crictl_ exec "$wid" /.swift/bin/swift-run --status 2>&1)
		echo "$st" | grep -q '^peer xb\.default .* connected ' && break
		sleep 1
		i=$((i + 1))
	done
	echo "$st"
	fact worker_zygote "$(echo "$st" | sed -n 's/^zygote \([^ ]*\) tenant \([^ ]*\) .*/\1 \2/p')"
	fact worker_peer "$(echo "$st" | sed -n 's/^peer xb\.default [^ ]* \([a-z]*\) .*/\1/p')"
	fact worker_qps "$(echo "$st" | grep -c '^qp ')"
	fact worker_id_len "${#wid}"
	# the sidecar runs its own command, with the devices, without a zygote
	crictl_ ps -a
	fact sidecar_state "$(crictl_ inspect -o go-template --template '{{.status.state}}' "$sid")"
	fact worker_state "$(crictl_ inspect -o go-template --template '{{.status.state}}' "$wid")"
	# each container its own PID namespace (as the kubelet makes them)
	fact sidecar_init "$(crictl_ exec "$sid" /bin/cat /proc/1/cmdline | tr '\0' ' ' | sed 's/ $//')"
	fact worker_init "$(crictl_ exec "$wid" /bin/cat /proc/1/cmdline | tr '\0' ' ' | cut -d' ' -f1)"
	if crictl_ exec "$sid" /bin/sh -c 'ls /dev/infiniband/uverbs*' >/dev/null 2>&1; then
		fact sidecar_uverbs present
	else
		fact sidecar_uverbs absent
	fi
	if crictl_ exec "$sid" /bin/sh -c 'test -e /.swift/bin/swift-init' 2>/dev/null; then
		fact sidecar_swift present
	else
		fact sidecar_swift absent
	fi
	xsync echo
	out=$(crictl_ exec "$wid" /.swift/bin/swift-run --peer xb -- pingpong 100 256 2>&1)
	echo "$out"
	fact pingpong_verified "$(echo "$out" | sed -n 's/^pingpong: sent [0-9]*, verified \([0-9]*\),.*/\1/p')"
	xsync used
	# pods of other namespaces, which may claim t1 (the open policy): one
	# of namespace evil claims the worker's name, and is refused at
	# Create; one of namespace other takes the same bare names (pod xpod,
	# container worker), is named in its own namespace, and links with
	# xb.default, which it names in full
	for e in claim same; do
		if [ $e = claim ]; then
			zpod_json "$W/evil-$e.json" xclaim evil "$W/podlogs/evil-$e" '"swift.io/listen": "18516"' \
				'"swift.io/name": "xpod-worker.default"' "\"swift.io/peers\": \"xb=$PEERIP:18515\""
		else
			zpod_json "$W/evil-$e.json" xpod other "$W/podlogs/evil-$e" '"swift.io/listen": "18517"' \
				"\"swift.io/peers\": \"xb.default=$PEERIP:18515\""
		fi
		epod=$(crictl_ runp --runtime swift "$W/evil-$e.json") || fail "crictl runp evil-$e failed"
		eval "evil_$e=\$epod"
		if [ $e = claim ]; then
			# CRI makes the task, where the shim decides, at start
			ewid=$(crictl_ create "$epod" "$W/worker.json" "$W/evil-$e.json") || fail "crictl create evil-$e worker failed"
			out=$(crictl_ start "$ewid" 2>&1) && fail "the claim of xpod-worker.default started: $out"
			echo "$out"
			echo "$out" | grep -F "a pod's zygote is named in its own namespace" | grep -q evil && fact evil_claim refused
			continue
		fi
		ewid=$(crictl_ create "$epod" "$W/worker.json" "$W/evil-$e.json") || fail "crictl create evil-$e worker failed"
		crictl_ start "$ewid" || fail "crictl start evil-$e worker failed"
		i=0
		while [ $i -lt 40 ]; do
			est=$(crictl_ exec "$ewid" /.swift/bin/swift-run --status 2>&1)
			echo "$est" | grep -q '^peer xb\.default .* connected ' && break
			sleep 1
			i=$((i + 1))
		done
		echo "$est"
		fact other_zygote "$(echo "$est" | sed -n 's/^zygote \([^ ]*\) tenant .*/\1/p')"
		fact other_peer "$(echo "$est" | sed -n 's/^peer xb\.default [^ ]* \([a-z]*\) .*/\1/p')"
		fact other_qps "$(echo "$est" | grep -c '^qp ')"
	done
	st=$(crictl_ exec "$wid" /.swift/bin/swift-run --status 2>&1)
	fact worker_peer_after_evil "$(echo "$st" | sed -n 's/^peer xb\.default [^ ]* \([a-z]*\) .*/\1/p')"
	echo "--- worker log"
	cat "$W/podlogs/worker.log"
	for epod in "$evil_claim" "$evil_same"; do
		crictl_ stopp "$epod" >/dev/null || fail "crictl stopp evil failed"
		crictl_ rmp "$epod" >/dev/null || fail "crictl rmp evil failed"
	done
	crictl_ stopp "$pod" >/dev/null || fail "crictl stopp failed"
	crictl_ rmp "$pod" >/dev/null || fail "crictl rmp failed"
	fact pods_left "$(crictl_ pods -q | wc -l)"
	fact containers_left "$(crictl_ ps -a -q | wc -l)"
	sleep 1
	fact qps_left "$(($(rdma resource show qp | wc -l) - before_qps))"
	fact init_left "$(pgrep -c -x swift-init)"
	xsync pod-gone
}

# x-bench (make bench): the data plane between the nodes, 256 B messages
# (a 16 B header and 240 B of checksummed payload; perftest's -s 256),
# three rounds alternating so that drift hits every mode alike:
#   swift     a forked function on a pool QP (pingpong for latency, bw for
#             messages/s) against an echo function on b
#   own       qpbench, a plain process with its own QP, on both nodes
#   perftest  ib_send_lat / ib_send_bw
# and fork start on a to a peer on b (fork.x.*), as fork-bench does on one
# node.
scenario_x_bench() {
	need_pair
	need_rxe
	need_containerd
	nlat=${SWIFTVM_BENCH_LAT:-2000}
	nbw=${SWIFTVM_BENCH_BW:-20000}
	nfork=${SWIFTVM_BENCH_RUNS:-30}
	QB="$R/qpbench"
	[ -x "$QB" ] || fail "qpbench missing in $R (the host harness builds it)"
	pt="-d rxe0 -x 1 -s 256 -F"
	# perftest first: it listens on its own port, nothing else running
	if [ "$NODE" = b ]; then
		ib_send_lat $pt -n "$nlat" -p 18700 >"$W/pt-lat.log" 2>&1 &
		p=$!
		xsync pt-lat
		wait $p
		ib_send_bw $pt -n "$nbw" -p 18701 >"$W/pt-bw.log" 2>&1 &
		p=$!
		xsync pt-bw
		wait $p
		cat "$W/pt-lat.log" "$W/pt-bw.log"
	else
		xsync pt-lat
		for i in 1 2 3 4 5 6 7 8 9 10; do
			ib_send_lat $pt -n "$nlat" -p 18700 "$PEERIP" >"$W/pt-lat.log" 2>&1 && break
			sleep 0.5
		done
		xsync pt-bw
		for i in 1 2 3 4 5 6 7 8 9 10; do
			ib_send_bw $pt -n "$nbw" -p 18701 "$PEERIP" >"$W/pt-bw.log" 2>&1 && break
			sleep 0.5
		done
		cat "$W/pt-lat.log" "$W/pt-bw.log"
		# one line of figures under the header; latency is half a round trip
		fact perftest_lat_typical_us "$(awk '$1 == 256 && NF >= 9 {print $5}' "$W/pt-lat.log")"
		fact perftest_lat_p99_us "$(awk '$1 == 256 && NF >= 9 {print $8}' "$W/pt-lat.log")"
		fact perftest_mpps "$(awk '$1 == 256 && NF >= 5 {print $5}' "$W/pt-bw.log")"
	fi
	provision t1
	zrun "x$NODE" "x$NODE" 18515 t1 "x$PEER=$PEERIP:18515" 2
	zwait "x$NODE" "x$PEER" connected || fail "x$NODE never connected to x$PEER"
	for r in 1 2 3; do
		if [ "$NODE" = b ]; then
			"$QB" -n "$nlat" lat >"$W/own-lat-$r.log" 2>&1 &
			p=$!
			xsync "own-lat-$r"
			wait $p
			"$QB" -n "$nbw" bw >"$W/own-bw-$r.log" 2>&1 &
			p=$!
			xsync "own-bw-$r"
			wait $p
			zexec xb /.swift/bin/swift-run --peer xa --all -- echo 5000 >"$W/sw-echo-$r.log" 2>&1 &
			p=$!
			sleep 2
			xsync "swift-$r"
			wait $p
			cat "$W/own-lat-$r.log" "$W/own-bw-$r.log" "$W/sw-echo-$r.log"
			xsync "round-$r" 120
			continue
		fi
		xsync "own-lat-$r"
		"$QB" -n "$nlat" -s 240 lat "$PEERIP" >"$W/own-lat-$r.log" 2>&1
		xsync "own-bw-$r"
		"$QB" -n "$nbw" -s 240 bw "$PEERIP" >"$W/own-bw-$r.log" 2>&1
		xsync "swift-$r"
		zexec xa /.swift/bin/swift-run --peer xb -- pingpong "$nlat" 240 >"$W/sw-lat-$r.log" 2>&1
		zexec xa /.swift/bin/swift-run --peer xb -- bw "$nbw" 240 >"$W/sw-bw-$r.log" 2>&1
		cat "$W/own-lat-$r.log" "$W/own-bw-$r.log" "$W/sw-lat-$r.log" "$W/sw-bw-$r.log"
		xsync "round-$r" 120
	done
	if [ "$NODE" = b ]; then
		fact echo_bad "$(cat "$W"/sw-echo-*.log | sed -n 's/^echo: .* \([0-9]*\) bad$/\1/p' | awk '{s += $1} END {print s + 0}')"
		fact own_serve_bad "$(cat "$W"/own-*.log | sed -n 's/^qpbench serve: \([0-9]*\) messages, intact \([0-9]*\)/\1 \2/p' | awk '{s += $1 - $2} END {print s + 0}')"
		xsync fork 600
		zstop xb
		return
	fi
	# figures: the median of the rounds
	fact own_lat_us "$(cat "$W"/own-lat-*.log | sed -n 's/.*rtt median \([0-9.]*\) us.*/\1/p' | median)"
	fact own_p99_us "$(cat "$W"/own-lat-*.log | sed -n 's/.* p99 \([0-9.]*\) us.*/\1/p' | median)"
	fact own_msgs "$(cat "$W"/own-bw-*.log | sed -n 's/.* \([0-9]*\) msg\/s.*/\1/p' | median)"
	fact own_verified "$(cat "$W"/own-lat-*.log | sed -n 's/.* verified \([0-9]*\),.*/\1/p' | awk '{s += $1} END {print s + 0}')"
	fact swift_lat_us "$(cat "$W"/sw-lat-*.log | sed -n 's/.*rtt median \([0-9.]*\) us.*/\1/p' | median)"
	fact swift_p99_us "$(cat "$W"/sw-lat-*.log | sed -n 's/.* p99 \([0-9.]*\) us.*/\1/p' | median)"
	fact swift_msgs "$(cat "$W"/sw-bw-*.log | sed -n 's/.* \([0-9]*\) msg\/s.*/\1/p' | median)"
	fact swift_verified "$(cat "$W"/sw-lat-*.log | sed -n 's/.*verified \([0-9]*\),.*/\1/p' | awk '{s += $1} END {print s + 0}')"
	fact lat_n "$nlat"
	fact bw_n "$nbw"
	# fork start to a peer on the other node (see scenario_fork_bench)
	echo "n=$nfork" >"$W/rootfs-xa/tmp/xbench.sh"
	cat >>"$W/rootfs-xa/tmp/xbench.sh" <<'SH'
t() { k=$1; shift; "$@" 2>&1 | awk -v k="$k" '/total_us/ {print k, $11; print k "_nd", $7}'; }
for i in $(seq $n); do
	t plain /.swift/bin/swift-run --no-qp --time -- noop
	t swift /.swift/bin/swift-run --peer xb --time -- noop
	t first /.swift/bin/swift-run --peer xb --time -- firstsend
	t newdest /.swift/bin/swift-run --peer xb --new --time -- noop
	t own /.swift/bin/swift-run --peer xb --own --time -- noop
done
SH
	out=$(zexec xa /bin/sh /tmp/xbench.sh)
	echo "$out"
	fact fork_runs "$nfork"
	for k in plain swift first newdest own; do
		fact "fork_${k}_n" "$(echo "$out" | grep -c "^$k ")"
		fact "fork_${k}_us" "$(echo "$out" | sed -n "s/^$k //p" | median)"
	done
	fact fork_pooled_newdest "$(echo "$out" | grep -E '^(plain|swift|first)_nd ' | grep -vc ' 0$')"
	xsync fork
	echo "--- xa.out"
	cat "$W/xa.out"
	zstop xa
}

# x-probe: a developer's experiment on both nodes (SWIFT_VM_PROBE; see
# scenario_probe): $NODE tells which, xsync meets the other.
scenario_x_probe() {
	need_pair
	need_rxe
	need_containerd
	[ -f "${SWIFTVM_PROBE:-}" ] || fail "no probe script (SWIFT_VM_PROBE=${SWIFTVM_PROBE:-})"
	. "$SWIFTVM_PROBE"
}
