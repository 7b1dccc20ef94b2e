// Package cri tests the Swift runtime on the Kubernetes path: a real
// containerd with its CRI plugin, driven by crictl, runs a host-network pod
// whose runtime handler "swift" is io.containerd.swift.v2. Images (a static
// pause program and Debian's busybox-static) are built locally and imported:
// no registry, no CNI. Needs root, `make deps` (containerd, crictl, runc,
// busybox-static) and `make build`; a missing part fails the test with a
// message naming it.
package cri
