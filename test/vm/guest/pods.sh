# pods.sh — scenarios of pods as a cluster makes them (sourced by
# scenarios.sh; its helpers and crictl_ from xscenarios.sh are defined).
#
#   alloc   devices allocated before the shim: on a node with two rxe
#           devices, pods given uverbs0 by a device plugin's DeviceSpec
#           (CRI "devices") or by CDI (swift.io/rdma=rxe0, the spec written
#           by `swiftctl cdi generate`) see only uverbs0, and their rdma.max,
#           SWIFT_RDMA_DEVICES and lease name only rxe0; an allocation of
#           both with swift.io/devices=rxe1 keeps both nodes and limits
#           and tells the workload rxe1; swift.io/devices outside the
#           allocation and a node that is no RDMA device here are refused
#           at Create, leaving no container and no lease.
#   cni     pods with network namespaces of their own, through CNI, and
#           swift-hook's createRuntime netcheck: a macvlan pod on eth0 (the
#           RoCE link) has its own address and GID on rxe0, but this
#           kernel's rxe receives only in the node's namespace (no UDP 4791
#           socket in the pod's): Create is refused saying so; a bridge pod
#           has no GID of rxe0 at all: refused naming the device, the
#           namespace and its address; in RDMA netns exclusive mode rxe0
#           cannot move into a pod: refused. No task is left by any.

# second_rxe: rxe1 on a veth of its own. It stays: on the guest's 6.1
# kernel, `rdma link del` of a device that some (even removed) cgroup had
# rdma.max limits for hits "kernel BUG at lib/list_debug.c:62" in
# rdmacg_unregister_device, and RDMA in the guest hangs after it.
second_rxe() {
	[ -e /sys/class/infiniband/rxe1 ] && return 0
	ip link add swa0 type veth peer name swa1 || fail "ip link add veth: the guest kernel lacks veth (build.sh modules)"
	ip link set swa0 up && ip link set swa1 up || fail "veth up"
	# an address, so that rxe1 has an IPv4 GID on the node (netcheck)
	ip addr add 10.9.0.1/24 dev swa0 || fail "address on swa0"
	rdma link add rxe1 type rxe netdev swa0 || fail "rdma link add rxe1 on swa0 failed"
	i=0
	until grep -q ACTIVE /sys/class/infiniband/rxe1/ports/1/state 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 100 ] || fail "rxe1 port never became ACTIVE"
		sleep 0.1
	done
	ls -l /dev/infiniband
}

# errfact KEY FILE PATTERN: the part of a crictl error that PATTERN
# matches, its escaped quotes dropped.
errfact() { fact "$1" "$(tr -d '\\"' <"$2" | grep -o "$3" | head -1)"; }

# cpid CONTAINER: its init's pid on the node.
cpid() { crictl_ inspect -o go-template --template '{{.info.pid}}' "$1"; }

# cfacts KEY CONTAINER: what the container sees and is limited to.
cfacts() {
	k=$1
	c=$2
	fact "${k}_state" "$(crictl_ inspect -o go-template --template '{{.status.state}}' "$c")"
	fact "${k}_nodes" "$(crictl_ exec "$c" /bin/ls /dev/infiniband | tr '\n' ' ' | sed 's/ $//')"
	fact "${k}_env" "$(crictl_ exec "$c" /bin/sh -c 'echo $SWIFT_RDMA_DEVICES')"
	pid=$(cpid "$c")
	cg=$(sed -n 's/^0:://p' "/proc/$pid/cgroup")
	# rdma.max lists every device of the node; the limited ones are ours
	fact "${k}_rdma_max" "$(grep -v 'hca_handle=max hca_object=max' "/sys/fs/cgroup$cg/rdma.max" | sed 's/ *$//' | sort | tr '\n' ';')"
	fact "${k}_lease" "$(SWIFT_CONFIG=$W/swift.toml swiftctl pools ls --leases | awk -v k="k8s.io/$c" '$1 == k {print $3}')"
	# the device it was given works; the other one has no node here
	crictl_ exec "$c" /usr/bin/ibv_devinfo -d rxe0 >"$W/$k.devinfo" 2>&1
	fact "${k}_rxe0_open" $?
	crictl_ exec "$c" /usr/bin/ibv_devinfo -d rxe1 >"$W/$k.devinfo1" 2>&1
	fact "${k}_rxe1_open" $?
}

# ccfg NAME JSON-EXTRA: a container config of the vmroot image, sleeping.
ccfg() {
	cat >"$W/$1.json" <<JSON
{
  "metadata": {"name": "$1"},
  "image": {"image": "swift.local/vmroot:1"},
  "command": ["/bin/sleep", "3600"],
  "envs": [{"key": "PATH", "value": "/usr/sbin:/usr/bin:/sbin:/bin"}],
  "log_path": "$1.log",
  "linux": {"security_context": {"namespace_options": {"network": 2, "pid": 1}}}
  $2
}
JSON
}

scenario_alloc() {
	need_rxe
	need_containerd
	[ -x "$SWIFTVM_CRICTL_DIR/crictl" ] || fail "crictl missing in SWIFTVM_CRICTL_DIR=$SWIFTVM_CRICTL_DIR (make deps)"
	second_rxe
	cat >"$W/policy.toml" <<EOF
[tenants.pods]
namespaces = ["default"]
seccomp = "none"
[tenants.pods.container]
hca_handle = 2
hca_object = 20
EOF
	policy_config
	# the CDI spec of this node's devices, where containerd's CRI looks
	swiftctl cdi generate --config "$W/swift.toml" --dir "$W/cdi" || fail "swiftctl cdi generate failed"
	cat "$W/cdi/swift.io-rdma.yaml"
	fact cdi_devices "$(sed -n 's/^[- ]*name: //p' "$W/cdi/swift.io-rdma.yaml" | tr '\n' ' ' | sed 's/ $//')"
	sleep 1 # the CDI cache watches the directory
	crictl_ version || fail "CRI not answering on $W/containerd.sock"
	mkdir -p "$W/podlogs"
	cat >"$W/apod.json" <<JSON
{
  "metadata": {"name": "apod", "namespace": "default", "uid": "apod-$(cat /proc/sys/kernel/random/uuid)"},
  "log_directory": "$W/podlogs",
  "linux": {"security_context": {"namespace_options": {"network": 2, "pid": 1}}},
  "annotations": {"swift.io/rdma": "true"}
}
JSON
	dp0='"devices": [{"container_path": "/dev/infiniband/uverbs0", "host_path": "/dev/infiniband/uverbs0", "permissions": "rw"}]'
	dp01='"devices": [{"container_path": "/dev/infiniband/uverbs0", "host_path": "/dev/infiniband/uverbs0", "permissions": "rw"},
	  {"container_path": "/dev/infiniband/uverbs1", "host_path": "/dev/infiniband/uverbs1", "permissions": "rw"}]'
	ccfg dp ", $dp0"
	ccfg cdi ', "CDI_devices": [{"name": "swift.io/rdma=rxe0"}]'
	ccfg both ", $dp01, \"annotations\": {\"swift.io/devices\": \"rxe1\"}"
	ccfg none ""
	ccfg outside ", $dp0, \"annotations\": {\"swift.io/devices\": \"rxe1\"}"
	# a node no device here has: uverbs7 (231:199), as a broken plugin might pass
	mknod "$W/uverbs7" c 231 199 || fail "mknod uverbs7"
	ccfg bogus ", \"devices\": [{\"container_path\": \"/dev/infiniband/uverbs7\", \"host_path\": \"$W/uverbs7\", \"permissions\": \"rw\"}]"

	pod=$(crictl_ runp --runtime swift "$W/apod.json") || fail "crictl runp failed"
	for c in dp cdi both none; do
		id=$(crictl_ create "$pod" "$W/$c.json" "$W/apod.json") || fail "crictl create $c failed"
		crictl_ start "$id" || fail "crictl start $c failed"
		eval "id_$c=$id"
	done
	crictl_ ps -a
	cfacts dp "$id_dp"
	cfacts cdi "$id_cdi"
	cfacts both "$id_both"
	cfacts none "$id_none"
	# refused when the task is created (crictl start): the error names the
	# problem, no task runs and no lease is taken; the kubelet (here
	# crictl rm) removes the container record
	for c in outside bogus; do
		leases=$(SWIFT_CONFIG=$W/swift.toml swiftctl pools ls --leases | grep -c '^k8s.io/')
		id=$(crictl_ create "$pod" "$W/$c.json" "$W/apod.json") || fail "crictl create $c failed"
		if crictl_ start "$id" >"$W/$c.err" 2>&1; then
			fact "${c}_refused" 0
		else
			fact "${c}_refused" 1
		fi
		cat "$W/$c.err"
		errfact "${c}_error" "$W/$c.err" 'rxe1 is not among the devices allocated to the container (allocated: rxe0)\|/dev/infiniband/uverbs7 (c 231:199) is not an RDMA device on this node'
		fact "${c}_tasks" "$(ctr --address "$W/containerd.sock" -n k8s.io task ls -q | grep -c "^$id")"
		fact "${c}_leases" "$(($(SWIFT_CONFIG=$W/swift.toml swiftctl pools ls --leases | grep -c '^k8s.io/') - leases))"
		crictl_ rm "$id" >/dev/null || fail "crictl rm $c failed"
	done
	fact leases_in_pod "$(SWIFT_CONFIG=$W/swift.toml swiftctl pools ls --leases | grep -c '^k8s.io/')"
	crictl_ stopp "$pod" >/dev/null || fail "crictl stopp failed"
	crictl_ rmp "$pod" >/dev/null || fail "crictl rmp failed"
	fact pods_left "$(crictl_ pods -q | wc -l)"
	fact leases_left "$(SWIFT_CONFIG=$W/swift.toml swiftctl pools ls --leases | grep -c '^k8s.io/')"
	cp "$W/swift.default.toml" "$W/swift.toml"
}

# podip POD: the pod's address as CRI reports it.
podip() { crictl_ inspectp -o go-template --template '{{.status.network.ip}}' "$1"; }

# gid_of INDEX: rxe0's GID INDEX as the node's sysfs lists it.
gid_of() { cat "/sys/class/infiniband/rxe0/ports/1/gids/$1" 2>/dev/null; }

# v4gid A.B.C.D: the IPv4-mapped GID as sysfs prints it.
v4gid() { echo "$1" | awk -F. '{printf "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n", $1, $2, $3, $4}'; }

# cnipod NAME: run pod NAME (own network namespace) with RDMA opted in,
# create its worker and try to start it; facts NAME_ip, NAME_refused,
# NAME_tasks, and the start's output in $W/NAME.err.
cnipod() {
	cat >"$W/$1.json" <<JSON
{
  "metadata": {"name": "$1", "namespace": "default", "uid": "$1-$(cat /proc/sys/kernel/random/uuid)"},
  "log_directory": "$W/podlogs",
  "linux": {"security_context": {"namespace_options": {"pid": 1}}},
  "annotations": {"swift.io/rdma": "true", "swift.io/devices": "rxe0"}
}
JSON
	cat >"$W/$1-worker.json" <<JSON
{
  "metadata": {"name": "worker"},
  "image": {"image": "swift.local/vmroot:1"},
  "command": ["/bin/sleep", "3600"],
  "log_path": "$1-worker.log",
  "linux": {"security_context": {"namespace_options": {"pid": 1}}}
}
JSON
	pod=$(crictl_ runp --runtime swift "$W/$1.json") || fail "crictl runp $1 failed"
	ip=$(crictl_ inspectp -o go-template --template '{{.status.network.ip}}' "$pod")
	log "pod $1: $ip"
	fact "${1}_ip" "$ip"
	cid=$(crictl_ create "$pod" "$W/$1-worker.json" "$W/$1.json") || fail "crictl create $1 worker failed"
	if crictl_ start "$cid" >"$W/$1.err" 2>&1; then
		fact "${1}_refused" 0
	else
		fact "${1}_refused" 1
	fi
	cat "$W/$1.err"
	fact "${1}_tasks" "$(ctr --address "$W/containerd.sock" -n k8s.io task ls -q | grep -c "^$cid")"
	crictl_ rm "$cid" >/dev/null
	crictl_ stopp "$pod" >/dev/null || fail "crictl stopp $1 failed"
	crictl_ rmp "$pod" >/dev/null || fail "crictl rmp $1 failed"
}

# cninet NAME JSON-PLUGIN: the only CNI network, waited for until CRI loads it.
cninet() {
	rm -f "$W/cni/net.d/"*
	printf '{"cniVersion": "1.0.0", "name": "%s", "plugins": [%s]}\n' "$1" "$2" >"$W/cni/net.d/10-$1.conflist"
	i=0
	until crictl_ info 2>/dev/null | grep -q "\"Name\": \"$1\""; do
		i=$((i + 1))
		[ $i -lt 40 ] || fail "CRI never loaded the network $1 of $W/cni/net.d/10-$1.conflist"
		sleep 0.5
	done
}

scenario_cni() {
	need_rxe
	need_containerd
	[ -x "$SWIFTVM_CRICTL_DIR/crictl" ] || fail "crictl missing in SWIFTVM_CRICTL_DIR=$SWIFTVM_CRICTL_DIR (make deps)"
	for p in macvlan bridge host-local loopback; do
		[ -x "${SWIFTVM_CNI_DIR:-/nonexistent}/$p" ] ||
			fail "CNI plugin $p missing in SWIFTVM_CNI_DIR=${SWIFTVM_CNI_DIR:-} (make deps builds them into \$SWIFT_CNI_BIN)"
	done
	mkdir -p "$W/podlogs"
	rdma system show

	log "a macvlan of eth0 (rxe0's link): the pod's own address and GID, but no rxe socket in its namespace"
	cninet roce '{"type": "macvlan", "master": "eth0", "mode": "bridge",
	  "ipam": {"type": "host-local", "dataDir": "'"$W"'/cni/ipam", "ranges": [[{"subnet": "10.0.2.0/24", "rangeStart": "10.0.2.100", "rangeEnd": "10.0.2.120"}]]}}'
	# the pod's GID appears on rxe0 while its interface exists: watch for it
	# (the shell's own read, not cat: many short execs of binaries read
	# over 9p, beside runc's, have locked the guest up)
	( for i in $(seq 1 40); do
		for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do read -r v <"$g" 2>/dev/null && echo "$v"; done
		sleep 0.25
	done ) | sort -u >"$W/mv-gids" &
	watch=$!
	cnipod mv
	wait $watch
	mvip=$(grep '^mv_ip=' "$R/cni.facts" | cut -d= -f2)
	fact mv_ip_own "$([ -n "$mvip" ] && [ "$mvip" != 10.0.2.15 ] && echo 1 || echo 0)"
	gidhex=$(echo "$mvip" | awk -F. '{printf "%02x%02x:%02x%02x", $1, $2, $3, $4}')
	fact mv_gid_seen "$(grep -c "ffff:$gidhex\$" "$W/mv-gids")"
	errfact mv_error "$W/mv.err" 'device rxe0 is soft-RoCE (rxe), and the container.s network namespace net:\[[0-9]*\] has no socket on UDP port 4791'

	log "a bridge network: no GID of rxe0 for the pod's address"
	cninet br '{"type": "bridge", "bridge": "swbr0", "isGateway": true,
	  "ipam": {"type": "host-local", "dataDir": "'"$W"'/cni/ipam", "ranges": [[{"subnet": "10.88.0.0/24"}]]}}'
	cnipod br
	errfact br_error "$W/br.err" 'device rxe0 has no GID for an IPv4 address of the container.s network namespace net:\[[0-9]*\] (addresses: [0-9., ]*)'

	log "rdma.pod_softroce on a kernel whose rxe receives only in the node's namespace: refused, nothing left"
	cninet roce '{"type": "macvlan", "master": "eth0", "mode": "bridge",
	  "ipam": {"type": "host-local", "dataDir": "'"$W"'/cni/ipam", "ranges": [[{"subnet": "10.0.2.0/24", "rangeStart": "10.0.2.100", "rangeEnd": "10.0.2.120"}]]}}'
	swift_config 'pod_softroce = true'
	links0=$(rdma link show | sort)
	cnipod ps
	errfact ps_error "$W/ps.err" 'rdma.pod_softroce: [^:]*'
	fact ps_links_back "$([ "$(rdma link show | sort)" = "$links0" ] && echo 1 || echo 0)"
	cp "$W/swift.default.toml" "$W/swift.toml"

	log "RDMA netns exclusive mode: rxe0 cannot move into a pod"
	if rdma system set netns exclusive >"$W/excl.out" 2>&1; then
		fact excl_set ok
		cnipod ex
		errfact ex_error "$W/ex.err" 'RDMA network namespace mode is exclusive, and this node does not move devices'
		# allowed to move, the kernel refuses: 6.1's rxe cannot
		sed -i 's/^\[hooks\]$/[hooks]\nexclusive_move = true/' "$W/swift.toml"
		cnipod exmv
		errfact exmv_error "$W/exmv.err" 'RDMA network namespace mode is exclusive, and device rxe0 is soft-RoCE (rxe), which this kernel cannot move'
		fact exmv_rxe0_home "$(ls /sys/class/infiniband | grep -cx rxe0)"
		cp "$W/swift.default.toml" "$W/swift.toml"
		rdma system set netns shared || fail "cannot go back to shared mode"
	else
		fact excl_set "$(cat "$W/excl.out")"
	fi
	rdma system show
	fact mode_after "$(rdma system show | grep -o 'netns [a-z]*')"
	fact pods_left "$(crictl_ pods -q | wc -l)"
	rm -f "$W/cni/net.d/"*
}
