package nodeinstall

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

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
	fd, err := h.open(p, unix.O_PATH|unix.O_DIRECTORY)
	if err == nil {
		unix.Close(fd)
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

// read returns the content of regular file p (nil and no error when it
// does not exist); a larger file than max is refused.
func (h *host) read(p string, max int64) ([]byte, error) {
	fd, err := h.open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%v): %w", p, fi.Mode().Type(), errdefs.ErrFailedPrecondition)
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s is %d bytes, more than %d: %w", p, fi.Size(), max, errdefs.ErrFailedPrecondition)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// sum returns the sha256 of regular file p, "" when it does not exist.
func (h *host) sum(p string) (string, error) {
	b, err := h.read(p, maxFile)
	if err != nil || b == nil {
		return "", err
	}
	return digest(b), nil
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// write replaces p atomically (a temporary file beside it, fsync, rename).
func (h *host) write(p string, data []byte, mode os.FileMode) error {
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
	_, err = f.Write(data)
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

// isExecutable tells whether p is an executable regular file on the node.
func (h *host) isExecutable(p string) bool {
	fd, err := h.open(p, unix.O_PATH)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o111 != 0
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
