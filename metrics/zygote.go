package metrics

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/inject"
	"github.com/swift-rdma/swift-containerd/ledger"
	"github.com/swift-rdma/swift-containerd/policy"
)

// StatusPath is where a zygote keeps its status file in its container.
const StatusPath = inject.ZygoteRunDir + "/pool.status"

// maxStatus bounds a status file (the zygote's own bound, SWIFT_STATUS_MAX).
const maxStatus = 96 * 1024

// maxPeers is the zygote's bound on peers (SWIFT_MAX_PEERS).
const maxPeers = 32

// RowStates are the figures of a zygote's "rows" status line, in order:
// its pool's QPs by state, the functions' own QPs (connected on demand),
// and the tenant's QP limit on the container (0: none).
var RowStates = []string{"total", "free", "assigned", "held", "pending", "reclaim", "broken", "own", "limit"}

// PeerStates are the states of a peer on a "peer" status line.
var PeerStates = []string{"connected", "waiting", "refused"}

// Pool is a zygote's figures, from its status file.
type Pool struct {
	// Rows holds the "rows" line's figures (RowStates); nil when the
	// zygote has no device.
	Rows  map[string]int
	Peers map[string]int // peers by state (PeerStates)
}

// ParseStatus reads a zygote's status text: its "rows" line and its
// "peer" lines; other lines are not figures. The file lives where the
// container's functions can write it, so it is read as hostile: a known
// key, a plain number below 65536 each, at most one rows line and 32
// peers, a known peer state.
func ParseStatus(b []byte) (Pool, error) {
	p := Pool{Peers: map[string]int{}}
	if len(b) > maxStatus {
		return p, fmt.Errorf("status of %d bytes: at most %d: %w", len(b), maxStatus, errdefs.ErrInvalidArgument)
	}
	npeers := 0
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "rows":
			if p.Rows != nil {
				return p, fmt.Errorf("status line %d: a second rows line: %w", i+1, errdefs.ErrInvalidArgument)
			}
			p.Rows = map[string]int{}
			for _, kv := range f[1:] {
				k, v, ok := strings.Cut(kv, "=")
				n, err := strconv.ParseUint(v, 10, 16)
				if !ok || err != nil || !known(RowStates, k) || len(v) > 5 {
					return p, fmt.Errorf("status line %d: %q: want KEY=N with KEY one of %v: %w", i+1, kv, RowStates, errdefs.ErrInvalidArgument)
				}
				if _, dup := p.Rows[k]; dup {
					return p, fmt.Errorf("status line %d: %s twice: %w", i+1, k, errdefs.ErrInvalidArgument)
				}
				p.Rows[k] = int(n)
			}
			if len(p.Rows) != len(RowStates) {
				return p, fmt.Errorf("status line %d: has %d of the %d figures %v: %w", i+1, len(p.Rows), len(RowStates), RowStates, errdefs.ErrInvalidArgument)
			}
		case f[0] == "peer":
			// peer NAME HOST:PORT STATE free N assigned N
			if len(f) < 4 || !known(PeerStates, f[3]) {
				return p, fmt.Errorf("status line %d: a peer line without a state of %v: %w", i+1, PeerStates, errdefs.ErrInvalidArgument)
			}
			if npeers++; npeers > maxPeers {
				return p, fmt.Errorf("status: more than %d peers: %w", maxPeers, errdefs.ErrInvalidArgument)
			}
			p.Peers[f[3]]++
		}
	}
	return p, nil
}

func known(set []string, s string) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}

// Container names a lease's container for the metrics: the ledger's
// namespace, ID and tenant, and the pod from the bundle's spec.
type Container struct {
	Namespace, ID, Tenant string
	PodNamespace, Pod     string
}

// readPool reads the status file of the zygote of lease x, if its
// container has one (ok false when it has none or is gone).
//
// The zygote is found through the bundle's init.pid, trusted only as the
// child of the lease's live shim; its file is opened under the container's
// root (RESOLVE_IN_ROOT: no path or link in the container leads out), not
// following a final link, not waiting on a FIFO, and read only if it is a
// regular file within bounds.
func readPool(procRoot string, selfNS uint64, x ledger.Lease) (p Pool, ok bool, err error) {
	if x.Owner.PID <= 0 || (x.Owner.PIDNS != 0 && x.Owner.PIDNS != selfNS) || !filepath.IsAbs(x.Bundle) {
		return p, false, nil // no shim this process can judge
	}
	b, err := readSmall(unix.AT_FDCWD, filepath.Join(x.Bundle, "init.pid"), 0, 32, false)
	if errors.Is(err, os.ErrNotExist) {
		return p, false, nil
	}
	if err != nil {
		return p, false, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return p, false, fmt.Errorf("%s/init.pid: %q is not a pid: %w", x.Bundle, b, errdefs.ErrInvalidArgument)
	}
	if ppid, err := ledger.Parent(procRoot, pid); err != nil || ppid != x.Owner.PID {
		return p, false, nil // exited; the pid may be another's now
	}
	root, err := unix.Open(filepath.Join(procRoot, strconv.Itoa(pid), "root"), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return p, false, nil
	}
	defer unix.Close(root)
	b, err = readSmall(root, strings.TrimPrefix(StatusPath, "/"), unix.RESOLVE_IN_ROOT|unix.RESOLVE_NO_MAGICLINKS, maxStatus, true)
	if errors.Is(err, os.ErrNotExist) {
		return p, false, nil // no zygote in this container
	}
	if err != nil {
		return p, false, fmt.Errorf("container %s: zygote status: %w", x.Key(), err)
	}
	p, err = ParseStatus(b)
	if err != nil {
		return p, false, fmt.Errorf("container %s: zygote status: %w", x.Key(), err)
	}
	// the ppid again: the status read is the container's only if its
	// init was still the shim's child after it
	if ppid, err := ledger.Parent(procRoot, pid); err != nil || ppid != x.Owner.PID {
		return Pool{}, false, nil
	}
	return p, true, nil
}

// readSmall reads name under dir (openat2 with resolve), a regular file
// of at most limit bytes. It first takes an O_PATH handle, which opens
// nothing (a device node's open would act, a FIFO's would wait), without
// following the last component, and opens the file itself for reading
// only once the handle shows a regular file. onTmpfs also requires the
// file to be on a tmpfs (a zygote's /run/swift).
func readSmall(dir int, name string, resolve uint64, limit int64, onTmpfs bool) ([]byte, error) {
	pfd, err := unix.Openat2(dir, name, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: resolve,
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: name, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > limit {
		return nil, fmt.Errorf("%s: not a regular file of at most %d bytes: %w", name, limit, errdefs.ErrInvalidArgument)
	}
	if onTmpfs {
		var fs unix.Statfs_t
		if err := unix.Fstatfs(pfd, &fs); err != nil || fs.Type != unix.TMPFS_MAGIC {
			return nil, fmt.Errorf("%s: not on a tmpfs: %w", name, errdefs.ErrInvalidArgument)
		}
	}
	// the handle's own file, opened for reading: no path is walked again
	fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", pfd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	b := make([]byte, st.Size+1)
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if n > int(st.Size) {
		return nil, fmt.Errorf("%s: grew past %d bytes while read: %w", name, st.Size, errdefs.ErrInvalidArgument)
	}
	return b[:n], nil
}

// podOf names the pod of a lease's container from its bundle's spec
// (the CRI's annotations; "" for a container of no pod).
func podOf(bundle string) (ns, pod string) {
	b, err := readSmall(unix.AT_FDCWD, filepath.Join(bundle, "config.json"), 0, 4<<20, false)
	if err != nil {
		return "", ""
	}
	var s struct {
		Annotations map[string]string `json:"annotations"`
	}
	if json.Unmarshal(b, &s) != nil {
		return "", ""
	}
	return s.Annotations[policy.CRISandboxNamespace], s.Annotations[annotations.CRISandboxName]
}
