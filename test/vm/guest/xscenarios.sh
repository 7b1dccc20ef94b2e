# xscenarios.sh — the scenarios of a pair of guests (sourced by
# scenarios.sh). Both guests run every scenario; each does its node's part
# (SWIFTVM_NODE is a or b) and they meet at barriers in the directory both
# mount. Facts are per node; the host reads them as a.KEY and b.KEY.
#
#   x-data   a zygote on each node, pre-connected over the link: a forked
#            function on a exchanges 1,000 checksummed messages with an
#            echo function on b
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

# shared_key TENANT: the same key on both nodes, as an operator provisions
# it (node a makes it; both install it where the shim looks).
shared_key() {
	if [ "$NODE" = a ]; then
		head -c 32 /dev/urandom >"$XS/$name.key.tmp" && mv "$XS/$name.key.tmp" "$XS/$name.key"
	fi
	xsync key
	mkdir -p /var/lib/swift/keys
	rm -f "/var/lib/swift/keys/$1.key"
	cp "$XS/$name.key" "/var/lib/swift/keys/$1.key" && chmod 0400 "/var/lib/swift/keys/$1.key"
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
	shared_key t1
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
