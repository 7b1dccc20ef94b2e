package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	bolt "go.etcd.io/bbolt"

	"github.com/swift-rdma/swift-containerd/internal/atomicfile"
)

// Salvage reads every lease it can from a ledger that may be corrupt:
// those that decode, up to the first bad page. problems says what could
// not be read (none: the ledger is sound). The reading is done by a
// separate process (RunCheckIfAsked) on a copy, which may crash.
func (l *Ledger) Salvage() (leases []Lease, problems []string) {
	data, err := os.ReadFile(l.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []string{err.Error()}
	}
	run, err := l.runOnCopy(salvageArg, data)
	if err != nil {
		return nil, []string{err.Error()}
	}
	for _, line := range strings.Split(run.stdout, "\n") {
		if line == "" {
			continue
		}
		var x Lease
		if err := json.Unmarshal([]byte(line), &x); err != nil {
			problems = append(problems, fmt.Sprintf("salvaged record %q: %v", line, err))
			continue
		}
		leases = append(leases, x)
	}
	for _, line := range strings.Split(strings.TrimSpace(run.stderr), "\n") {
		if line == "" || strings.HasPrefix(line, "goroutine ") || strings.HasPrefix(line, "\t") {
			break // a crash's stack follows
		}
		if len(problems) < 20 {
			problems = append(problems, line)
		}
	}
	if run.err != nil {
		why := run.err.Error()
		if run.timedOut {
			why = fmt.Sprintf("reading did not end within %v", l.checkTimeout())
		}
		problems = append(problems, fmt.Sprintf("ledger %s is corrupt: reading it stopped (%s); %d lease(s) read before", l.Path, why, len(leases)))
	}
	return leases, problems
}

// salvage prints, one JSON line each, the leases of the ledger copy at
// path that decode and are filed under their own key, up to where bbolt
// fails; what it cannot read goes to stderr.
func salvage(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			x, err := decode(k, v)
			if err == nil && x.Key() != string(k) {
				err = fmt.Errorf("lease %q is filed under %q", x.Key(), k)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return nil
			}
			line, _ := json.Marshal(x)
			_, err = fmt.Fprintf(os.Stdout, "%s\n", line)
			return err
		})
	})
}

// Rebuild replaces the ledger with one that holds exactly leases, under
// the ledger's lock; the old file, if any, is kept at aside.
func (l *Ledger) Rebuild(leases []Lease, aside string) error {
	return l.Repair(func([]Lease, []string) ([]Lease, bool, error) { return leases, true, nil }, aside)
}

// Repair holds the ledger's lock while it salvages what it can
// (Salvage), asks decide which leases to keep (and whether to rebuild at
// all), and rebuilds: no Create takes a lease in between, and a new ledger
// is complete before it replaces the old one, which is kept at aside.
func (l *Ledger) Repair(decide func(salvaged []Lease, problems []string) (keep []Lease, rebuild bool, err error), aside string) error {
	lf, deadline, err := l.lock(true)
	if err != nil {
		return err
	}
	defer lf.Close()
	keep, rebuild, err := decide(l.Salvage())
	if err != nil || !rebuild {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(l.Path), "."+FileName+".new-*")
	if err != nil {
		return fmt.Errorf("ledger %s: rebuild: %v: %w", l.Path, err, errdefs.ErrFailedPrecondition)
	}
	tmp := f.Name()
	f.Close()
	defer os.Remove(tmp) // a no-op once it is the ledger
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: max(time.Until(deadline), 100*time.Millisecond)})
	if err != nil {
		return fmt.Errorf("ledger %s: rebuild: %v: %w", l.Path, err, errdefs.ErrFailedPrecondition)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		for _, x := range keep {
			v, err := json.Marshal(x)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(x.Key()), v); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("ledger %s: rebuild: %w", l.Path, err)
	}
	data, err := os.ReadFile(tmp)
	if err != nil {
		return fmt.Errorf("ledger %s: rebuild: %w", l.Path, err)
	}
	if err := os.Link(l.Path, aside); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("ledger %s: keep the old file at %s: %v: %w", l.Path, aside, err, errdefs.ErrFailedPrecondition)
	}
	if err := os.Rename(tmp, l.Path); err != nil {
		return fmt.Errorf("ledger %s: rebuild: %v: %w", l.Path, err, errdefs.ErrFailedPrecondition)
	}
	if err := l.writeSum(data); err != nil {
		return err
	}
	l.writeSnapshot(append([]Lease(nil), keep...), data)
	return atomicfile.SyncDir(filepath.Dir(l.Path))
}
