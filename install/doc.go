// Package install adds the Swift runtime to a containerd configuration and
// removes it again, for `swiftctl install containerd` and
// `swiftctl uninstall containerd`.
//
// The runtime entry goes into a drop-in file in the directory that the root
// config's `imports` names (for example /etc/containerd/conf.d/*.toml). The
// drop-in's layout follows the root config's `version`:
//
//   - 2 (containerd 1.7): [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.NAME].
//     containerd 1.7 replaces a plugin's whole section with the last file's
//     (containerd#5837), so the drop-in also carries a copy of the root
//     config's [plugins."io.containerd.grpc.v1.cri"] settings.
//   - 3 (containerd 2.0+) and 4 (containerd 2.3+, the default of 2.4):
//     [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.NAME].
//
// The shim delegates to runc, so the entry runs runc as the node does: it
// copies every option of the node's runc entry (runtimes.runc.options, as
// containerd merges the root config and its imports: SystemdCgroup,
// BinaryName, Root, ShimCgroup, IoUid, ...), the way `nvidia-ctk runtime
// configure` does. Only what the operator asks for overrides them (--runc,
// which must name an executable file, and --systemd-cgroup), and
// SwiftConfig is the entry's own. An option the shim does not accept is
// not copied (the shim refuses unknown options) and the plan's notes say
// so. ReadCRI reads the runtime entries of a configuration, for doctor.
//
// Version 1 (or no `version` key, which containerd reads as 1) is refused,
// and so is a drop-in or an explicit version whose version differs from the
// root config's. A missing root config is refused unless a version is given,
// in which case a minimal one (version and imports) is created.
//
// When `imports` names no drop-in directory, one
// (DIR/conf.d/*.toml next to the root config) is added to the root config by
// a text edit that keeps the rest of the file byte for byte, under a marker
// comment; uninstall reverts exactly what the marker records. Files are
// written atomically (temporary file, fsync, rename). Planning is separate
// from applying, so a dry run shows the exact change as a unified diff, and a
// second install finds nothing to change.
//
// The examples in examples/containerd are this package's output for the
// default options (see TestExamplesAreGenerated).
package install
