// Package lockfile takes flock(2) locks on lock files, polling finely up
// to a deadline (a blocking flock cannot be bounded, and bbolt's own
// polls every 50 ms, too coarse when dozens of shims start at once).
package lockfile

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ErrTimeout is Flock's error when the lock was still held at the deadline.
var ErrTimeout = errors.New("still locked by another process")

// Flock takes how (unix.LOCK_SH or unix.LOCK_EX) on f, polling from 1 ms
// up to every 8 ms until deadline: nil, ErrTimeout, or flock's own error.
func Flock(f *os.File, how int, deadline time.Time) error {
	wait := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			return err
		}
		if time.Now().After(deadline) {
			return ErrTimeout
		}
		time.Sleep(wait)
		if wait < 8*time.Millisecond {
			wait *= 2
		}
	}
}
