// Package doctor checks whether a node can run Swift containers and says
// how to fix what it cannot: RDMA kernel support and devices (with their
// uverbs numbers), rdma_cm, the RDMA network-namespace mode and
// copy-on-fork (netlink RDMA_NLDEV_CMD_SYS_GET), each device's provider
// capability for fork sharing, the rdma cgroup controller, the node config,
// the containerd and runc versions against the support matrix, and what
// containerd itself needs to run Swift containers: its RLIMIT_MEMLOCK
// (read from the containerd process, whose limits the shim inherits), the
// shim on containerd's PATH, swift-hook root's and beside the shim (or at
// hooks.path), swift-init and swift-run in zygote.bin_dir, and a CRI
// runtime entry of the Swift type that passes the swift.io/ annotations.
//
// Every check yields one Result: OK, WARN or FAIL, a one-line detail, and a
// one-line fix, written for the operator (what to run or edit), when it is
// not OK. All inputs (sysfs, /dev, /proc, /boot and cgroup roots,
// containerd's pid file and config, netlink, the binaries run for versions)
// come from a Node, so tests run the checks on fake trees.
package doctor
