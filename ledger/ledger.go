package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/containerd/errdefs"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"golang.org/x/sys/unix"

	"github.com/swift-rdma/swift-containerd/internal/lockfile"
)

// FileName is the ledger's name in the state dir.
const FileName = "ledger.db"

// DefaultTimeout bounds how long an operation waits for another process
// holding the ledger. Creates queue on it: 64 parallel creates on 2 CPUs
// took 15 s in all, and with 5 s here some of them gave up waiting.
const DefaultTimeout = 30 * time.Second

var bucket = []byte("leases")

// Ledger is the ledger file at Path. Each method opens it, does one
// transaction and closes it.
type Ledger struct {
	Path string
	// Timeout bounds the wait for the lock (DefaultTimeout when 0).
	Timeout time.Duration
	// CheckTimeout bounds a check of a file the ledger's last writer did
	// not leave (DefaultCheckTimeout when 0).
	CheckTimeout time.Duration
	// Alive decides whether a lease's container may still exist (the
	// package's Alive when nil).
	Alive func(Lease) bool
}

// New returns the ledger of a state dir.
func New(stateDir string) *Ledger { return &Ledger{Path: filepath.Join(stateDir, FileName)} }

func (l *Ledger) alive(x Lease) bool {
	if l.Alive != nil {
		return l.Alive(x)
	}
	return Alive(x)
}

// lock takes the ledger's lock file (lockfile.Flock: polling finely).
func (l *Ledger) lock(exclusive bool) (*os.File, time.Time, error) {
	timeout := l.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	deadline := time.Now().Add(timeout)
	dir := filepath.Dir(l.Path)
	if exclusive {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, deadline, fmt.Errorf("ledger %s: %v: %w", l.Path, err, errdefs.ErrFailedPrecondition)
		}
	}
	f, err := os.OpenFile(l.Path+".lock", os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, deadline, fmt.Errorf("ledger %s: lock file: %v: %w", l.Path, err, errdefs.ErrFailedPrecondition)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	switch err := lockfile.Flock(f, how, deadline); {
	case err == nil:
		return f, deadline, nil
	case errors.Is(err, lockfile.ErrTimeout):
		f.Close()
		return nil, deadline, fmt.Errorf("ledger %s: still locked by another process after %v: %w", l.Path, timeout, errdefs.ErrUnavailable)
	default:
		f.Close()
		return nil, deadline, fmt.Errorf("ledger %s: lock: %v: %w", l.Path, err, errdefs.ErrFailedPrecondition)
	}
}

// open locks the ledger and opens the database; release with the returned func.
//
// bbolt opens the file only once check trusts it.
func (l *Ledger) open(readOnly bool) (_ *bolt.DB, _ func(committed bool), retErr error) {
	lf, deadline, err := l.lock(!readOnly)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if retErr != nil {
			lf.Close()
		}
	}()
	if _, err := os.Stat(l.Path); err == nil {
		if err := l.check(); err != nil {
			return nil, nil, err
		}
	}
	remaining := time.Until(deadline)
	if remaining < 100*time.Millisecond {
		remaining = 100 * time.Millisecond
	}
	db, err := bolt.Open(l.Path, 0o600, &bolt.Options{Timeout: remaining, ReadOnly: readOnly})
	if err != nil {
		if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) || errors.Is(err, berrors.ErrVersionMismatch) {
			return nil, nil, l.corrupt(err)
		}
		return nil, nil, fmt.Errorf("ledger %s: open: %v: %w", l.Path, err, errdefs.ErrFailedPrecondition)
	}
	return db, func(committed bool) {
		defer lf.Close()
		var leases []Lease
		if !readOnly && committed {
			leases = l.leasesOf(db)
		}
		if db.Close() == nil && !readOnly && committed {
			// what this writer committed is the trusted state; the
			// snapshot, under the lock, follows the commits in order
			if data, err := os.ReadFile(l.Path); err == nil {
				_ = l.writeSum(data)
				l.writeSnapshot(leases, data)
			} else {
				l.dropSnapshot()
			}
		}
	}, nil
}

// corrupt is the error of a ledger that cannot be read: DataLoss, with
// the way out.
func (l *Ledger) corrupt(why any) error {
	return fmt.Errorf("ledger %s is corrupt (%v): opted-in containers cannot be created until `swiftctl pools repair` rebuilds it: %w",
		l.Path, why, errdefs.ErrDataLoss)
}

// safely runs fn, which reads the memory-mapped ledger: a corrupt file
// makes bbolt panic or fault on a bad page, and either becomes a corrupt
// error instead of a crashed shim (and every container of its pod).
func (l *Ledger) safely(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = l.corrupt(r)
		}
	}()
	return fn()
}

// onBucket runs fn on the lease bucket in one transaction (a write one
// with write), holding the ledger's lock. A missing ledger or bucket has no
// leases: fn does not run. fn's errors come back as "ledger PATH: what...".
func (l *Ledger) onBucket(write bool, what string, fn func(b *bolt.Bucket) error) error {
	if _, err := os.Stat(l.Path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return l.safely(func() error { return l.onBucketUnsafe(write, what, fn) })
}

func (l *Ledger) onBucketUnsafe(write bool, what string, fn func(b *bolt.Bucket) error) error {
	db, done, err := l.open(!write)
	if err != nil {
		return err
	}
	committed := false
	defer func() { done(committed) }()
	run := db.View
	if write {
		run = db.Update
	}
	err = run(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		return fn(b)
	})
	if err != nil {
		return l.txFailed(what, err)
	}
	committed = true
	return nil
}

// txFailed wraps the error of a transaction, "ledger PATH: what...". The
// errors of our own functions carry their class; what bbolt returns (a
// commit that could not write) does not get one there: a write past the
// largest file the system allows (EFBIG) comes from a page number no sound
// ledger has, so the ledger is corrupt; any other is FailedPrecondition.
func (l *Ledger) txFailed(what string, err error) error {
	switch {
	case !errors.Is(errdefs.Resolve(err), errdefs.ErrUnknown):
		return fmt.Errorf("ledger %s: %s%w", l.Path, what, err)
	case errors.Is(err, unix.EFBIG), errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum):
		return l.corrupt(fmt.Sprintf("%s%v", what, err))
	default:
		return fmt.Errorf("ledger %s: %s%v: %w", l.Path, what, err, errdefs.ErrFailedPrecondition)
	}
}
