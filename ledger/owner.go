package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Owner is the shim process that holds a lease.
type Owner struct {
	PID int `json:"pid"`
	// Start is the process's start time (clock ticks after boot, field 22
	// of /proc/PID/stat): a recycled PID has another.
	Start uint64 `json:"start"`
	// PIDNS is the inode of the owner's PID namespace (0: not recorded):
	// its PID means nothing to a process in another one.
	PIDNS uint64 `json:"pidns,omitempty"`
}

// Self returns the calling process as an Owner.
func Self() Owner {
	pid := os.Getpid()
	start, _, _ := procStat("/proc", pid)
	return Owner{PID: pid, Start: start, PIDNS: PIDNamespace("/proc")}
}

// PIDNamespace returns the inode of the PID namespace proc/self lives in
// (0 when it cannot be read): an Owner's PIDNS, to compare with before
// its PID is looked up under proc.
func PIDNamespace(proc string) uint64 {
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(proc, "self", "ns", "pid"), &st); err != nil {
		return 0
	}
	return st.Ino
}

// statFields returns the fields of proc/PID/stat after the command's
// closing parenthesis: f[0] is field 3 (state).
func statFields(proc string, pid int) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return strings.Fields(s[i+1:]), nil
}

// procStat returns a process's start time and state letter.
func procStat(proc string, pid int) (start uint64, state byte, err error) {
	f, err := statFields(proc, pid)
	if err != nil {
		return 0, 0, err
	}
	// field 22 (starttime) is f[19].
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return start, f[0][0], err
}

// Parent returns a process's parent PID (field 4 of proc/PID/stat): a
// lease's container init is its shim's child.
func Parent(proc string, pid int) (int, error) {
	f, err := statFields(proc, pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 2 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return strconv.Atoi(f[1])
}

// Alive tells whether the container of a lease may still exist: its
// bundle directory is there and its shim process runs (same PID and start
// time, not a zombie). When in doubt it says alive, so that a lease is
// never reclaimed from a container that runs: a stat error other than
// "not found", a bundle whose containerd task directory is not seen
// either (another mount namespace), a /proc that cannot be read (EMFILE,
// EACCES), one that does not show every process (hidepid, or no PID 1),
// or a caller in another PID namespace than the shim's.
func Alive(l Lease) bool { return aliveIn("/proc", PIDNamespace("/proc"), l) }

func aliveIn(proc string, selfNS uint64, l Lease) bool {
	if l.Bundle != "" {
		// a bundle counts as gone only where containerd's task directory
		// (…/io.containerd.runtime.v2.task, two levels up) is seen: a
		// caller in another mount namespace sees neither
		if _, err := os.Stat(l.Bundle); errors.Is(err, os.ErrNotExist) {
			if _, err := os.Stat(filepath.Dir(filepath.Dir(l.Bundle))); err == nil {
				return false
			}
		}
	}
	if l.Owner.PID <= 0 {
		return true
	}
	// Can this /proc judge the owner's PID at all?
	if l.Owner.PIDNS != 0 && l.Owner.PIDNS != selfNS {
		return true
	}
	if _, _, err := procStat(proc, 1); err != nil {
		return true
	}
	start, state, err := procStat(proc, l.Owner.PID)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false
	case err != nil:
		return true
	}
	return !((l.Owner.Start != 0 && start != l.Owner.Start) || state == 'Z' || state == 'X')
}
