// Package nodeinstall installs Swift onto a Kubernetes node from the
// image the chart's installer DaemonSet runs, and takes it off again, as
// kata-deploy does for Kata Containers:
//
//   - it copies the shim, swift-hook, swiftctl and the zygote's files
//     (PREFIX/bin, PREFIX/lib/swift) onto the node;
//   - it runs the node's copy of `swiftctl install containerd` in the
//     node's root (so every path it reads and checks is the node's), with
//     the shim as the entry's runtime_path;
//   - it runs the node's command that restarts containerd, only when
//     containerd's config changed;
//   - it labels the node (the RuntimeClass schedules onto the label).
//
// A manifest in the node's state directory records what it did: each file
// it wrote with its digest, a foreign file it set aside, each directory it
// made, containerd's config files as they were before and their digests
// after, and the label's previous value. Uninstall undoes exactly that: a
// file someone changed since is left where it is (and said so), and a
// containerd config someone edited since is repaired by `swiftctl
// uninstall containerd` instead of restored. Install is idempotent: a
// second run, as after the installer's pod restarts, changes nothing and
// restarts nothing.
//
// The node's file system is reached through its root directory (a hostPID
// pod's /proc/1/root), every path resolved with RESOLVE_IN_ROOT.
package nodeinstall
