// Package trust checks that a file the shim runs or reads as root could
// not have been written, or swapped for another, by anyone but root:
// swift-hook (hooks.path), which runc runs as root for every opted-in
// container; swift-init and swift-run in zygote.bin_dir, swift-init being
// PID 1 of every zygote container; and the tenant keyrings fed to
// zygotes.
//
// Check walks the path from "/" the way the kernel resolves it, symbolic
// links included, and checks every entry it meets: each directory on the
// way, each symbolic link (and so the directory holding it) and the file
// itself. Each must be owned by root and not writable by group or others.
// A directory with the sticky bit (such as /tmp, mode 1777) may be
// writable by others: they cannot rename or remove the entries they do
// not own, and the entry the walk takes next is checked in turn. Since
// nobody but root can then change what the path names, a caller may use
// the path as given or the resolved one Check returns (the path
// filepath.EvalSymlinks returns). Checking only that resolved path would
// miss a link in a directory another user may write, which they could
// point elsewhere after the check.
//
// CheckDir is for a directory used whole (zygote.bin_dir, mounted into
// every zygote container): the directory itself may not be writable by
// others even with the sticky bit, which lets them add entries.
//
// A process that does not run as root (swiftctl or swiftctl doctor run by
// an operator) also trusts what its own effective uid owns: it cannot be
// protected from itself, and an operator's own files stay usable. The
// shim runs as root and trusts root only.
package trust
