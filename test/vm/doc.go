// Package vm is the soft-RoCE (rxe) VM test harness. It builds a guest (a
// Debian 6.1 kernel and a busybox initramfs with the rxe, 9p and virtio
// modules, cached under /var/cache/swift-build/vm), boots it once under qemu
// with the host root shared read-only over 9p and a per-run results directory
// shared read-write, and runs a batch of scenarios inside it: rxe itself, and
// containerd 2.4.2 + runc + the Swift shim giving containers RDMA.
//
// The guest side lives in guest/ (build.sh, init, runner.sh, scenarios.sh,
// mkrootfs.sh) and csrc/ (rdmaquota.c). Run it with `make test-vm` or
// `go test ./test/vm -v -count=1 -timeout 40m`; a missing prerequisite fails
// the test with a message naming it (`make deps` installs them, `make build`
// builds the shim). Environment variables are documented on ConfigFromEnv.
package vm
