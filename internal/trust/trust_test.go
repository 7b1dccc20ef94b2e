package trust

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/errdefs"
)

// nobody plays the attacker: a user other than root.
const nobody = 65534

// fsT makes files, directories and links under a test's directory, each
// with exactly the mode and owner given (whatever the umask).
type fsT struct {
	t    *testing.T
	base string
}

func (f fsT) p(rel string) string { return filepath.Join(f.base, rel) }

func (f fsT) dir(rel string, mode fs.FileMode, uid int) {
	f.t.Helper()
	if err := os.Mkdir(f.p(rel), 0o700); err != nil {
		f.t.Fatal(err)
	}
	f.own(rel, mode, uid)
}

func (f fsT) file(rel string, mode fs.FileMode, uid int) {
	f.t.Helper()
	if err := os.WriteFile(f.p(rel), []byte("x\n"), 0o600); err != nil {
		f.t.Fatal(err)
	}
	f.own(rel, mode, uid)
}

func (f fsT) own(rel string, mode fs.FileMode, uid int) {
	f.t.Helper()
	if err := os.Chmod(f.p(rel), mode); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Chown(f.p(rel), uid, uid); err != nil {
		f.t.Fatal(err)
	}
}

func (f fsT) link(rel, target string, uid int) {
	f.t.Helper()
	if err := os.Symlink(target, f.p(rel)); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Lchown(f.p(rel), uid, uid); err != nil {
		f.t.Fatal(err)
	}
}

// TestCheck plays the attacker (uid 65534) against every entry of a path:
// the file, a directory above it, a symbolic link and what it points to,
// a directory holding a link on the way; a sticky world-writable
// directory such as /tmp is no way in. It needs root (chown).
func TestCheck(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestCheck gives files to another user (chown) and needs root (euid 0)")
	}
	const sticky = fs.ModeDir | fs.ModeSticky | 0o777
	tests := []struct {
		name  string
		setup func(f fsT)
		path  string // under the test's directory, D in messages
		euid  int    // the process's effective uid
		want  string // the resolved path, or the error (with a space)
	}{
		{"root's file in root's directories", func(f fsT) {
			f.dir("etc", 0o755, 0)
			f.file("etc/ring", 0o600, 0)
		}, "etc/ring", 0, "D/etc/ring"},
		{"a file owned by uid 65534", func(f fsT) {
			f.file("ring", 0o600, nobody)
		}, "ring", 0,
			"D/ring is owned by uid 65534 with mode -rw-------: it and every directory above it must be owned by root " +
				"and not writable by group or others (chown root:root D/ring; chmod go-w D/ring): failed precondition"},
		{"a group-writable file", func(f fsT) {
			f.file("swift-init", 0o775, 0)
		}, "swift-init", 0,
			"D/swift-init is owned by uid 0 with mode -rwxrwxr-x: it and every directory above it must be owned by root " +
				"and not writable by group or others (chown root:root D/swift-init; chmod go-w D/swift-init): failed precondition"},
		{"root's file in a directory of uid 65534", func(f fsT) {
			f.dir("bin", 0o755, nobody)
			f.file("bin/swift-init", 0o755, 0)
		}, "bin/swift-init", 0,
			"D/bin is owned by uid 65534 with mode drwxr-xr-x: it and every directory above it must be owned by root " +
				"and not writable by group or others (chown root:root D/bin; chmod go-w D/bin): failed precondition"},
		{"root's file in a group-writable directory", func(f fsT) {
			f.dir("bin", 0o775, 0)
			f.file("bin/swift-init", 0o755, 0)
		}, "bin/swift-init", 0,
			"D/bin is owned by uid 0 with mode drwxrwxr-x: it and every directory above it must be owned by root " +
				"and not writable by group or others (chown root:root D/bin; chmod go-w D/bin): failed precondition"},
		{"a directory two levels up of uid 65534", func(f fsT) {
			f.dir("opt", 0o755, nobody)
			f.dir("opt/swift", 0o755, 0)
			f.file("opt/swift/swift-run", 0o755, 0)
		}, "opt/swift/swift-run", 0,
			"D/opt is owned by uid 65534 with mode drwxr-xr-x: it and every directory above it must be owned by root " +
				"and not writable by group or others (chown root:root D/opt; chmod go-w D/opt): failed precondition"},
		{"a world-writable directory without the sticky bit", func(f fsT) {
			f.dir("drop", 0o777, 0)
			f.file("drop/ring", 0o400, 0)
		}, "drop/ring", 0,
			"D/drop is owned by uid 0 with mode drwxrwxrwx: it and every directory above it must be owned by root " +
				"and not writable by group or others (chown root:root D/drop; chmod go-w D/drop): failed precondition"},
		{"root's file in a sticky world-writable directory", func(f fsT) {
			f.dir("tmp", sticky, 0)
			f.file("tmp/ring", 0o400, 0)
		}, "tmp/ring", 0, "D/tmp/ring"},
		{"a file of uid 65534 in a sticky world-writable directory", func(f fsT) {
			f.dir("tmp", sticky, 0)
			f.file("tmp/ring", 0o400, nobody)
		}, "tmp/ring", 0,
			"D/tmp/ring is owned by uid 65534 with mode -r--------: it and every directory above it must be owned by root " +
				"and not writable by group or others (chown root:root D/tmp/ring; chmod go-w D/tmp/ring): failed precondition"},
		{"a link to a file of uid 65534", func(f fsT) {
			f.dir("evil", 0o755, 0)
			f.file("evil/ring", 0o400, nobody)
			f.link("ring", "evil/ring", 0)
		}, "ring", 0,
			"D/evil/ring is owned by uid 65534 with mode -r--------: it and every directory above it must be owned by root " +
				"and not writable by group or others (chown root:root D/evil/ring; chmod go-w D/evil/ring): failed precondition"},
		{"a link to a file in a directory of uid 65534", func(f fsT) {
			f.dir("home", 0o755, nobody)
			f.file("home/swift-hook", 0o755, 0)
			f.link("swift-hook", f.p("home/swift-hook"), 0) // absolute: the walk starts again at /
		}, "swift-hook", 0,
			"D/home is owned by uid 65534 with mode drwxr-xr-x: it and every directory above it must be owned by root " +
				"and not writable by group or others (chown root:root D/home; chmod go-w D/home): failed precondition"},
		{"root's link in a directory of uid 65534, to root's file", func(f fsT) {
			f.file("ring", 0o400, 0)
			f.dir("home", 0o755, nobody)
			f.link("home/ring", "../ring", 0)
		}, "home/ring", 0,
			"D/home is owned by uid 65534 with mode drwxr-xr-x: it and every directory above it must be owned by root " +
				"and not writable by group or others (chown root:root D/home; chmod go-w D/home): failed precondition"},
		{"a link of uid 65534 in a sticky directory, to root's file", func(f fsT) {
			f.file("ring", 0o400, 0)
			f.dir("tmp", sticky, 0)
			f.link("tmp/ring", "../ring", nobody)
		}, "tmp/ring", 0,
			"D/tmp/ring is a symbolic link owned by uid 65534: every link on the way must be owned by root " +
				"(chown -h root:root D/tmp/ring): failed precondition"},
		{"a chain of links through a directory of uid 65534", func(f fsT) {
			f.file("ring", 0o400, 0)
			f.dir("home", 0o755, nobody)
			f.link("home/hop", "../ring", 0)
			f.dir("etc", 0o755, 0)
			f.link("etc/ring", "../home/hop", 0)
		}, "etc/ring", 0,
			"D/home is owned by uid 65534 with mode drwxr-xr-x: it and every directory above it must be owned by root " +
				"and not writable by group or others (chown root:root D/home; chmod go-w D/home): failed precondition"},
		{"relative links and .. through root's directories", func(f fsT) {
			f.dir("lib", 0o755, 0)
			f.dir("lib/swift", 0o755, 0)
			f.file("lib/swift/swift-init", 0o755, 0)
			f.dir("bin", 0o755, 0)
			f.link("bin/swift", "../lib/swift", 0)
		}, "bin/swift/../swift/./swift-init", 0, "D/lib/swift/swift-init"},
		{"a non-root process's own file", func(f fsT) {
			f.dir("home", 0o700, nobody)
			f.file("home/team-a.keys", 0o400, nobody)
		}, "home/team-a.keys", nobody, "D/home/team-a.keys"},
		{"a non-root process and another user's file", func(f fsT) {
			f.file("team-a.keys", 0o400, 1000)
		}, "team-a.keys", nobody,
			"D/team-a.keys is owned by uid 1000 with mode -r--------: it and every directory above it must be owned by root or uid 65534 (this process's) " +
				"and not writable by group or others (chown root:root D/team-a.keys; chmod go-w D/team-a.keys): failed precondition"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := fsT{t, t.TempDir()}
			tc.setup(f)
			want := strings.ReplaceAll(tc.want, "D/", f.base+"/")
			path := f.base + "/" + tc.path // not cleaned: .. after a link is the link target's parent
			got, err := check(path, tc.euid, false)
			if !strings.Contains(tc.want, " ") { // a path: trusted
				if err != nil || got != want {
					t.Fatalf("check = %q, %v; want %q", got, err, want)
				}
				if ev, _ := filepath.EvalSymlinks(path); ev != got {
					t.Errorf("resolved %q, filepath.EvalSymlinks %q", got, ev)
				}
				return
			}
			if err == nil || err.Error() != want {
				t.Fatalf("check = %q, %v\nwant error %s", got, err, want)
			}
			if !errdefs.IsFailedPrecondition(err) {
				t.Errorf("error %v is not a FailedPrecondition", err)
			}
		})
	}
}

// TestCheckUnreadable: a path that does not resolve is the os error.
func TestCheckUnreadable(t *testing.T) {
	base := t.TempDir()
	if _, err := Check(filepath.Join(base, "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want ErrNotExist", err)
	}
	loop := filepath.Join(base, "loop")
	if err := os.Symlink("loop", loop); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(loop); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("a link to itself: %v, want ELOOP", err)
	}
	if got, err := Check("/"); err != nil || got != "/" {
		t.Errorf(`Check("/") = %q, %v`, got, err)
	}
}

// TestCheckDir: a directory used whole (mounted into containers) may not
// be writable by others even with the sticky bit: they could add to it.
func TestCheckDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestCheckDir gives files to another user (chown) and needs root (euid 0)")
	}
	tests := []struct {
		name  string
		setup func(f fsT)
		path  string
		want  string // the resolved path, or the error (with a space)
	}{
		{"root's directory", func(f fsT) { f.dir("bin", 0o755, 0) }, "bin", "D/bin"},
		{"root's directory in a sticky world-writable one", func(f fsT) {
			f.dir("tmp", fs.ModeDir|fs.ModeSticky|0o777, 0)
			f.dir("tmp/bin", 0o755, 0)
		}, "tmp/bin", "D/tmp/bin"},
		{"a sticky world-writable directory", func(f fsT) {
			f.dir("bin", fs.ModeDir|fs.ModeSticky|0o777, 0)
		}, "bin",
			"D/bin is owned by uid 0 with mode dtrwxrwxrwx: it and every directory above it must be owned by root " +
				"and not writable by group or others (chown root:root D/bin; chmod go-w D/bin): failed precondition"},
		{"a directory of uid 65534", func(f fsT) { f.dir("bin", 0o755, nobody) }, "bin",
			"D/bin is owned by uid 65534 with mode drwxr-xr-x: it and every directory above it must be owned by root " +
				"and not writable by group or others (chown root:root D/bin; chmod go-w D/bin): failed precondition"},
		{"a file", func(f fsT) { f.file("bin", 0o755, 0) }, "bin",
			"D/bin is not a directory (mode -rwxr-xr-x): failed precondition"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := fsT{t, t.TempDir()}
			tc.setup(f)
			want := strings.ReplaceAll(tc.want, "D/", f.base+"/")
			got, err := CheckDir(f.p(tc.path))
			if !strings.Contains(tc.want, " ") {
				if err != nil || got != want {
					t.Fatalf("CheckDir = %q, %v; want %q", got, err, want)
				}
				return
			}
			if err == nil || err.Error() != want || !errdefs.IsFailedPrecondition(err) {
				t.Fatalf("CheckDir = %q, %v\nwant the FailedPrecondition %s", got, err, want)
			}
		})
	}
}
