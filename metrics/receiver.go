package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// Receiver is the agent's end of the report socket.
type Receiver struct {
	conn *net.UnixConn
	path string
}

// Listen binds the report socket at path, mode 0600 (only root may send),
// replacing a socket a previous agent left. Anything else at path is
// refused: the agent does not remove what it did not make.
func Listen(path string) (*Receiver, error) {
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("report socket %s: something else is there (%s): %w", path, st.Mode().Type(), errdefs.ErrFailedPrecondition)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("report socket %s: remove the stale one: %w", path, err)
		}
	}
	old := unix.Umask(0o177)
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("report socket %s: %w", path, err)
	}
	rc, err := conn.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) {
			err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1)
		})
		if cerr != nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Chmod(path, 0o600)
	}
	if err != nil {
		conn.Close()
		os.Remove(path)
		return nil, fmt.Errorf("report socket %s: %w", path, err)
	}
	return &Receiver{conn: conn, path: path}, nil
}

// Path is where the socket is.
func (r *Receiver) Path() string { return r.path }

// Close closes and removes the socket.
func (r *Receiver) Close() error {
	err := r.conn.Close()
	os.Remove(r.path)
	return err
}

// Serve reads reports until ctx ends or the socket is closed: each one
// from a root process that decodes goes to handle, anything else to drop
// with why ("not_root", "malformed", "truncated").
func (r *Receiver) Serve(ctx context.Context, handle func(Report), drop func(why string, err error)) {
	stop := context.AfterFunc(ctx, func() { r.conn.Close() })
	defer stop()
	buf := make([]byte, MaxReport+1)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred)*2)
	for {
		n, oobn, flags, _, err := r.conn.ReadMsgUnix(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			drop("read", err)
			time.Sleep(100 * time.Millisecond) // an error that persists is not a busy loop
			continue
		}
		if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 || n > MaxReport {
			drop("truncated", fmt.Errorf("a report of more than %d bytes: %w", MaxReport, errdefs.ErrInvalidArgument))
			continue
		}
		uid, ok := sender(oob[:oobn])
		if !ok || uid != 0 {
			drop("not_root", fmt.Errorf("a report from uid %d (known %v): only root's are counted: %w", uid, ok, errdefs.ErrPermissionDenied))
			continue
		}
		rep, err := Decode(buf[:n])
		if err != nil {
			drop("malformed", err)
			continue
		}
		handle(rep)
	}
}

// sender is the uid the kernel says sent a datagram.
func sender(oob []byte) (uint32, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if c, err := unix.ParseUnixCredentials(&m); err == nil {
			return c.Uid, true
		}
	}
	return 0, false
}
