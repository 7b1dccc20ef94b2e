package swiftrun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
)

// DefaultSocket is where swift-init listens in a zygote container.
const DefaultSocket = "/run/swift/zygote.sock"

// answerTimeout bounds the wait for the zygote's first answer, as
// swift-run's: it connects QPs on demand within 4 s.
const answerTimeout = 30 * time.Second

// Client asks one zygote for functions. Its zero value uses DefaultSocket.
type Client struct {
	// Socket is the zygote's control socket.
	Socket string
}

func (c *Client) socket() string {
	if c.Socket == "" {
		return DefaultSocket
	}
	return c.Socket
}

func (c *Client) dial(ctx context.Context) (*net.UnixConn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unixpacket", c.socket())
	if err != nil {
		return nil, fmt.Errorf("connect to the zygote at %s (is swift-init the container's init?): %w", c.socket(), errdefs.ErrUnavailable.WithMessage(err.Error()))
	}
	return conn.(*net.UnixConn), nil
}

// deadline is ctx's deadline, or the answer bound when that is sooner.
func deadline(ctx context.Context) time.Time {
	d := time.Now().Add(answerTimeout)
	if t, ok := ctx.Deadline(); ok && t.Before(d) {
		return t
	}
	return d
}

// ask sends the request with fds and reads the first answer.
func (c *Client) ask(ctx context.Context, req Request, fds []int) (*net.UnixConn, Reply, error) {
	b, err := req.MarshalBinary()
	if err != nil {
		return nil, Reply{}, err
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, Reply{}, err
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	conn.SetDeadline(deadline(ctx))
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	if _, _, err := conn.WriteMsgUnix(b, oob, nil); err != nil {
		conn.Close()
		return nil, Reply{}, wrapIO(ctx, "send the request", err)
	}
	buf := make([]byte, repSize+1)
	n, err := conn.Read(buf)
	if err != nil {
		conn.Close()
		return nil, Reply{}, wrapIO(ctx, "read the zygote's answer", err)
	}
	rep, err := ParseReply(buf[:n])
	if err != nil {
		conn.Close()
		return nil, Reply{}, err
	}
	conn.SetDeadline(time.Time{})
	if rep.Errno != 0 {
		conn.Close()
		return nil, rep, &RefusedError{Reply: rep}
	}
	return conn, rep, nil
}

// wrapIO names what failed; ctx's end is its own error.
func wrapIO(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%s: the zygote did not answer in time: %w", what, context.DeadlineExceeded)
	}
	return fmt.Errorf("%s: %w", what, errdefs.ErrUnavailable.WithMessage(err.Error()))
}

// RefusedError is the zygote's refusal to fork: its errno and message.
type RefusedError struct{ Reply Reply }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the zygote refused: %s (%s)", e.Reply.Msg, e.Reply.Errno)
}

// Unwrap classes the refusal by its errno.
func (e *RefusedError) Unwrap() error {
	switch e.Reply.Errno {
	case syscall.EINVAL, syscall.E2BIG, syscall.ENOENT:
		return errdefs.ErrInvalidArgument
	case syscall.EACCES, syscall.EPERM:
		return errdefs.ErrPermissionDenied
	case syscall.EAGAIN, syscall.EBUSY, syscall.ENOSPC, syscall.EMFILE, syscall.EDQUOT:
		return errdefs.ErrResourceExhausted
	case syscall.ETIMEDOUT:
		return context.DeadlineExceeded
	}
	return errdefs.ErrUnavailable
}

// Status returns the zygote's pool and assignment tables, as
// `swift-run --status` prints them.
func (c *Client) Status(ctx context.Context) (string, error) {
	conn, _, err := c.ask(ctx, Request{Flags: Status}, nil)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	conn.SetDeadline(deadline(ctx))
	buf := make([]byte, StatusMax+1)
	n, err := conn.Read(buf)
	if err != nil {
		return "", wrapIO(ctx, "read the zygote's status", err)
	}
	return ParseStatus(buf[:n])
}

// Function is a forked function: its first answer, and the connection
// its exit status comes on. Closing it before Wait returns ends the
// function (the zygote sends SIGTERM, then SIGKILL a second later).
type Function struct {
	Reply
	conn *net.UnixConn
}

// Start has the zygote fork a function with stdin, stdout and stderr as
// its standard files (they are passed, not copied: close them in the
// caller once Start returns). A refusal is a *RefusedError.
func (c *Client) Start(ctx context.Context, req Request, stdin, stdout, stderr *os.File) (*Function, error) {
	if req.Flags&Status != 0 {
		return nil, fmt.Errorf("a status request forks nothing: use Status: %w", errdefs.ErrInvalidArgument)
	}
	if stdin == nil || stdout == nil || stderr == nil {
		return nil, fmt.Errorf("a function needs stdin, stdout and stderr: %w", errdefs.ErrInvalidArgument)
	}
	conn, rep, err := c.ask(ctx, req, []int{int(stdin.Fd()), int(stdout.Fd()), int(stderr.Fd())})
	if err != nil {
		return nil, err
	}
	if rep.PID <= 0 {
		conn.Close()
		return nil, fmt.Errorf("the zygote forked a function without a pid: %w", errdefs.ErrDataLoss)
	}
	return &Function{Reply: rep, conn: conn}, nil
}

// Wait waits for the function's end and returns its wait status. When ctx
// ends first, the function is ended (the connection closes) and ctx's
// error is returned.
func (f *Function) Wait(ctx context.Context) (syscall.WaitStatus, error) {
	stop := context.AfterFunc(ctx, func() { f.conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, 8)
	n, err := f.conn.Read(buf)
	if err != nil {
		f.conn.Close()
		if ctx.Err() != nil {
			return 0, fmt.Errorf("the function (pid %d) did not end in time; ended it: %w", f.PID, ctx.Err())
		}
		return 0, fmt.Errorf("the zygote went away before the function (pid %d) ended: %w", f.PID, errdefs.ErrUnavailable.WithMessage(err.Error()))
	}
	ws, err := ParseExit(buf[:n])
	f.conn.Close()
	return ws, err
}

// Signal delivers sig to the function's process group.
func (f *Function) Signal(sig syscall.Signal) error {
	if sig <= 0 || sig >= 65 {
		return fmt.Errorf("signal %d: %w", sig, errdefs.ErrInvalidArgument)
	}
	if _, err := f.conn.Write(signalMessage(sig)); err != nil {
		return fmt.Errorf("signal the function (pid %d): %w", f.PID, errdefs.ErrUnavailable.WithMessage(err.Error()))
	}
	return nil
}

// Close ends the function if it still runs.
func (f *Function) Close() error { return f.conn.Close() }
