// Package rdma discovers the node's RDMA devices: the verbs devices in sysfs
// (/sys/class/infiniband, /sys/class/infiniband_verbs), the rdma_cm misc
// device, and their character device nodes under /dev/infiniband. Both roots
// are injectable so tests run on fake trees. A device node whose number does
// not match sysfs is an error: libibverbs would otherwise wait 5 s per open.
package rdma
