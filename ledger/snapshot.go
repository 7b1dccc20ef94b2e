package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/containerd/errdefs"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// SnapshotName is the file beside the ledger that holds its leases as of
// its last committed write: what a reader that must never hold the
// ledger's lock reads (the node agent's metrics). A reader holding the
// lock, even a shared one, would keep every Create waiting while it
// stalls.
const SnapshotName = "ledger.leases.json"

// maxSnapshot bounds what Snapshot reads: a ledger of 4096 leases of
// about 600 bytes each.
const maxSnapshot = 4 << 20

// snapshot is the content of SnapshotName.
type snapshot struct {
	Written time.Time `json:"written"`
	Leases  []Lease   `json:"leases"`
}

func (l *Ledger) snapshotPath() string { return filepath.Join(filepath.Dir(l.Path), SnapshotName) }

// writeSnapshot replaces the snapshot with leases, by a rename: a reader
// sees the old one or the new one. It is runtime state, not synced: after
// a crash, the next write replaces whatever is left. Errors are dropped:
// the ledger is the record, the snapshot only its reflection, and a reader
// that finds none reads the ledger (Snapshot).
func (l *Ledger) writeSnapshot(leases []Lease) {
	if leases == nil {
		leases = []Lease{}
	}
	sort.Slice(leases, func(i, j int) bool { return leases[i].Key() < leases[j].Key() })
	data, err := json.Marshal(snapshot{Written: time.Now().UTC(), Leases: leases})
	if err != nil {
		return
	}
	path := l.snapshotPath()
	f, err := os.CreateTemp(filepath.Dir(path), "."+SnapshotName+".tmp-*")
	if err != nil {
		return
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if cerr := f.Close(); werr != nil || cerr != nil || os.Rename(tmp, path) != nil {
		os.Remove(tmp)
	}
}

// snapshotOf writes the snapshot of the lease bucket db holds (a writer's,
// before it closes db, under the lock).
func (l *Ledger) snapshotOf(db *bolt.DB) {
	var leases []Lease
	err := db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			x, err := decode(k, v)
			if err == nil {
				leases = append(leases, x)
			}
			return nil
		})
	})
	if err == nil {
		l.writeSnapshot(leases)
	}
}

// Snapshot returns the leases as of the ledger's last committed write,
// ordered by key, and when that was, without taking the ledger's lock.
// With no snapshot (a ledger no writer of this version has changed yet)
// or one that does not decode, it lists the ledger itself, waiting at
// most wait for its lock. A missing ledger has no leases.
func (l *Ledger) Snapshot(wait time.Duration) ([]Lease, time.Time, error) {
	// not a FIFO's reader, not a link's follower: only a regular file is read
	f, err := os.OpenFile(l.snapshotPath(), os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		var s snapshot
		data, rerr := readBounded(f, maxSnapshot)
		f.Close()
		if rerr == nil && json.Unmarshal(data, &s) == nil && s.Leases != nil {
			return s.Leases, s.Written, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ELOOP) {
		return nil, time.Time{}, fmt.Errorf("ledger snapshot %s: %v: %w", l.snapshotPath(), err, errdefs.ErrFailedPrecondition)
	}
	if _, err := os.Stat(l.Path); errors.Is(err, os.ErrNotExist) {
		return []Lease{}, time.Time{}, nil
	}
	direct := *l
	direct.Timeout = wait
	leases, err := direct.List()
	if err != nil {
		return nil, time.Time{}, err
	}
	if leases == nil {
		leases = []Lease{}
	}
	return leases, time.Now().UTC(), nil
}

// readBounded reads f whole, refusing more than limit bytes.
func readBounded(f *os.File, limit int64) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > limit {
		return nil, fmt.Errorf("%s: not a regular file of at most %d bytes: %w", f.Name(), limit, errdefs.ErrInvalidArgument)
	}
	data := make([]byte, st.Size())
	n, err := f.ReadAt(data, 0)
	if err != nil && n != len(data) {
		return nil, err
	}
	return data, nil
}
