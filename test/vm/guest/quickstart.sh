# quickstart.sh — the README's quickstart, followed step by step on the rxe
# guest as an operator without Kubernetes would (sourced by scenarios.sh;
# its helpers are defined):
#
#   quickstart  Install (`make install`), Configure containerd (`swiftctl
#               install containerd --dry-run`, then without it, and a
#               containerd of its own started with that config), Tenant
#               policy (examples/policy.toml with the node's device,
#               `swiftctl config check`, `swiftctl policy check`, `swiftctl
#               doctor`), First pod (the README's crictl commands on
#               examples/crictl/*.json: the container sees uverbs0 and
#               rdma_cm, SWIFT_RDMA_DEVICES and the tenant's memlock; the
#               same pod in namespace default is refused at start). Nothing
#               is left: no pod, task, lease or shim, and containerd stops.
#
# The guest's /etc and /usr are the host's, read-only: what a node has
# there lives under $QS instead (QS/usr/local = PREFIX, QS/etc/...), and
# the README's default paths become the flags it documents for them. The
# runner's containerd (and its socket) is not used.
QS=/var/lib/swift-quickstart
QS_PREFIX=$QS/usr/local
QS_RUN=/run/swift-quickstart
QS_SOCK=$QS_RUN/containerd/containerd.sock
QS_PIDFILE=$QS_RUN/containerd/containerd.pid
QS_CTRD_CFG=$QS/etc/containerd/config.toml
QS_NODE_CFG=$QS/etc/swift/config.toml
QS_POLICY=$QS/etc/swift/policy.toml
# the operator's checkout (a copy: the examples get the node's image and device)
QS_SRC=$QS/src/swift-containerd
# what stands for registry.example/rdma-worker:1.0 and mlx5_0 here
QS_IMAGE=swift.local/vmroot:1
QS_DEVICE=rxe0
QS_CTRD_PID=

qs_ctr() { bounded 120 - "$SWIFTVM_CONTAINERD_DIR/ctr" --address "$QS_SOCK" -n k8s.io "$@"; }

# qs_shims: pids of the shims of this quickstart's containerd.
qs_shims() {
	grep -l -a 'containerd-shi[m]' /proc/[0-9]*/cmdline 2>/dev/null |
		xargs -r grep -l -a -F -- "$QS_SOCK" 2>/dev/null | cut -d/ -f3
}

# qs_teardown: on a failure, leave nothing to the next scenario (no
# bounded here: it may run from a timed-out step).
qs_teardown() {
	if [ -n "$QS_CTRD_PID" ] && kill -0 "$QS_CTRD_PID" 2>/dev/null; then
		echo "--- tail of $QS/containerd.log"
		tail -n 40 "$QS/containerd.log"
		for p in $(timeout 20 "$SWIFTVM_CRICTL_DIR/crictl" --config "$QS/etc/crictl.yaml" pods -q 2>/dev/null); do
			timeout 20 "$SWIFTVM_CRICTL_DIR/crictl" --config "$QS/etc/crictl.yaml" rmp -f "$p" >/dev/null 2>&1
		done
		kill "$QS_CTRD_PID" 2>/dev/null
		i=0
		while kill -0 "$QS_CTRD_PID" 2>/dev/null && [ $i -lt 25 ]; do sleep 0.2; i=$((i + 1)); done
		kill -9 "$QS_CTRD_PID" 2>/dev/null
	fi
	for p in $(qs_shims); do kill -9 "$p" 2>/dev/null; done
}

scenario_quickstart() {
	need_rxe
	need_containerd
	[ -x "$SWIFTVM_CRICTL_DIR/crictl" ] || fail "crictl missing in SWIFTVM_CRICTL_DIR=$SWIFTVM_CRICTL_DIR (make deps)"
	[ -f "$SWIFTVM_REPO/Makefile" ] ||
		fail "the repository $SWIFTVM_REPO is not visible in the guest (a checkout under /tmp, /run or /var/lib is masked there)"
	for t in pause vmroot; do
		[ -f "$R/images/$t.tar" ] || fail "$R/images/$t.tar missing: quickstart must be in NeedsCRI (vm.go)"
	done
	# crictl as the README runs it (defined here, for this scenario only);
	# /etc/crictl.yaml (read-only here) becomes --config. Every call is
	# bounded: crictl's own timeout, and bounded.
	crictl() { bounded 150 - "$SWIFTVM_CRICTL_DIR/crictl" --config "$QS/etc/crictl.yaml" "$@"; }
	trap qs_teardown EXIT
	trap 'exit 1' TERM INT
	rm -rf "$QS" "$QS_RUN"
	mkdir -p "$QS/etc/containerd" "$QS/etc/swift" "$QS/etc/cni/net.d" "$QS/opt/cni/bin" "$QS/etc/cdi" \
		"$QS_RUN/containerd" "$QS_RUN/nri" "$QS/src"

	# --- Install ----------------------------------------------------------
	# README: make build && sudo make install. bin/ is built on the host
	# (the repository is read-only here): -o build installs it as it is.
	step "Install: make install PREFIX=$QS_PREFIX"
	bounded 120 - make -C "$SWIFTVM_REPO" -o build install PREFIX="$QS_PREFIX" || fail "make install failed"
	fact install_bin "$(ls "$QS_PREFIX/bin" | tr '\n' ' ' | sed 's/ $//')"
	fact install_lib "$(ls -p "$QS_PREFIX/lib/swift" | tr '\n' ' ' | sed 's/ $//')"
	# PATH as a node's: the installed binaries first (never the host's bin/)
	export PATH=$QS_PREFIX/bin:$SWIFTVM_CONTAINERD_DIR:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	fact swiftctl_path "$(command -v swiftctl)"
	swiftctl version

	# --- Configure containerd -------------------------------------------
	# A node's root config, as the runner's containerd has it (CRI, the
	# native snapshotter, the pinned sandbox image, host-network pods only:
	# an empty CNI config directory), with runc's runtime entry; its paths
	# private to this containerd.
	step "Configure containerd: the node's root config"
	runc=$(command -v runc) || fail "runc not found"
	fact runc_path "$runc"
	case "$(uname -m)" in
	x86_64) plat=linux/amd64 ;;
	aarch64) plat=linux/arm64 ;;
	*) plat=linux/$(uname -m) ;;
	esac
	cat >"$QS_CTRD_CFG" <<EOF
version = 3
root = "$QS/var/lib/containerd"
state = "$QS_RUN/containerd"

[grpc]
  address = "$QS_SOCK"

[ttrpc]
  address = "$QS_SOCK.ttrpc"

[debug]
  level = "info"

[[plugins."io.containerd.transfer.v1.local".unpack_config]]
  platform = "$plat"
  snapshotter = "native"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "native"
[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "swift.local/pause:1"
[plugins."io.containerd.cri.v1.runtime"]
  enable_cdi = true
  cdi_spec_dirs = ["$QS/etc/cdi"]
[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = ["$QS/opt/cni/bin"]
  conf_dir = "$QS/etc/cni/net.d"
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
  SystemdCgroup = false
  BinaryName = "$runc"
[plugins."io.containerd.nri.v1.nri"]
  socket_path = "$QS_RUN/nri/nri.sock"
EOF
	cat "$QS_CTRD_CFG"

	step "Configure containerd: swiftctl install containerd --dry-run"
	bounded 60 - swiftctl install containerd --config "$QS_CTRD_CFG" --swift-config "$QS_NODE_CFG" --dry-run \
		>"$QS/dry-run.out" 2>&1 || { cat "$QS/dry-run.out"; fail "swiftctl install containerd --dry-run failed"; }
	cat "$QS/dry-run.out"
	# the Swift entry, as the diff adds it: runc's options copied
	fact dryrun_runtime_type "$(sed -n 's/^+ *runtime_type = "\(.*\)"$/\1/p' "$QS/dry-run.out")"
	fact dryrun_binaryname "$(sed -n 's/^+ *BinaryName = "\(.*\)"$/\1/p' "$QS/dry-run.out")"
	fact dryrun_systemdcgroup "$(sed -n 's/^+ *SystemdCgroup = \(.*\)$/\1/p' "$QS/dry-run.out")"
	fact dryrun_swiftconfig "$(sed -n 's/^+ *SwiftConfig = "\(.*\)"$/\1/p' "$QS/dry-run.out")"
	fact dryrun_pod_annotations "$(sed -n 's/^+ *pod_annotations = \(.*\)$/\1/p' "$QS/dry-run.out" | tr -d '"')"
	fact dryrun_written "$(ls "$QS/etc/containerd/conf.d" 2>/dev/null | wc -l)"

	step "Configure containerd: swiftctl install containerd"
	bounded 60 - swiftctl install containerd --config "$QS_CTRD_CFG" --swift-config "$QS_NODE_CFG" ||
		fail "swiftctl install containerd failed"
	fact dropin "$(ls "$QS/etc/containerd/conf.d")"
	fact imports "$(sed -n 's/^imports = \(.*\)$/\1/p' "$QS_CTRD_CFG" | tr -d '"')"
	cat "$QS/etc/containerd/conf.d/"*.toml

	# README: systemctl restart containerd. containerd finds the shim on
	# its PATH by the runtime type: the installed one.
	step "Configure containerd: start containerd"
	setsid "$SWIFTVM_CONTAINERD_DIR/containerd" \
		--config "$QS_CTRD_CFG" >"$QS/containerd.log" 2>&1 </dev/null &
	QS_CTRD_PID=$!
	echo "$QS_CTRD_PID" >"$QS_PIDFILE"
	i=0
	until "$SWIFTVM_CONTAINERD_DIR/ctr" --address "$QS_SOCK" version >/dev/null 2>&1; do
		i=$((i + 1))
		kill -0 "$QS_CTRD_PID" 2>/dev/null || { tail -n 40 "$QS/containerd.log"; fail "containerd exited"; }
		[ $i -lt 240 ] || { tail -n 40 "$QS/containerd.log"; fail "containerd not ready after 120 s"; }
		sleep 0.5
	done
	printf 'runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 60\n' "$QS_SOCK" "$QS_SOCK" \
		>"$QS/etc/crictl.yaml"
	# the node's images: the pinned sandbox image and the one standing for
	# the worker's, imported as runner.sh does for its containerd
	for img in pause vmroot; do
		qs_ctr images import --snapshotter native --platform "$plat" "$R/images/$img.tar" ||
			fail "ctr images import $img.tar failed"
	done
	crictl images
	fact images "$(crictl images | awk 'NR > 1 {print $1 ":" $2}' | sort | tr '\n' ' ' | sed 's/ $//')"

	# --- Tenant policy and keys -----------------------------------------
	# README: cp examples/policy.toml /etc/swift/policy.toml, its devices
	# changed to the node's.
	step "Tenant policy: the example policy with this node's device"
	mkdir -p "$QS_SRC"
	cp -r "$SWIFTVM_REPO/examples" "$QS_SRC/" || fail "cannot copy the examples"
	cd "$QS_SRC" || fail "cd $QS_SRC"
	cp examples/policy.toml "$QS_POLICY"
	sed -i "s/^devices = .*/devices = [\"$QS_DEVICE\"]/" "$QS_POLICY"
	fact policy_devices "$(sed -n 's/^devices = \(.*\)$/\1/p' "$QS_POLICY" | tr -d '"')"
	# the node config (README: /etc/swift/config.toml): the policy, a
	# state directory and keys of its own, and zygote.bin_dir where
	# PREFIX= put the zygote's files
	cat >"$QS_NODE_CFG" <<EOF
policy_path = "$QS_POLICY"
state_dir = "$QS/var/lib/swift"
keys_dir = "$QS/etc/swift/keys"

[zygote]
bin_dir = "$QS_PREFIX/lib/swift"
EOF
	cat "$QS_NODE_CFG"

	step "Tenant policy: swiftctl config check, swiftctl policy check"
	bounded 60 - swiftctl config check "$QS_NODE_CFG"
	fact config_check $?
	bounded 60 - swiftctl policy check "$QS_POLICY" >"$QS/policy-check.out" 2>&1
	fact policy_check $?
	cat "$QS/policy-check.out"
	fact policy_team_a "$(sed -n 's/^  team-a  *\(tenant [^;]*\);.*/\1/p' "$QS/policy-check.out")"

	# README (Install): swiftctl doctor, on the node as it is now
	step "Install: swiftctl doctor"
	bounded 120 - swiftctl doctor --config "$QS_NODE_CFG" --containerd-pid-file "$QS_PIDFILE" >"$QS/doctor.out" 2>&1
	fact doctor_exit $?
	cat "$QS/doctor.out"
	awk '$1 ~ /^(OK|WARN|FAIL)$/ && NF >= 2 {gsub("/", "_", $2); print "doctor." $2 "=" $1}' "$QS/doctor.out" \
		>>"$R/$name.facts"

	# --- First pod ------------------------------------------------------
	# README "Without Kubernetes: crictl": the examples with the node's
	# image and device, then its commands as they are.
	step "First pod: examples/crictl with this node's image and device"
	sed -i "s|registry.example/rdma-worker:1.0|$QS_IMAGE|" examples/crictl/container.json
	sed -i "s/mlx5_0/$QS_DEVICE/" examples/crictl/pod.json
	cat examples/crictl/pod.json examples/crictl/container.json

	step "First pod: crictl runp, create, start (namespace team-a)"
	pod=$(crictl runp --runtime swift examples/crictl/pod.json) || fail "crictl runp failed"
	c=$(crictl create "$pod" examples/crictl/container.json examples/crictl/pod.json) || fail "crictl create failed"
	crictl start "$c" || fail "crictl start failed"
	crictl ps -a
	fact worker_state "$(crictl inspect -o go-template --template '{{.status.state}}' "$c")"

	step "First pod: crictl exec"
	out=$(crictl exec "$c" sh -c 'ls /dev/infiniband; echo $SWIFT_RDMA_DEVICES; ulimit -l') || fail "crictl exec failed: $out"
	echo "$out"
	fact exec_out "$(echo "$out" | tr '\n' '|' | sed 's/|$//')"
	fact shim_exe "$(for p in $(qs_shims); do readlink "/proc/$p/exe"; done | sort -u | tr '\n' ' ' | sed 's/ $//')"
	fact lease "$(bounded 60 - swiftctl pools ls --config "$QS_NODE_CFG" --leases | awk -v k="k8s.io/$c" '$1 == k {print $2, $3, $4, $7}')"

	step "First pod: cleanup (crictl stopp, rmp)"
	crictl stopp "$pod" && crictl rmp "$pod" || fail "crictl stopp/rmp failed"

	step "First pod: the same pod in namespace default"
	sed 's/"namespace": "team-a"/"namespace": "default"/' examples/crictl/pod.json >"$QS/pod-default.json"
	dpod=$(crictl runp --runtime swift "$QS/pod-default.json") || fail "crictl runp (namespace default) failed"
	dc=$(crictl create "$dpod" examples/crictl/container.json "$QS/pod-default.json") ||
		fail "crictl create (namespace default) failed"
	if crictl start "$dc" >"$QS/default.err" 2>&1; then
		fact default_refused 0
	else
		fact default_refused 1
	fi
	cat "$QS/default.err"
	fact default_error "$(sed 's/\\"/"/g' "$QS/default.err" |
		grep -o 'pod namespace "default" is not mapped to any tenant in [^ ]* (add it to a tenant.s namespaces)' | head -1)"
	fact default_tasks "$(qs_ctr task ls -q | grep -c "^$dc")"
	crictl rm "$dc" >/dev/null || fail "crictl rm (namespace default) failed"
	crictl stopp "$dpod" && crictl rmp "$dpod" || fail "crictl stopp/rmp (namespace default) failed"

	step "First pod: nothing left"
	fact pods_left "$(crictl pods -q | wc -l)"
	fact containers_left "$(crictl ps -a -q | wc -l)"
	fact tasks_left "$(qs_ctr task ls -q | wc -l)"
	fact leases_left "$(bounded 60 - swiftctl pools ls --config "$QS_NODE_CFG" --leases | grep -c '^k8s.io/')"
	# a pod's shim exits once its sandbox is removed
	i=0
	while [ -n "$(qs_shims)" ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
	fact shims_left "$(qs_shims | wc -l)"

	step "stop containerd"
	kill "$QS_CTRD_PID"
	i=0
	while kill -0 "$QS_CTRD_PID" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.2; i=$((i + 1)); done
	if kill -0 "$QS_CTRD_PID" 2>/dev/null; then
		fact containerd_left 1
	else
		fact containerd_left 0
	fi
	fact shims_after_stop "$(qs_shims | wc -l)"
	grep -i 'level=error' "$QS/containerd.log" | tail -n 20
	cd /
	log "PASS"
}
