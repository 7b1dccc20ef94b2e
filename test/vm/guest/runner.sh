#!/bin/sh
# runner.sh — the scenario runner of the soft-RoCE test guest.
#
# Runs inside the guest, chrooted into the (read-only) host root, started by
# the initramfs /init. Reads its parameters from the results share
# (/run/swiftvm-results/env, written by the host harness), sets up eth0 and
# rxe0, starts a private containerd when a scenario needs it, then runs every
# scenario in $SWIFTVM_SCENARIOS through scenarios.sh under a timeout.
#
# Per scenario NAME it writes to the results share:
#   NAME.log     everything the scenario printed
#   NAME.facts   key=value facts the scenario recorded (optional)
#   NAME.json    {"name","status","exit_code","seconds","timed_out"}
#   NAME.status  PASS or FAIL (written last)
# and prints console markers ("SWIFTVM: BEGIN/RESULT ...") as a fallback.
# runner.done marks a complete run.
R=/run/swiftvm-results
. "$R/env"
G=$(dirname "$SWIFTVM_RUNNER")
W=/run/swiftvm
export SWIFTVM_WORK=$W

say() { echo "SWIFTVM: $*" >/dev/console; }
up() { cut -d' ' -f1 /proc/uptime; }

say "RUNNER-START uptime=$(up) scenarios=$SWIFTVM_SCENARIOS node=${SWIFTVM_NODE:-single}"
mkdir -p "$W"

# --- network and soft-RoCE -------------------------------------------------
setup_rxe() {
	set -x
	ip link set lo up
	ip link set eth0 up
	if [ -n "${SWIFTVM_NODE_IP:-}" ]; then
		# a guest of a pair: eth0 is the link to the other guest
		ip addr add "$SWIFTVM_NODE_IP/24" dev eth0
	else
		ip addr add 10.0.2.15/24 dev eth0
		ip route add default via 10.0.2.2 dev eth0 || true
	fi
	rdma link add rxe0 type rxe netdev eth0 || return 1
	i=0
	until grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 100 ] || { echo "rxe0 port never became ACTIVE"; return 1; }
		sleep 0.2
	done
	rdma link show
	rdma system show || true
	ibv_devices
	set +x
}
if setup_rxe >"$R/setup.log" 2>&1; then
	echo PASS >"$R/setup.status"
	say "SETUP rxe ok uptime=$(up)"
else
	echo FAIL >"$R/setup.status"
	say "SETUP rxe FAILED (see setup.log)"
	tail -n 20 "$R/setup.log" | sed 's/^/SWIFTVM-LOG setup: /' >/dev/console
fi

# --- containerd ------------------------------------------------------------
needs_containerd=no
needs_cri=no
for s in $SWIFTVM_SCENARIOS; do
	case "$s" in
	rxe | broken) ;;
	*) needs_containerd=yes ;;
	esac
	case "$s" in
	x-cri | alloc | cni | quickstart | x-podnet | x-podnet-exclusive | x-k8s) needs_cri=yes ;;
	esac
done

CTR_PID=
start_containerd() {
	set -x
	echo "uptime $(up): copying rootfs"
	# One tar file over 9p is much faster than many small files.
	if [ -f "$R/rootfs.tar" ]; then
		mkdir -p "$W/rootfs" && tar -C "$W/rootfs" -xf "$R/rootfs.tar" || return 1
	else
		cp -a "$R/rootfs" "$W/rootfs" || return 1
	fi
	echo "uptime $(up): rootfs copied"
	mkdir -p /var/lib/swiftvm/containerd /run/swiftvm/containerd /var/lib/swift /etc/swift 2>/dev/null
	# CRI only when a scenario runs pods: host-network pods only (an empty
	# CNI config), the pinned sandbox image, the native snapshotter (the
	# guest kernel has no overlayfs module loaded), and the runtime handler
	# "swift" passing swift.io/ annotations of pods and containers.
	if [ $needs_cri = yes ]; then
		mkdir -p "$W/cni/bin" "$W/cni/net.d" "$W/cdi"
		disabled='[]'
	else
		disabled='["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images"]'
	fi
	cat >"$W/containerd.toml" <<EOF
version = 3
root = "/var/lib/swiftvm/containerd"
state = "/run/swiftvm/containerd"
disabled_plugins = $disabled

[grpc]
  address = "$W/containerd.sock"

[ttrpc]
  address = "$W/containerd.sock.ttrpc"

[debug]
  level = "info"
EOF
	if [ $needs_cri = yes ]; then
		case "$(uname -m)" in
		x86_64) plat=linux/amd64 ;;
		aarch64) plat=linux/arm64 ;;
		*) plat=linux/$(uname -m) ;;
		esac
		cat >>"$W/containerd.toml" <<EOF

[[plugins."io.containerd.transfer.v1.local".unpack_config]]
  platform = "$plat"
  snapshotter = "native"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "native"
[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "swift.local/pause:1"
[plugins."io.containerd.cri.v1.runtime"]
  enable_cdi = true
  cdi_spec_dirs = ["$W/cdi"]
[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = ["${SWIFTVM_CNI_DIR:-$W/cni/bin}"]
  conf_dir = "$W/cni/net.d"
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.swift]
  runtime_type = "io.containerd.swift.v2"
  pod_annotations = ["swift.io/*"]
  container_annotations = ["swift.io/*"]
EOF
	fi
	# The default swift node config; scenarios may rewrite it (a new shim
	# reads it for every container).
	cat >"$W/swift.toml" <<EOF
log_level = "debug"
state_dir = "/var/lib/swift"
# no tenant policy unless a scenario writes one (policy: it replaces this line)
policy_path = ""
keys_dir = "/var/lib/swift/provisioned"

[zygote]
bin_dir = "/var/lib/swift/bin"

# a local copy, as a node has it: runc runs it for every opted-in container
[hooks]
path = "/var/lib/swift/hook/swift-hook"

# [rdma] stays last: scenarios append keys of it (swift_config)
[rdma]
default = false
memlock = "unlimited"
EOF
	# Bind-mounting a directory of the 9p host share into a container
	# hangs the guest kernel (soft lockup in runc init): give containers a
	# local copy of the zygote binaries, as a node would have.
	mkdir -p /var/lib/swift/bin
	for b in swift-init swift-run swift-gateway swift-warm swift-warm-dyn; do
		[ -x "$SWIFTVM_BIN_DIR/$b" ] && cp "$SWIFTVM_BIN_DIR/$b" /var/lib/swift/bin/
	done
	for d in lib handlers; do
		[ -d "$SWIFTVM_BIN_DIR/$d" ] && cp -r "$SWIFTVM_BIN_DIR/$d" /var/lib/swift/bin/
	done
	# swift-hook from local disk too: every runc create execs it, and
	# big binaries read over 9p by several processes at once have locked
	# the guest up (soft lockups in runc init)
	mkdir -p /var/lib/swift/hook
	[ -x "$SWIFTVM_BIN_DIR/swift-hook" ] && cp "$SWIFTVM_BIN_DIR/swift-hook" /var/lib/swift/hook/
	cp "$W/swift.toml" "$W/swift.default.toml"
	for b in containerd ctr containerd-shim-runc-v2; do
		[ -x "$SWIFTVM_CONTAINERD_DIR/$b" ] || { echo "missing $SWIFTVM_CONTAINERD_DIR/$b"; return 1; }
	done
	[ -x "$SWIFTVM_BIN_DIR/containerd-shim-swift-v2" ] ||
		echo "WARNING: $SWIFTVM_BIN_DIR/containerd-shim-swift-v2 missing (run make build)"
	command -v runc
	runc --version
	PATH=$SWIFTVM_BIN_DIR:$SWIFTVM_CONTAINERD_DIR:$PATH SWIFT_CONFIG=$W/swift.toml \
		setsid "$SWIFTVM_CONTAINERD_DIR/containerd" --config "$W/containerd.toml" \
		>"$R/containerd.log" 2>&1 </dev/null &
	CTR_PID=$!
	echo "$CTR_PID" >"$W/containerd.pid"
	echo "uptime $(up): containerd started"
	i=0
	until "$SWIFTVM_CONTAINERD_DIR/ctr" --address "$W/containerd.sock" version >/dev/null 2>&1; do
		i=$((i + 1))
		kill -0 "$CTR_PID" 2>/dev/null || { echo "containerd exited"; return 1; }
		[ $i -lt 240 ] || { echo "containerd not ready after 120s"; return 1; }
		sleep 0.5
	done
	echo "uptime $(up): containerd ready"
	"$SWIFTVM_CONTAINERD_DIR/ctr" --address "$W/containerd.sock" version
	if [ $needs_cri = yes ]; then
		for img in pause vmroot shipper; do
			[ -f "$R/images/$img.tar" ] || [ $img = shipper ] || { echo "no image $img.tar"; return 1; }
			[ -f "$R/images/$img.tar" ] || continue
			"$SWIFTVM_CONTAINERD_DIR/ctr" --address "$W/containerd.sock" -n k8s.io images import \
				--snapshotter native --platform "$plat" "$R/images/$img.tar" || return 1
		done
		echo "uptime $(up): CRI images imported"
	fi
	set +x
}
if [ $needs_containerd = yes ]; then
	if start_containerd >"$R/containerd-start.log" 2>&1; then
		echo PASS >"$R/containerd.status"
		say "CONTAINERD ready uptime=$(up)"
	else
		echo FAIL >"$R/containerd.status"
		say "CONTAINERD start FAILED"
		tail -n 20 "$R/containerd-start.log" | sed 's/^/SWIFTVM-LOG containerd: /' >/dev/console
	fi
fi

# --- scenarios -------------------------------------------------------------
timeout_s=${SWIFTVM_SCENARIO_TIMEOUT:-300}
for s in $SWIFTVM_SCENARIOS; do
	say "BEGIN $s uptime=$(up)"
	t0=$(date +%s.%N)
	rm -f "$R/$s.facts"
	# the two guests of a pair begin each scenario together
	if [ -n "${SWIFTVM_NODE:-}" ]; then
		S=/run/swiftvm-shared
		touch "$S/$SWIFTVM_NODE.begin-$s"
		i=0
		while [ ! -e "$S/$SWIFTVM_PEER.begin-$s" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
	fi
	# Every scenario starts from the default node config, even if the one
	# before it died while it had rewritten it.
	[ -f "$W/swift.default.toml" ] && cp "$W/swift.default.toml" "$W/swift.toml"
	rm -f "$W/step-failed"
	t=$timeout_s
	# the Kubernetes bed runs all its checks in one scenario
	[ "$s" = x-k8s ] && t=${SWIFTVM_K8S_TIMEOUT:-$timeout_s}
	# the gateway's 2,000 checked calls, its bench and its pool sizes
	[ "$s" = gateway ] && t=$((timeout_s * 4))
	timeout -k 10 "$t" /bin/sh "$G/scenarios.sh" "$s" >"$R/$s.log" 2>&1 </dev/null
	rc=$?
	# a step that timed out is named on the log's last line
	if [ -f "$W/step-failed" ]; then
		cat "$W/step-failed" >>"$R/$s.log"
		rm -f "$W/step-failed"
	fi
	t1=$(date +%s.%N)
	secs=$(echo "$t0 $t1" | awk '{printf "%.1f", $2 - $1}')
	timed_out=false
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		timed_out=true
		echo "TIMEOUT: scenario $s killed after ${t}s" >>"$R/$s.log"
	fi
	if [ $rc -eq 0 ]; then status=PASS; else status=FAIL; fi
	printf '{"name":"%s","status":"%s","exit_code":%d,"seconds":%s,"timed_out":%s}\n' \
		"$s" "$status" "$rc" "$secs" "$timed_out" >"$R/$s.json"
	echo "$status" >"$R/$s.status"
	say "RESULT $s $status rc=$rc seconds=$secs"
	if [ $status = FAIL ]; then
		tail -n 15 "$R/$s.log" | sed "s/^/SWIFTVM-LOG $s: /" >/dev/console
		# a scenario that failed midway leaves nothing to the next one
		if [ -n "$CTR_PID" ]; then
			c="$SWIFTVM_CONTAINERD_DIR/ctr --address $W/containerd.sock -n swiftvm"
			for id in $($c task ls -q 2>/dev/null); do
				$c task kill -a -s SIGKILL "$id" >/dev/null 2>&1
			done
			sleep 1
			for id in $($c task ls -q 2>/dev/null); do $c task delete -f "$id" >/dev/null 2>&1; done
			for id in $($c container ls -q 2>/dev/null); do $c container delete "$id" >/dev/null 2>&1; done
		fi
	fi
done

# --- teardown --------------------------------------------------------------
if [ -n "$CTR_PID" ]; then
	kill "$CTR_PID" 2>/dev/null
	i=0
	while kill -0 "$CTR_PID" 2>/dev/null && [ $i -lt 20 ]; do
		sleep 0.5
		i=$((i + 1))
	done
fi
dmesg >"$R/dmesg.log" 2>&1
echo "uptime=$(up)" >"$R/runner.done"
sync
say "DONE uptime=$(up)"
