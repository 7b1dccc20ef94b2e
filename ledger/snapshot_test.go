package ledger

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSnapshot: every committed write (acquire, release, gc, rebuild)
// leaves the snapshot equal to List; a refused acquire leaves it as it
// was; reading it takes no lock (it answers while a writer holds the
// ledger); with no snapshot the ledger itself is read.
func TestSnapshot(t *testing.T) {
	dir := t.TempDir()
	l := New(dir)
	snap := func(when string, want []string) {
		t.Helper()
		got, _, err := l.Snapshot(time.Second)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if k := keys(got); !equal(k, want) {
			t.Fatalf("%s: snapshot holds %q, want %q", when, k, want)
		}
		listed, err := l.List()
		if err != nil {
			t.Fatal(err)
		}
		if k := keys(listed); !equal(k, want) {
			t.Fatalf("%s: ledger holds %q, want %q", when, k, want)
		}
	}
	snap("no ledger", nil)
	if _, _, err := l.Acquire(lease("n", "a", "t1", one(4)), Quota{Limit: Amounts{QPs: 8}}); err != nil {
		t.Fatal(err)
	}
	snap("after acquire a", []string{"n/a"})
	if _, _, err := l.Acquire(lease("n", "b", "t2", one(2)), Quota{}); err != nil {
		t.Fatal(err)
	}
	snap("after acquire b", []string{"n/a", "n/b"})
	if _, _, err := l.Acquire(lease("n", "c", "t1", one(5)), Quota{Limit: Amounts{QPs: 8}}); err == nil {
		t.Fatal("acquire c over t1's quota: admitted")
	}
	snap("after a refused acquire", []string{"n/a", "n/b"})
	got, _, _ := l.Snapshot(time.Second)
	if got[0].Tenant != "t1" || got[0].Charge.QPs != 4 || got[1].Tenant != "t2" || got[1].Charge.QPs != 2 {
		t.Fatalf("snapshot leases %+v: want t1 with 4 QPs, t2 with 2", got)
	}
	if _, err := l.Release("n", "a", nil); err != nil {
		t.Fatal(err)
	}
	snap("after release a", []string{"n/b"})

	// a writer holding the lock: the snapshot still answers at once
	lf, _, err := l.lock(true)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if got, _, err := l.Snapshot(time.Second); err != nil || len(got) != 1 {
		t.Fatalf("snapshot while the ledger is locked: %v, %v", got, err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("snapshot waited %v for the lock", d)
	}
	// without a snapshot the ledger is read, within the wait asked for
	if err := os.Remove(filepath.Join(dir, SnapshotName)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Snapshot(200 * time.Millisecond); err == nil {
		t.Fatal("no snapshot and the ledger locked: want the lock's timeout, got no error")
	}
	lf.Close()
	snap("no snapshot: the ledger", []string{"n/b"})

	// a snapshot that does not decode is not believed
	if err := os.WriteFile(filepath.Join(dir, SnapshotName), []byte(`{"leases": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	snap("a torn snapshot: the ledger", []string{"n/b"})
	// a FIFO put there does not hold the reader: the ledger is read
	if err := os.Remove(filepath.Join(dir, SnapshotName)); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, SnapshotName), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan []string, 1)
	go func() { got, _, _ := l.Snapshot(time.Second); done <- keys(got) }()
	select {
	case got := <-done:
		if !equal(got, []string{"n/b"}) {
			t.Fatalf("a FIFO for a snapshot: got %q, want the ledger's n/b", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("snapshot blocked on a FIFO")
	}
	os.Remove(filepath.Join(dir, SnapshotName))

	// a writer that leaves no snapshot (an older shim): the one left
	// names another ledger, and the ledger is read
	if _, _, err := l.Acquire(lease("n", "c", "t1", one(1)), Quota{}); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(filepath.Join(dir, SnapshotName))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Acquire(lease("n", "d", "t1", one(1)), Quota{}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SnapshotName), old, 0o600); err != nil {
		t.Fatal(err)
	}
	snap("a snapshot older than the ledger: the ledger", []string{"n/b", "n/c", "n/d"})

	if err := l.Rebuild([]Lease{lease("n", "z", "t3", one(1))}, filepath.Join(dir, "aside.db")); err != nil {
		t.Fatal(err)
	}
	snap("after rebuild", []string{"n/z"})
	if st, err := os.Stat(filepath.Join(dir, SnapshotName)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot mode: %v, %v: want 0600", st, err)
	}
}

func equal(a, b []string) bool { return slices.Equal(a, b) }
