// Package doctor checks whether a node can run Swift containers and says
// how to fix what it cannot: RDMA kernel support and devices (with their
// uverbs numbers), rdma_cm, the RDMA network-namespace mode and
// copy-on-fork (netlink RDMA_NLDEV_CMD_SYS_GET), each device's provider
// capability for fork sharing, RLIMIT_MEMLOCK, the rdma cgroup controller,
// the node config, and the containerd and runc versions against the support
// matrix.
//
// Every check yields one Result: OK, WARN or FAIL, a one-line detail, and a
// one-line fix when it is not OK. All inputs (sysfs, /dev, /proc, /boot and
// cgroup roots, netlink, rlimits, the binaries run for versions) come from a
// Node, so tests run the checks on fake trees.
package doctor
