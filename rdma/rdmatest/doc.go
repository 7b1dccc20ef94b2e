// Package rdmatest builds fake RDMA device trees (sysfs files and real
// character device nodes made with mknod) for tests of discovery and
// injection on nodes without RDMA. Making device nodes needs root.
package rdmatest
