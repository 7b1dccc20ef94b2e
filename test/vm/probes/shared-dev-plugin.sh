# Probe: the RDMA shared device plugin (github.com/Mellanox/k8s-rdma-shared-dev-plugin
# v1.5.3) on a soft-RoCE node. Build it first (its go.mod has replace
# directives, so inside a writable copy of its module):
#   cp -r "$(go mod download -json github.com/Mellanox/k8s-rdma-shared-dev-plugin@v1.5.3 | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')" /tmp/dp
#   chmod -R u+w /tmp/dp && cd /tmp/dp && GOWORK=off GOFLAGS=-mod=mod go build -o /var/cache/swift-build/probe-dp/ ./cmd/k8s-rdma-shared-dp
# then run it in the guest:
#   SWIFT_VM_SCENARIOS=probe SWIFT_VM_KERNEL=7.3 SWIFT_VM_PROBE=$PWD/test/vm/probes/shared-dev-plugin.sh make test-vm
# It discovers PCI network devices and their RDMA devices under
# /sys/bus/pci/devices/<addr>/infiniband; rxe0's device is virtual
# (/sys/devices/virtual/infiniband/rxe0), so it reports
# "missing RDMA device spec for device 0000:00:03.0, RDMA device "rdma_cm" not found"
# and advertises no device (measured 2026-12-06).
D=${SWIFT_DP_DIR:-/var/cache/swift-build/probe-dp}
echo "--- rxe0 in sysfs"
readlink -f /sys/class/infiniband/rxe0/device /sys/class/infiniband/rxe0
echo "--- eth0's PCI device"
readlink -f /sys/class/net/eth0/device
ls "$(readlink -f /sys/class/net/eth0/device)/infiniband" 2>&1
mkdir -p /run/dp /var/lib/kubelet/device-plugins
cat >/run/dp/config.json <<J
{"periodicUpdateInterval": 300, "configList": [
 {"resourceName": "hca_shared_devices_a", "rdmaHcaMax": 100, "selectors": {"ifNames": ["eth0"]}},
 {"resourceName": "hca_shared_devices_b", "rdmaHcaMax": 100, "selectors": {"drivers": ["virtio-pci", "virtio_net"]}}
]}
J
timeout 8 "$D/k8s-rdma-shared-dp" -config-file /run/dp/config.json 2>&1 | head -40
echo "--- done"
