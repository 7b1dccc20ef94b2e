package ledger

import (
	"crypto/sha256"
	"encoding/hex"
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
	// Ledger is the sha256 of the ledger file the leases were read from:
	// a ledger written since (by a writer of an older version, which
	// leaves no snapshot) no longer matches it.
	Ledger string  `json:"ledger"`
	Leases []Lease `json:"leases"`
}

// maxLedgerRead bounds the ledger file Snapshot reads to compare.
const maxLedgerRead = 64 << 20

func (l *Ledger) snapshotPath() string { return filepath.Join(filepath.Dir(l.Path), SnapshotName) }

// writeSnapshot replaces the snapshot with leases, read from the ledger
// file whose content is ledger, by a rename: a reader sees the old one or
// the new one. It is runtime state, not synced: after a crash its sum no
// longer matches the ledger and readers read the ledger. A snapshot that
// cannot be written is removed: the ledger is the record, the snapshot
// only its reflection.
func (l *Ledger) writeSnapshot(leases []Lease, ledger []byte) {
	if leases == nil {
		leases = []Lease{}
	}
	sort.Slice(leases, func(i, j int) bool { return leases[i].Key() < leases[j].Key() })
	sum := sha256.Sum256(ledger)
	data, err := json.Marshal(snapshot{Written: time.Now().UTC(), Ledger: hex.EncodeToString(sum[:]), Leases: leases})
	if err != nil {
		l.dropSnapshot()
		return
	}
	path := l.snapshotPath()
	f, err := os.CreateTemp(filepath.Dir(path), "."+SnapshotName+".tmp-*")
	if err != nil {
		l.dropSnapshot()
		return
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if cerr := f.Close(); werr != nil || cerr != nil || os.Rename(tmp, path) != nil {
		os.Remove(tmp)
		l.dropSnapshot()
	}
}

// dropSnapshot removes the snapshot (a write it may no longer reflect).
func (l *Ledger) dropSnapshot() { os.Remove(l.snapshotPath()) }

// leasesOf reads the lease bucket of db (a writer's, before it closes
// db, under the lock).
func (l *Ledger) leasesOf(db *bolt.DB) []Lease {
	var leases []Lease
	_ = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if x, err := decode(k, v); err == nil {
				leases = append(leases, x)
			}
			return nil
		})
	})
	return leases
}

// Snapshot returns the leases as of the ledger's last committed write,
// ordered by key, and when that was, without taking the ledger's lock:
// the snapshot, if the ledger file is still the one it was read from.
// Otherwise (no snapshot yet, one that does not decode, a ledger written
// since by an older writer, or being written now) it lists the ledger
// itself, waiting at most wait for its lock. A missing ledger has no
// leases.
func (l *Ledger) Snapshot(wait time.Duration) ([]Lease, time.Time, error) {
	// not a FIFO's reader, not a link's follower: only a regular file is read
	f, err := os.OpenFile(l.snapshotPath(), os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		var s snapshot
		data, rerr := readBounded(f, maxSnapshot)
		f.Close()
		if rerr == nil && json.Unmarshal(data, &s) == nil && s.Leases != nil && l.ledgerIs(s.Ledger) {
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

// ledgerIs tells whether the ledger file's sha256 is sum.
func (l *Ledger) ledgerIs(sum string) bool {
	f, err := os.OpenFile(l.Path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	data, err := readBounded(f, maxLedgerRead)
	if err != nil {
		return false
	}
	got := sha256.Sum256(data)
	return hex.EncodeToString(got[:]) == sum
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
