package nodeinstall

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// host reaches the node's file system through its root directory (in a
// hostPID pod, /proc/1/root): every path is resolved with openat2's
// RESOLVE_IN_ROOT, so a symbolic link on the node (/var/run -> /run)
// resolves as on the node and never out of its root.
type host struct {
	root string
	fd   int
}

func openHost(root string) (*host, error) {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("the node's root %s: %w", root, err)
	}
	return &host{root: root, fd: fd}, nil
}

func (h *host) Close() error { return unix.Close(h.fd) }

// rel turns an absolute node path into one relative to the root.
func rel(p string) (string, error) {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return "", fmt.Errorf("node path %q: must be absolute and clean: %w", p, errdefs.ErrInvalidArgument)
	}
	if p == "/" {
		return ".", nil
	}
	return p[1:], nil
}

func (h *host) open(p string, flags int) (int, error) {
	r, err := rel(p)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Openat2(h.fd, r, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return fd, nil
}

// mkdirAll makes directory p and its missing parents (mode 0755) and
// returns those it made, outermost first.
func (h *host) mkdirAll(p string) ([]string, error) {
	_, err := h.stat(p, unix.O_DIRECTORY)
	if err == nil {
		return nil, nil
	}
	if !errors.Is(err, unix.ENOENT) || p == "/" {
		return nil, err
	}
	made, err := h.mkdirAll(filepath.Dir(p))
	if err != nil {
		return made, err
	}
	dfd, err := h.open(filepath.Dir(p), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return made, err
	}
	defer unix.Close(dfd)
	if err := unix.Mkdirat(dfd, filepath.Base(p), 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return made, &os.PathError{Op: "mkdir", Path: p, Err: err}
	}
	return append(made, p), nil
}

// openRegular opens regular file p for reading without following a link
// or blocking on a FIFO (nil, and no error, when it does not exist).
func (h *host) openRegular(p string) (*os.File, os.FileInfo, error) {
	fd, err := h.open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	f := os.NewFile(uintptr(fd), p)
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file (%v): %w", p, fi.Mode().Type(), errdefs.ErrFailedPrecondition)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// read returns the content of regular file p (nil and no error when it
// does not exist); a larger file than max is refused.
func (h *host) read(p string, max int64) ([]byte, error) {
	b, _, err := h.readMode(p, max)
	return b, err
}

// readMode is read, with the file's permission bits.
func (h *host) readMode(p string, max int64) ([]byte, fs.FileMode, error) {
	f, fi, err := h.openRegular(p)
	if f == nil || err != nil {
		return nil, 0, err
	}
	defer f.Close()
	if fi.Size() > max {
		return nil, 0, fmt.Errorf("%s is %d bytes, more than %d: %w", p, fi.Size(), max, errdefs.ErrFailedPrecondition)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", p, err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, fi.Mode().Perm(), nil
}

// sum returns the sha256 of regular file p, "" when it does not exist;
// it streams (the binaries are tens of MB, the pod's memory is bounded).
func (h *host) sum(p string) (string, error) {
	f, _, err := h.openRegular(p)
	if f == nil || err != nil {
		return "", err
	}
	defer f.Close()
	return hashFile(f)
}

// hashFile streams the sha256 of an open file from its start.
func hashFile(f *os.File) (string, error) {
	hs := sha256.New()
	if _, err := io.Copy(hs, io.NewSectionReader(f, 0, 1<<62)); err != nil {
		return "", fmt.Errorf("read %s: %w", f.Name(), err)
	}
	return hex.EncodeToString(hs.Sum(nil)), nil
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// write replaces p atomically (a temporary file beside it, fsync, rename).
func (h *host) write(p string, data []byte, mode os.FileMode) error {
	return h.writeFrom(p, bytes.NewReader(data), mode)
}

// writeFrom is write with the content streamed from r.
func (h *host) writeFrom(p string, r io.Reader, mode os.FileMode) error {
	dfd, err := h.open(filepath.Dir(p), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	tmp := "." + filepath.Base(p) + ".swift-install"
	_ = unix.Unlinkat(dfd, tmp, 0)
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(mode.Perm()))
	if err != nil {
		return &os.PathError{Op: "create", Path: filepath.Join(filepath.Dir(p), tmp), Err: err}
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Chmod(mode.Perm())
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, filepath.Base(p))
	}
	if err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

// rename moves file from to to (both on the node, same file system).
func (h *host) rename(from, to string) error {
	ffd, err := h.open(filepath.Dir(from), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(ffd)
	tfd, err := h.open(filepath.Dir(to), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(tfd)
	if err := unix.Renameat(ffd, filepath.Base(from), tfd, filepath.Base(to)); err != nil {
		return fmt.Errorf("move %s to %s: %w", from, to, err)
	}
	return nil
}

// remove unlinks file p (rmdir when dir); one already gone is no error.
func (h *host) remove(p string, dir bool) error {
	dfd, err := h.open(filepath.Dir(p), unix.O_PATH|unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	flags := 0
	if dir {
		flags = unix.AT_REMOVEDIR
	}
	if err := unix.Unlinkat(dfd, filepath.Base(p), flags); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "remove", Path: p, Err: err}
	}
	return nil
}

// stat returns the status of node path p (links followed inside the
// root); flags add to O_PATH (O_DIRECTORY: p must be a directory).
func (h *host) stat(p string, flags int) (unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := h.open(p, unix.O_PATH|flags)
	if err != nil {
		return st, err
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return st, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	return st, nil
}

// isExecutable tells whether p is an executable regular file on the node.
func (h *host) isExecutable(p string) bool {
	st, err := h.stat(p, 0)
	return err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o111 != 0
}

// lookPath finds name in the node's PATH dirs, as the node's shell would.
func (h *host) lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			return "", fmt.Errorf("command %q: a path must be absolute: %w", name, errdefs.ErrInvalidArgument)
		}
		if !h.isExecutable(name) {
			return "", fmt.Errorf("command %s is not an executable file on the node: %w", name, errdefs.ErrNotFound)
		}
		return name, nil
	}
	for _, d := range filepath.SplitList(hostPATH) {
		if p := filepath.Join(d, name); h.isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q is not in the node's PATH (%s): %w", name, hostPATH, errdefs.ErrNotFound)
}

// checkRootOnly requires directory p and every directory on the way to it
// to be root's and writable by no one else: the manifest in it decides
// what uninstall removes and restores as root.
func (h *host) checkRootOnly(p string) error {
	for d := p; ; d = filepath.Dir(d) {
		st, err := h.stat(d, unix.O_DIRECTORY)
		if err != nil {
			return err
		}
		if st.Uid != 0 || st.Mode&0o022 != 0 {
			return fmt.Errorf("%s (on the way to %s) is owned by uid %d with mode %o: the installer's state must be root's alone: %w",
				d, p, st.Uid, st.Mode&0o7777, errdefs.ErrFailedPrecondition)
		}
		if d == "/" {
			return nil
		}
	}
}

// lock takes an exclusive lock on directory p (flock), waiting while ctx
// lets it: one installer at a time on a node (a stopping pod and its
// replacement).
func (h *host) lock(ctx context.Context, p string) (func(), error) {
	fd, err := h.open(p, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { unix.Close(fd) }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			unix.Close(fd)
			return nil, &os.PathError{Op: "lock", Path: p, Err: err}
		}
		select {
		case <-ctx.Done():
			unix.Close(fd)
			return nil, fmt.Errorf("another installer holds %s: %w", p, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
