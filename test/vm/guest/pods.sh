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

# second_rxe: rxe1 on a veth of its own (removed by drop_second_rxe).
second_rxe() {
	ip link add swa0 type veth peer name swa1 || fail "ip link add veth: the guest kernel lacks veth (build.sh modules)"
	ip link set swa0 up && ip link set swa1 up || fail "veth up"
	rdma link add rxe1 type rxe netdev swa0 || fail "rdma link add rxe1 on swa0 failed"
	i=0
	until grep -q ACTIVE /sys/class/infiniband/rxe1/ports/1/state 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 100 ] || fail "rxe1 port never became ACTIVE"
		sleep 0.1
	done
	ls -l /dev/infiniband
}
drop_second_rxe() {
	rdma link del rxe1 2>/dev/null
	ip link del swa0 2>/dev/null
}

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
	fact "${k}_rdma_max" "$(sort "/sys/fs/cgroup$cg/rdma.max" | tr '\n' ';')"
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
	trap drop_second_rxe EXIT
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
	fact cdi_devices "$(sed -n 's/^  name: //p' "$W/cdi/swift.io-rdma.yaml" | tr '\n' ' ' | sed 's/ $//')"
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
	for c in outside bogus; do
		before=$(crictl_ ps -a -q | wc -l)
		if crictl_ create "$pod" "$W/$c.json" "$W/apod.json" >"$W/$c.err" 2>&1; then
			fact "${c}_refused" 0
		else
			fact "${c}_refused" 1
		fi
		cat "$W/$c.err"
		fact "${c}_error" "$(grep -o 'device "rxe1" is not among the devices allocated to the container (allocated: rxe0)\|/dev/infiniband/uverbs7 (c 231:199) is not an RDMA device on this node' "$W/$c.err" | head -1)"
		fact "${c}_left" "$(($(crictl_ ps -a -q | wc -l) - before))"
	done
	fact leases_in_pod "$(SWIFT_CONFIG=$W/swift.toml swiftctl pools ls --leases | grep -c '^k8s.io/')"
	crictl_ stopp "$pod" >/dev/null || fail "crictl stopp failed"
	crictl_ rmp "$pod" >/dev/null || fail "crictl rmp failed"
	fact pods_left "$(crictl_ pods -q | wc -l)"
	fact leases_left "$(SWIFT_CONFIG=$W/swift.toml swiftctl pools ls --leases | grep -c '^k8s.io/')"
	cp "$W/swift.default.toml" "$W/swift.toml"
}
