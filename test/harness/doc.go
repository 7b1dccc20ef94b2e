// Package harness runs a real containerd daemon on a private socket, root and
// state directory, with the Swift shim on its PATH, and builds container root
// filesystems from the host's busybox-static. Integration tests and
// `test/shimbench` (make bench) use it; nothing here is a stand-in for containerd or runc.
package harness
