// Package version tells which build of Swift a binary is: the project's
// version, stamped at build time from git (the Makefile's build line sets
// Version with -ldflags "-X github.com/swift-rdma/swift-containerd/internal/version.Version=$(git describe --tags --always --dirty)"),
// and the containerd library version actually linked into it, read from
// the binary's own build information.
package version
