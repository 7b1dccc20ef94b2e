package trust

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/containerd/errdefs"
)

// maxLinks bounds the symbolic links followed for one path (Linux's
// MAXSYMLINKS).
const maxLinks = 40

// Check resolves path (relative to the working directory when not
// absolute) and checks every entry on the way, from "/" to the file,
// symbolic links and their targets included: each must be owned by root
// (or by the process's effective uid when that is not root) and, unless
// it is a symbolic link or a directory with the sticky bit, not writable
// by group or others. It returns the resolved path (what
// filepath.EvalSymlinks returns). An untrusted entry is a
// FailedPrecondition naming it, its owner and mode, and the fix; an entry
// that cannot be read is the os error.
func Check(path string) (string, error) {
	return check(path, os.Geteuid(), false)
}

// CheckDir is Check for a directory used whole, such as one mounted into
// containers: the directory itself may not be writable by group or others
// even with the sticky bit, which would let them add entries to it.
func CheckDir(path string) (string, error) {
	return check(path, os.Geteuid(), true)
}

// check is Check for a process of effective uid euid; whole makes it
// CheckDir.
func check(path string, euid int, whole bool) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if err := checkEntry("/", euid); err != nil {
		return "", err
	}
	cur, rest, links := "/", components(abs), 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case ".":
			continue
		case "..":
			cur = filepath.Dir(cur) // cur has no link in it: its parent was checked on the way
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if err != nil {
			return "", err
		}
		if err := checkInfo(next, fi, euid); err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", &fs.PathError{Op: "resolve", Path: path, Err: syscall.ELOOP}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		rest = append(components(target), rest...)
	}
	if whole {
		fi, err := os.Lstat(cur)
		if err != nil {
			return "", err
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("%s is not a directory (mode %v): %w", cur, fi.Mode(), errdefs.ErrFailedPrecondition)
		}
		if fi.Mode().Perm()&0o022 != 0 {
			return "", untrusted(cur, fi, euid)
		}
	}
	return cur, nil
}

// components splits a path into its names, dropping empty ones.
func components(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

func checkEntry(p string, euid int) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	return checkInfo(p, fi, euid)
}

// checkInfo checks one entry: its owner, and its mode unless it is a
// symbolic link (always 0777, and only its directory can replace it) or a
// sticky directory.
func checkInfo(p string, fi fs.FileInfo, euid int) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner to check: %w", p, errdefs.ErrFailedPrecondition)
	}
	trustedOwner := st.Uid == 0 || (euid > 0 && st.Uid == uint32(euid))
	if fi.Mode()&fs.ModeSymlink != 0 {
		if !trustedOwner {
			return fmt.Errorf("%s is a symbolic link owned by uid %d: every link on the way must be owned by %s (chown -h root:root %s): %w",
				p, st.Uid, owners(euid), p, errdefs.ErrFailedPrecondition)
		}
		return nil
	}
	open := fi.Mode().Perm()&0o022 != 0 && !(fi.IsDir() && fi.Mode()&fs.ModeSticky != 0)
	if !trustedOwner || open {
		return untrusted(p, fi, euid)
	}
	return nil
}

// untrusted is the error for an entry others own or may write.
func untrusted(p string, fi fs.FileInfo, euid int) error {
	var uid uint32
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		uid = st.Uid
	}
	return fmt.Errorf("%s is owned by uid %d with mode %v: it and every directory above it must be owned by %s "+
		"and not writable by group or others (chown root:root %s; chmod go-w %s): %w",
		p, uid, fi.Mode(), owners(euid), p, p, errdefs.ErrFailedPrecondition)
}

// owners names whom a process of effective uid euid trusts.
func owners(euid int) string {
	if euid != 0 {
		return fmt.Sprintf("root or uid %d (this process's)", euid)
	}
	return "root"
}
