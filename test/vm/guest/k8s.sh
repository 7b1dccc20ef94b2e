# k8s.sh — the node side of the Kubernetes bed (sourced by scenarios.sh).
#
#   x-k8s  each guest of the pair is a Kubernetes node: a kubelet v1.37 on
#          its containerd's CRI, registered with the control plane the host
#          runs (test/vm/k8s.go) through the guest's second NIC (qemu's
#          user-mode network: 10.0.2.2 is the host's loopback). The host
#          drives every k8s- check with kubectl; this side only runs the
#          node, and the host's node-level requests (K8S/<node>/cmd.N, a
#          shell fragment run here, output in cmd.N.out, status in
#          cmd.N.rc), until the host writes K8S/done.
K8S=/run/swiftvm-shared/k8s

# kubelet_start: the kubelet, in the background, its log in the results share.
kubelet_start() {
	setsid /var/lib/swiftvm-k8s/kubelet --config "$W/kubelet.yaml" --kubeconfig "$K8S/$NODE/kubeconfig" \
		--hostname-override "$NODE" --node-ip "$MYIP" --root-dir /var/lib/kubelet \
		--cert-dir /var/lib/kubelet/pki >>"$R/kubelet.log" 2>&1 </dev/null &
	echo $! >"$W/kubelet.pid"
	log "kubelet started (pid $!)"
}

# stop_pidfile FILE: ends the process whose pid FILE holds (TERM, then
# KILL after 10 s) and removes FILE; nothing when there is no FILE.
stop_pidfile() {
	p=$(cat "$1" 2>/dev/null) || return 0
	kill "$p" 2>/dev/null
	i=0
	while kill -0 "$p" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -9 "$p" 2>/dev/null
	rm -f "$1"
}

# kubelet_stop: the kubelet only; its pods and their containers go on.
kubelet_stop() {
	stop_pidfile "$W/kubelet.pid"
	log "kubelet stopped"
}

# rxe1_start: a second soft-RoCE device on node a, rxe1 on a veth (with an
# IPv4 address: a host-network pod's device needs a GID for an address of
# the pod's namespace); prints its uverbs node.
rxe1_start() {
	ip link add k8sdp0 type veth peer name k8sdp1 && ip addr add 10.99.0.1/24 dev k8sdp0 &&
		ip link set k8sdp0 up && ip link set k8sdp1 up &&
		rdma link add rxe1 type rxe netdev k8sdp0 || { echo "cannot make rxe1"; return 1; }
	u=$(grep -lx rxe1 /sys/class/infiniband_verbs/uverbs*/ibdev | head -n1)
	u=$(basename "$(dirname "$u")")
	i=0
	until [ -c "/dev/infiniband/$u" ]; do
		i=$((i + 1))
		[ $i -lt 50 ] || { echo "no uverbs node of rxe1 ($u)"; return 1; }
		sleep 0.1
	done
	echo "rxe1 is $u"
}

rxe1_stop() {
	rdma link del rxe1 2>/dev/null
	ip link del k8sdp0 2>/dev/null
	true
}

# dp_start: rxe1 and the generic device plugin
# (github.com/squat/generic-device-plugin) with one device group, rxe1's
# uverbs node and rdma_cm: the extended resource swift.io/rdma-rxe1,
# count 1, handed out by DeviceSpecs.
dp_start() {
	rxe1_start || return 1
	mkdir -p /var/lib/swiftvm-k8s && cp "$SWIFTVM_K8S_DIR/generic-device-plugin" /var/lib/swiftvm-k8s/
	setsid /var/lib/swiftvm-k8s/generic-device-plugin --domain swift.io --listen 127.0.0.1:8080 \
		--device '{"name": "rdma-rxe1", "groups": [{"count": 1, "paths": [{"path": "/dev/infiniband/'"$u"'"}, {"path": "/dev/infiniband/rdma_cm"}]}]}' \
		>>"$R/device-plugin.log" 2>&1 </dev/null &
	echo $! >"$W/dp.pid"
	echo "device plugin started"
}

dp_stop() {
	[ -f "$W/dp.pid" ] || return 0
	kill "$(cat "$W/dp.pid")" 2>/dev/null
	rm -f "$W/dp.pid"
	rxe1_stop
}

# dra_start: Swift's node agent, swift-node, the DRA driver rdma.swift.io:
# rescanning only every hour, so that what it sees after its start comes
# from the kernel's netlink events; its further flags are dra_start's arguments; as
# a node binary with the kubelet's credentials (the Node authorizer
# lets a node manage its own ResourceSlices and read its pods' claims),
# writing the CDI spec where this node's containerd reads CDI specs.
dra_start() {
	mkdir -p /var/lib/swiftvm-k8s && cp "$SWIFTVM_BIN_DIR/swift-node" /var/lib/swiftvm-k8s/ || return 1
	setsid /var/lib/swiftvm-k8s/swift-node --kubeconfig "$K8S/$NODE/kubeconfig" --node-name "$NODE" \
		--config "$W/swift.toml" --cdi-dir "$W/cdi" --rescan 1h "$@" >>"$R/swift-node.log" 2>&1 </dev/null &
	echo $! >"$W/dra.pid"
	i=0
	until [ -S /var/lib/kubelet/plugins/rdma.swift.io/dra.sock ]; do
		i=$((i + 1))
		[ $i -lt 300 ] || { echo "swift-node made no socket in 30 s"; tail -n 20 "$R/swift-node.log"; return 1; }
		kill -0 "$(cat "$W/dra.pid")" 2>/dev/null || { echo "swift-node exited"; tail -n 20 "$R/swift-node.log"; return 1; }
		sleep 0.1
	done
	echo "swift-node started"
}

dra_stop() {
	stop_pidfile "$W/dra.pid"
}

# coredns_start: the cluster DNS, on this node's address, port 53 (the
# kubelets' clusterDNS, the other node's first); its kubernetes plugin
# answers the cluster's names (a headless Service's pods by hostname)
# with the bed's CoreDNS identity, and nothing else (no upstream: the
# nodes are air-gapped).
coredns_start() {
	cp "$SWIFTVM_K8S_DIR/coredns" /var/lib/swiftvm-k8s/ || return 1
	cat >"$W/Corefile" <<EOF
.:53 {
    bind $MYIP
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $K8S/$NODE/coredns.kubeconfig
        ttl 5
        fallthrough in-addr.arpa ip6.arpa
    }
}
EOF
	setsid /var/lib/swiftvm-k8s/coredns -conf "$W/Corefile" >>"$R/coredns.log" 2>&1 </dev/null &
	echo $! >"$W/coredns.pid"
	log "coredns started (pid $!)"
}

# install_runtime: the node's containerd gets Swift's runtime entry the way
# the README tells an operator. Its CRI config has a runc entry, as a
# node's has (the runner's config, without the swift entry it writes for
# the other scenarios); swiftctl install containerd adds the drop-in that
# copies runc's options, and containerd restarts. CRI pods get the node
# config the entry names (SwiftConfig); SWIFT_CONFIG stays in containerd's
# environment, as the runner sets it, for the scenarios after this one
# that run containers with ctr (no runtime options). The output and the
# drop-in go to K8S/<node>/install.out for the host's checks.
install_runtime() {
	cfg=$W/containerd.toml
	awk '/^\[plugins\."io\.containerd\.cri\.v1\.runtime"\.containerd\.runtimes\.swift\]/ {skip = 1; next}
		/^\[/ {skip = 0} !skip' "$cfg" >"$cfg.new" || return 1
	printf '%s\n' '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]' \
		'  runtime_type = "io.containerd.runc.v2"' \
		'[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]' \
		"  BinaryName = \"$(command -v runc)\"" \
		'  SystemdCgroup = false' >>"$cfg.new"
	mv "$cfg.new" "$cfg" || return 1
	swiftctl install containerd --config "$cfg" --swift-config "$W/swift.toml" >"$K8S/$NODE/install.out" 2>&1 || {
		cat "$K8S/$NODE/install.out"
		return 1
	}
	cat "$W/conf.d/swift.toml" >>"$K8S/$NODE/install.out"
	# the RuntimeClass swift-podnet's entry: its own node config
	# (rdma.pod_softroce) and its pods' network (cni_conf_dir)
	swiftctl install containerd --config "$cfg" --runtime-name swift-podnet --swift-config "$W/swift-podnet.toml" \
		--cni-conf-dir "$W/cni/podnet.d" >"$K8S/$NODE/install-podnet.out" 2>&1 || {
		cat "$K8S/$NODE/install-podnet.out"
		return 1
	}
	cat "$W/conf.d/swift-podnet.toml" >>"$K8S/$NODE/install-podnet.out"
	containerd_restart || return 1
	log "containerd restarted with the swift runtime entry swiftctl installed"
}

# bed_entries uninstall|install: the bed's own runtime entries (swift,
# swift-podnet) taken out of containerd's config, so that the chart's
# installer adds its own to a config without any (k8s-helm), and put back
# after it (with a restart) for the scenarios after this one.
bed_entries() {
	cfg=$W/containerd.toml
	case $1 in
	uninstall)
		swiftctl uninstall containerd --config "$cfg" --runtime-name swift-podnet &&
			swiftctl uninstall containerd --config "$cfg" --runtime-name swift
		;;
	install)
		swiftctl install containerd --config "$cfg" --swift-config "$W/swift.toml" &&
			swiftctl install containerd --config "$cfg" --runtime-name swift-podnet --swift-config "$W/swift-podnet.toml" \
				--cni-conf-dir "$W/cni/podnet.d" && containerd_restart
		;;
	esac
}

# containerd_restart: the node's containerd stopped and started again with
# its config.
containerd_restart() {
	stop_pidfile "$W/containerd.pid"
	PATH=$SWIFTVM_BIN_DIR:$SWIFTVM_CONTAINERD_DIR:$PATH SWIFT_CONFIG=$W/swift.toml \
		setsid "$SWIFTVM_CONTAINERD_DIR/containerd" --config "$W/containerd.toml" >>"$R/containerd.log" 2>&1 </dev/null &
	echo $! >"$W/containerd.pid"
	i=0
	until ctr --address "$W/containerd.sock" version >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -lt 120 ] || { echo "containerd not ready 60 s after its restart"; return 1; }
		sleep 0.5
	done
}

# containerd_service: what a node's systemd is to its containerd, for the
# chart's installer: its restart command ($W/restart-containerd, run in
# the node's root from the installer's pod) asks here, and containerd is
# restarted from this process, outside every pod's cgroup (a containerd
# started from the pod would die with it).
containerd_service() {
	cat >"$W/restart-containerd" <<EOF
#!/bin/sh
# the bed's "systemctl restart containerd"
rm -f $W/containerd.restarted
touch $W/containerd.restart
i=0
while [ ! -e $W/containerd.restarted ]; do
	i=\$((i + 1))
	[ \$i -lt 600 ] || { echo "containerd was not restarted within 120 s" >&2; exit 1; }
	sleep 0.2
done
[ "\$(cat $W/containerd.restarted)" = ok ] || { echo "containerd did not come back" >&2; exit 1; }
echo "containerd restarted"
EOF
	chmod 0755 "$W/restart-containerd"
	(
		while [ ! -e "$K8S/done" ]; do
			if [ -e "$W/containerd.restart" ]; then
				rm -f "$W/containerd.restart"
				if containerd_restart >>"$R/containerd-service.log" 2>&1; then r=ok; else r=fail; fi
				log "containerd restarted for the installer: $r"
				echo "$r" >"$W/containerd.restarted"
			fi
			sleep 0.2
		done
	) </dev/null >/dev/null 2>&1 &
	echo $! >"$W/containerd-service.pid"
}

scenario_x_k8s() {
	need_pair
	need_rxe
	need_containerd
	[ -n "${SWIFTVM_K8S_DIR:-}" ] && [ -x "$SWIFTVM_K8S_DIR/kubelet" ] ||
		fail "no kubelet in SWIFTVM_K8S_DIR=${SWIFTVM_K8S_DIR:-} (make deps builds Kubernetes)"
	[ -f "$K8S/$NODE/kubeconfig" ] || fail "the host wrote no kubeconfig for node $NODE in $K8S"
	STEP=network
	# the way to the control plane: the second NIC, to the host's loopback
	ip link set eth1 up || fail "no second NIC (eth1) for the control plane"
	ip addr add 10.0.2.15/24 dev eth1
	# pods: a bridge per node, 10.244.<1|2>.0/24, routed over the link
	case $NODE in
	a) sub=1 other=2 ;;
	*) sub=2 other=1 ;;
	esac
	ip route add "10.244.$other.0/24" via "$PEERIP" dev eth0
	cninet pods '{"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
	  "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.'"$sub"'.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
	  {"type": "loopback"}'
	# writable where the kubelet and the node agents write: the host root is
	# read-only in the guest
	# (a writable copy of /etc, as a node has: the keys DaemonSet
	# installs into /etc/swift/keys)
	mount -t tmpfs tmpfs /var/log || fail "tmpfs on /var/log"
	cp -a /etc /run/swiftvm-etc 2>/dev/null
	mount --bind /run/swiftvm-etc /etc || fail "a writable /etc"
	mkdir -p /etc/swift/keys || fail "mkdir /etc/swift/keys"
	printf 'nameserver %s\n' 10.0.2.3 >"$W/resolv.conf"
	# the node config: the example tenant policy, the keys where the
	# example DaemonSet installs them
	cp "$K8S/policy.toml" "$W/policy.toml"
	{
		echo "policy_path = \"$W/policy.toml\""
		sed -e '/^policy_path = /d' -e 's#^keys_dir = .*#keys_dir = "/etc/swift/keys"#' "$W/swift.default.toml"
	} >"$W/swift.toml"
	# pods of the RuntimeClass swift-podnet (examples/k8s/podnet.yaml): the
	# same node config with a soft-RoCE device of each pod's own, on a
	# macvlan of the link (rxe0's netdev) with an address range per node
	{
		cat "$W/swift.toml"
		echo 'pod_softroce = true'
	} >"$W/swift-podnet.toml"
	mkdir -p "$W/cni/podnet.d"
	printf '%s\n' '{"cniVersion": "1.0.0", "name": "podnet", "plugins": [{"type": "macvlan", "master": "eth0", "mode": "bridge",' \
		'  "ipam": {"type": "host-local", "dataDir": "'"$W"'/cni/ipam-podnet",' \
		'           "ranges": [[{"subnet": "10.0.3.0/24", "rangeStart": "10.0.3.1'"$sub"'1", "rangeEnd": "10.0.3.1'"$sub"'9"}]]}}]}' \
		>"$W/cni/podnet.d/10-podnet.conflist"
	STEP=install
	install_runtime || fail "install the swift runtime into containerd"
	containerd_service
	# the examples' images, preloaded as an air-gapped node has them: the
	# guest's image (busybox and the examples' /bin/worker) stands for each
	# (registry.example/log-shipper:1.0 is imported: its command waits)
	for ref in docker.io/library/busybox:1.37 registry.example/rdma-worker:1.0; do
		ctr --address "$W/containerd.sock" -n k8s.io images tag swift.local/vmroot:1 "$ref" ||
			fail "cannot tag the image $ref"
	done
	# the cluster DNS: the other node's CoreDNS first, then this node's. A
	# swift-podnet pod is on a macvlan of the link, and a macvlan reaches
	# every address on the link but its own node's (macvlan's rule).
	cat >"$W/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$W/containerd.sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $K8S/$NODE/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failSwapOn: false
resolvConf: $W/resolv.conf
clusterDomain: cluster.local
clusterDNS: [$PEERIP, $MYIP]
localStorageCapacityIsolation: false
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
nodeStatusReportFrequency: 10s
syncFrequency: 10s
EOF
	STEP=kubelet
	# a local copy: big binaries read over 9p have locked the guest up
	mkdir -p /var/lib/swiftvm-k8s && cp "$SWIFTVM_K8S_DIR/kubelet" /var/lib/swiftvm-k8s/ || fail "cannot copy the kubelet"
	coredns_start || fail "cannot start coredns"
	kubelet_start
	touch "$K8S/$NODE.started"
	# the host's requests, until it is done (or the scenario times out)
	n=1
	while [ ! -e "$K8S/done" ]; do
		if [ -e "$K8S/$NODE/cmd.$n" ]; then
			STEP="request $n"
			(. "$K8S/$NODE/cmd.$n") >"$K8S/$NODE/cmd.$n.out.tmp" 2>&1
			rc=$?
			mv "$K8S/$NODE/cmd.$n.out.tmp" "$K8S/$NODE/cmd.$n.out"
			echo $rc >"$K8S/$NODE/cmd.$n.rc.tmp" && mv "$K8S/$NODE/cmd.$n.rc.tmp" "$K8S/$NODE/cmd.$n.rc"
			n=$((n + 1))
			continue
		fi
		sleep 0.2
	done
	STEP=teardown
	stop_pidfile "$W/containerd-service.pid"
	dp_stop
	dra_stop
	rxe1_stop
	stop_pidfile "$W/coredns.pid"
	kubelet_stop
	fact requests $((n - 1))
	# the host judges its checks (the k8s- subtests); "finished" says it
	# got through them rather than giving up on the node
	fact host "$(cat "$K8S/done")"
	[ "$(cat "$K8S/done")" = finished ] || fail "the host gave up: $(cat "$K8S/done")"
}
