package lockfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFlock: shared locks go together; an exclusive one waits for them
// and gives up at its deadline with ErrTimeout; once they are gone it is
// taken.
func TestFlock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.lock")
	open := func() *os.File {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	a, b, c := open(), open(), open()
	soon := func() time.Time { return time.Now().Add(50 * time.Millisecond) }
	if err := Flock(a, unix.LOCK_SH, soon()); err != nil {
		t.Fatal(err)
	}
	if err := Flock(b, unix.LOCK_SH, soon()); err != nil {
		t.Fatalf("a second shared lock: %v", err)
	}
	start := time.Now()
	if err := Flock(c, unix.LOCK_EX, soon()); !errors.Is(err, ErrTimeout) {
		t.Fatalf("an exclusive lock beside shared ones: %v, want ErrTimeout", err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Errorf("gave up after %v, before its deadline", waited)
	}
	a.Close()
	b.Close()
	if err := Flock(c, unix.LOCK_EX, soon()); err != nil {
		t.Errorf("the exclusive lock once the others are gone: %v", err)
	}
}
