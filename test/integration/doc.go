// Package integration tests the Swift shim with a real containerd daemon and
// real runc: containers run through io.containerd.swift.v2 beside
// io.containerd.runc.v2, with fake RDMA device trees for injection on a host
// without RDMA. Needs root, `make deps` and `make build`; a missing part
// fails the tests with a message naming it.
package integration
