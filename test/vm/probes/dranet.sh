#!/bin/sh
# dranet.sh — why DRANET v1.0.1 cannot be the bed's DRA driver for soft-RoCE,
# read from its source as the Go module proxy serves it (run on the host;
# needs Go and the proxy). It prints the lines that decide it and exits 0
# when all three hold, 1 when the source no longer says so (look again):
#
#   1. a DRANET device is a network interface: the pod gets the netdev,
#      RDMA devices come only as the netdev's companion
#   2. at the pod's sandbox start (NRI RunPodSandbox) the allocated netdev
#      is moved into the pod's network namespace (nsAttachNetdev): for rxe0
#      that is the node's link (eth0), which then leaves the node, and with
#      it rxe0 (rxe follows its netdev) and every other pod's RDMA on it
#   3. the RDMA device itself is moved only in RDMA netns exclusive mode,
#      where rxe cannot be moved before Linux 7.1
set -eu
v=v1.0.1
dir=$(GOFLAGS=-mod=mod go mod download -json "github.com/google/dranet@$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$dir" ] || { echo "cannot download github.com/google/dranet@$v"; exit 2; }
echo "DRANET $v source: $dir"
ok=0
show() { # FILE PATTERN WHAT
	if grep -n -- "$2" "$dir/$1" >/tmp/dranet-probe.$$; then
		echo "== $3 ($1)"
		sed 's/^/   /' /tmp/dranet-probe.$$
	else
		echo "== NOT FOUND: $3 ($1: $2)"
		ok=1
	fi
	rm -f /tmp/dranet-probe.$$
}
show pkg/driver/dra_hooks.go 'GetRdmaDeviceForNetdevice(ifName)' "1. the RDMA device is looked up from the allocated netdev"
show pkg/driver/nri_hooks.go 'nsAttachNetdev(ifName, ns' "2. RunPodSandbox moves the allocated netdev into the pod"
show pkg/driver/nri_hooks.go '!np.rdmaSharedMode && config.RDMADevice.LinkDev' "3. the RDMA link is moved only in exclusive mode"
exit $ok
