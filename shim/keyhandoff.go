package shim

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/swift-rdma/swift-containerd/inject"
)

// keyWait bounds how long the shim waits for a zygote container's init
// to run swift-init and make its key pipe; swift-init waits 30 s for the key.
const keyWait = 60 * time.Second

// keyHandoff is a zygote's pair keys (keys.PairRing) on their way to its
// container's init.
// The ring reaches one process only: the container's init (the pid runc
// reported at Create), once it runs the node's swift-init (device and
// inode of its executable), through the write end of a pipe swift-init
// keeps at inject.KeyPipeFD, of which the shim takes a copy
// (pidfd_getfd). No path leads to the pipe, and nothing in the container
// can take fds from its PID 1, which is undumpable.
type keyHandoff struct {
	ring             []byte
	initDev, initIno uint64
	initPath         string // for messages
}

// start hands the ring to pid in the background and forgets it; a failure
// is logged (swift-init, without a key, says so and ends).
func (k *keyHandoff) start(ctx context.Context, id string, pid int) {
	go func() {
		defer clear(k.ring)
		if err := k.hand(pid, keyWait); err != nil {
			log.G(ctx).WithError(err).WithField("id", id).Error("swift: the zygote's keys were not handed to it")
		}
	}()
}

// drop forgets the ring (runc did not make the container).
func (k *keyHandoff) drop() { clear(k.ring) }

// hand waits until pid runs swift-init and holds the key pipe, then writes
// the ring's length (4 bytes, little endian) and the ring into it. It
// gives up when pid ends or after wait.
func (k *keyHandoff) hand(pid int, wait time.Duration) error {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("the container's init (pid %d): pidfd_open: %w", pid, err)
	}
	defer unix.Close(pidfd)
	deadline := time.Now().Add(wait)
	pause := 2 * time.Millisecond
	for {
		done, err := k.try(pid, pidfd)
		if done || err != nil {
			return err
		}
		if ended(pidfd) {
			return fmt.Errorf("the container's init (pid %d) ended before it took the key", pid)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the container's init (pid %d) did not run %s with its key pipe at fd %d within %s",
				pid, k.initPath, inject.KeyPipeFD, wait)
		}
		time.Sleep(pause)
		pause = min(pause*2, 50*time.Millisecond)
	}
}

// ended tells whether the process of pidfd has ended (a pidfd polls
// readable from its exit on, reaped or not).
func ended(pidfd int) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n == 1
}

// try hands the ring over if pid is ready: true once written; false, nil
// while pid still runs runc's init or has not made the pipe yet.
func (k *keyHandoff) try(pid, pidfd int) (bool, error) {
	var st unix.Stat_t
	if unix.Stat(fmt.Sprintf("/proc/%d/exe", pid), &st) != nil || st.Dev != k.initDev || st.Ino != k.initIno {
		return false, nil
	}
	fd, err := unix.PidfdGetfd(pidfd, inject.KeyPipeFD, 0)
	if err == unix.EBADF {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("take the key pipe from the container's init (pid %d) with pidfd_getfd, which needs ptrace rights over it "+
			"(the shim runs as root; Yama's ptrace_scope 3 refuses them to everyone): %w", pid, err)
	}
	defer unix.Close(fd)
	// the pidfd's process has not ended: /proc/<pid> above was that process
	if ended(pidfd) {
		return false, fmt.Errorf("the container's init (pid %d) ended before it took the key", pid)
	}
	var fst unix.Stat_t
	fl, ferr := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if unix.Fstat(fd, &fst) != nil || fst.Mode&unix.S_IFMT != unix.S_IFIFO || ferr != nil || fl&unix.O_ACCMODE != unix.O_WRONLY {
		return false, nil // not the key pipe (yet)
	}
	msg := make([]byte, 4+len(k.ring))
	defer clear(msg)
	binary.LittleEndian.PutUint32(msg, uint32(len(k.ring)))
	copy(msg[4:], k.ring)
	// the pair keys of 32 peers, 8 keys each, with names of 127
	// characters, take about 54 KiB; swift-init reads at most 64 KiB
	if len(msg) > 64<<10 {
		return false, fmt.Errorf("the key for the container's init (pid %d): %d bytes, more than it reads: %w", pid, len(msg), errdefs.ErrInvalidArgument)
	}
	if err := writeAll(fd, msg, keyWrite); err != nil {
		return false, fmt.Errorf("write the key into the container's init (pid %d): %w", pid, err)
	}
	return true, nil
}

// keyWrite bounds writing the key once the init took its pipe.
const keyWrite = 10 * time.Second

// writeAll writes msg to the non-blocking fd (the init's key pipe), waiting
// for room as the init reads: a pipe may hold as little as 8 KiB (a user
// past fs.pipe-user-pages-soft gets such pipes, and any container of the
// same host uid can hold that many).
func writeAll(fd int, msg []byte, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for off := 0; off < len(msg); {
		n, err := unix.Write(fd, msg[off:])
		if n > 0 {
			off += n
		}
		switch {
		case err == nil || err == unix.EINTR:
			continue
		case err != unix.EAGAIN:
			return fmt.Errorf("%d of %d bytes: %w", off, len(msg), err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%d of %d bytes in %s: the init does not read", off, len(msg), wait)
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		if _, err := unix.Poll(fds, int(min(left, 100*time.Millisecond)/time.Millisecond)+1); err != nil && err != unix.EINTR {
			return fmt.Errorf("%d of %d bytes: poll: %w", off, len(msg), err)
		}
	}
	return nil
}
