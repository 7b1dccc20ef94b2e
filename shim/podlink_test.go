package shim

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLockPodLinks: a second Create waits for the first's lock and gets
// it once the first lets go; the lock file is the state directory's own.
func TestLockPodLinks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	unlock, err := lockPodLinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 1)
	go func() {
		u, err := lockPodLinks(dir)
		if err != nil {
			t.Error(err)
			got <- time.Time{}
			return
		}
		got <- time.Now()
		u()
	}()
	time.Sleep(200 * time.Millisecond)
	released := time.Now()
	unlock()
	if at := <-got; at.Before(released) {
		t.Errorf("the second lock was taken at %v, before the first was released at %v", at, released)
	}
	if fi, err := os.Stat(filepath.Join(dir, PodLinksLock)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("lock file: %v, %v; want mode 0600", fi, err)
	}
}
