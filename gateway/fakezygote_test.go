package gateway

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeZygote answers the zygote's protocol over a real unix SEQPACKET
// socket with handlers written in Go, for the gateway's unit tests (the
// real swift-init is tested in test/integration and the VM). Its request
// decoder is written from zygote/proto.h, not from package swiftrun.
type fakeZygote struct {
	sock string
	mu   sync.Mutex
	reqs []fakeReq
	// ended counts functions whose caller went away before they ended
	ended int
}

type fakeReq struct {
	flags uint32
	peer  string
	nqp   uint32
	args  []string
}

func startFakeZygote(t *testing.T) *fakeZygote {
	t.Helper()
	z := &fakeZygote{sock: filepath.Join(t.TempDir(), "zygote.sock")}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: z.sock, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			go z.serve(c)
		}
	}()
	return z
}

func (z *fakeZygote) requests() []fakeReq {
	z.mu.Lock()
	defer z.mu.Unlock()
	return append([]fakeReq(nil), z.reqs...)
}

func decodeReq(b []byte) (fakeReq, error) {
	if len(b) < 144 || string(b[:4]) != "SRN2" {
		return fakeReq{}, errors.New("bad header")
	}
	r := fakeReq{flags: binary.NativeEndian.Uint32(b[4:]), nqp: binary.NativeEndian.Uint32(b[136:])}
	r.peer = string(b[8 : 8+bytes.IndexByte(b[8:136], 0)])
	argc := binary.NativeEndian.Uint32(b[140:])
	rest := b[144:]
	for range argc {
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			return fakeReq{}, errors.New("argument without NUL")
		}
		r.args = append(r.args, string(rest[:i]))
		rest = rest[i+1:]
	}
	if len(rest) != 0 {
		return fakeReq{}, errors.New("bytes after the arguments")
	}
	return r, nil
}

func rep(status, pid int32, us uint64, msg string) []byte {
	b := make([]byte, 280)
	binary.NativeEndian.PutUint32(b[0:], uint32(status))
	binary.NativeEndian.PutUint32(b[4:], uint32(pid))
	binary.NativeEndian.PutUint32(b[8:], 1)
	binary.NativeEndian.PutUint64(b[16:], us)
	copy(b[24:255], msg)
	return b
}

func (z *fakeZygote) serve(c *net.UnixConn) {
	defer c.Close()
	buf, oob := make([]byte, 8192), make([]byte, 128)
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return
	}
	req, err := decodeReq(buf[:n])
	if err != nil {
		c.Write(rep(int32(syscall.EINVAL), 0, 0, err.Error()))
		return
	}
	z.mu.Lock()
	z.reqs = append(z.reqs, req)
	z.mu.Unlock()
	msgs, _ := syscall.ParseSocketControlMessage(oob[:oobn])
	var fds []int
	for _, m := range msgs {
		f, _ := syscall.ParseUnixRights(&m)
		fds = append(fds, f...)
	}
	if len(fds) != 3 {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		c.Write(rep(int32(syscall.EINVAL), 0, 0, "want 3 fds"))
		return
	}
	stdin, stdout, stderr := os.NewFile(uintptr(fds[0]), "in"), os.NewFile(uintptr(fds[1]), "out"), os.NewFile(uintptr(fds[2]), "err")
	if req.peer == "nobody" {
		stdin.Close()
		stdout.Close()
		stderr.Close()
		c.Write(rep(int32(syscall.ENOENT), 0, 5, "no peer nobody"))
		return
	}
	c.Write(rep(0, 4242, 150, ""))
	// the caller going away ends the function, as the zygote's SIGTERM does
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gone := make(chan struct{})
	go func() {
		b := make([]byte, 8)
		for {
			if _, err := c.Read(b); err != nil {
				close(gone)
				cancel()
				return
			}
		}
	}()
	ws := z.run(ctx, req.args, stdin, stdout, stderr)
	stdin.Close()
	stdout.Close()
	stderr.Close()
	select {
	case <-gone:
		z.mu.Lock()
		z.ended++
		z.mu.Unlock()
		return
	default:
	}
	b := make([]byte, 4)
	binary.NativeEndian.PutUint32(b, ws)
	c.Write(b)
}

// run is the fake's handlers; it returns a wait status.
func (z *fakeZygote) run(ctx context.Context, args []string, in, out, errw *os.File) uint32 {
	arg := func(i, d int) int {
		if len(args) > i {
			n, _ := strconv.Atoi(args[i])
			return n
		}
		return d
	}
	switch args[0] {
	case "cat":
		io.Copy(out, in)
	case "exit":
		fmt.Fprintln(errw, "exiting", arg(1, 0))
		return uint32(arg(1, 0)) << 8
	case "crash":
		return 11
	case "sleep":
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(arg(1, 1000)) * time.Millisecond):
		}
	case "big":
		out.Write(bytes.Repeat([]byte("x"), arg(1, 10)))
	case "say":
		fmt.Fprint(out, strings.Join(args[1:], " "))
	case "noisy":
		errw.Write(bytes.Repeat([]byte("e"), arg(1, 10)))
		fmt.Fprint(out, `{"ok":1}`)
	case "lines":
		// the warm baseline's shape: a line out for each line in
		b := make([]byte, 1<<16)
		var acc []byte
		for {
			n, err := in.Read(b)
			acc = append(acc, b[:n]...)
			for {
				i := bytes.IndexByte(acc, '\n')
				if i < 0 {
					break
				}
				fmt.Fprintf(out, `{"line":%s,"pid":4242}`+"\n", acc[:i])
				acc = acc[i+1:]
			}
			if err != nil {
				return 0
			}
		}
	default:
		fmt.Fprintf(errw, "swift: no handler %s\n", args[0])
		return 127 << 8
	}
	return 0
}
