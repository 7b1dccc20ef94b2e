package swiftrun

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
)

// header is struct swift_req's header, written out field by field.
func header(flags uint32, peer string, nqp, argc uint32) []byte {
	var b bytes.Buffer
	b.WriteString("SRN2")
	binary.Write(&b, binary.NativeEndian, flags)
	p := make([]byte, 128)
	copy(p, peer)
	b.Write(p)
	binary.Write(&b, binary.NativeEndian, nqp)
	binary.Write(&b, binary.NativeEndian, argc)
	return b.Bytes()
}

func TestRequestMarshal(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  Request
		want []byte
	}{
		{"handler and arguments", Request{Peer: "b", QPs: 2, Args: []string{"pingpong", "10"}},
			append(header(0, "b", 2, 2), "pingpong\x0010\x00"...)},
		{"no QP", Request{Flags: NoQP, Args: []string{"noop"}}, append(header(1, "", 0, 1), "noop\x00"...)},
		{"status", Request{Flags: Status}, header(4, "", 0, 0)},
		{"all, new", Request{Peer: "db-0-worker.team-b", Flags: All | New, Args: []string{"/h/x.so", ""}},
			append(header(10, "db-0-worker.team-b", 0, 2), "/h/x.so\x00\x00"...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.req.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
			if len(tc.want) < 144 || !bytes.Equal(got[:144], tc.want[:144]) {
				t.Errorf("header differs")
			}
		})
	}
}

func TestRequestRefused(t *testing.T) {
	long := strings.Repeat("x", 128)
	many := make([]string, 256)
	for i := range many {
		many[i] = "a"
	}
	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"no handler", Request{}, "no handler named"},
		{"empty handler", Request{Args: []string{""}}, "empty handler name"},
		{"long peer", Request{Peer: long, Args: []string{"noop"}}, "a name of at most 127 printable"},
		{"NUL in peer", Request{Peer: "a\x00b", Args: []string{"noop"}}, "printable ASCII bytes, without spaces"},
		{"space in peer", Request{Peer: "a b", Args: []string{"noop"}}, "printable ASCII bytes, without spaces"},
		{"non-ASCII peer", Request{Peer: "pé", Args: []string{"noop"}}, "printable ASCII bytes, without spaces"},
		{"status with a peer", Request{Flags: Status, Peer: "b"}, "a status request takes no other flag, peer"},
		{"status with QPs", Request{Flags: Status, QPs: 1}, "a status request takes no other flag, peer"},
		{"no-qp with qps", Request{Flags: NoQP, QPs: 1, Args: []string{"noop"}}, "no-qp takes no QP option"},
		{"no-qp with all", Request{Flags: NoQP | All, Args: []string{"noop"}}, "no-qp takes no QP option"},
		{"new and own", Request{Flags: New | Own, Args: []string{"noop"}}, "new and own exclude each other"},
		{"all and qps", Request{Flags: All, QPs: 2, Args: []string{"noop"}}, "all and a QP count exclude each other"},
		{"NUL in argument", Request{Args: []string{"noop", "a\x00"}}, "argument 1 holds a NUL"},
		{"too many arguments", Request{Args: many}, "256 arguments: at most 255"},
		{"arguments too long", Request{Args: []string{"noop", strings.Repeat("y", 4091)}}, "arguments of 4097 bytes"},
		{"negative qps", Request{QPs: -1, Args: []string{"noop"}}, "qps -1"},
		{"too many qps", Request{QPs: 257, Args: []string{"noop"}}, "qps 257"},
		{"unknown flag", Request{Flags: 64, Args: []string{"noop"}}, "request flags 0x40"},
		{"connect flag", Request{Flags: 32, Args: []string{"noop"}}, "request flags 0x20"},
		{"status with arguments", Request{Flags: Status, Args: []string{"noop"}}, "a status request takes no other flag"},
		{"status with another flag", Request{Flags: Status | NoQP}, "a status request takes no other flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.req.MarshalBinary()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errdefs.IsInvalidArgument(err) {
				t.Errorf("got %v, want an InvalidArgument error saying %q", err, tc.want)
			}
		})
	}
	// the largest request that fits
	if _, err := (Request{Args: []string{"noop", strings.Repeat("y", 4090)}}).MarshalBinary(); err != nil {
		t.Errorf("4096 bytes of arguments: %v", err)
	}
}

// reply is a struct swift_rep, written out field by field.
func reply(status, pid int32, nqp, newdest uint32, us uint64, msg string) []byte {
	var b bytes.Buffer
	for _, v := range []any{status, pid, nqp, newdest, us} {
		binary.Write(&b, binary.NativeEndian, v)
	}
	m := make([]byte, 256)
	copy(m, msg)
	b.Write(m)
	return b.Bytes()
}

func TestParseReply(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want Reply
		err  string
	}{
		{"forked", reply(0, 42, 1, 0, 250, ""), Reply{PID: 42, QPs: 1, ZygoteTime: 250 * time.Microsecond}, ""},
		{"on demand", reply(0, 7, 2, 2, 4000, ""), Reply{PID: 7, QPs: 2, NewDest: 2, ZygoteTime: 4 * time.Millisecond}, ""},
		{"refused", reply(int32(syscall.ENOENT), 0, 0, 0, 3, "no peer x"),
			Reply{Errno: syscall.ENOENT, Msg: "no peer x", ZygoteTime: 3 * time.Microsecond}, ""},
		{"short", reply(0, 1, 0, 0, 0, "")[:279], Reply{}, "zygote reply of 279 bytes, want 280"},
		{"long", append(reply(0, 1, 0, 0, 0, ""), 0), Reply{}, "zygote reply of 281 bytes"},
		{"no NUL", reply(5, 0, 0, 0, 0, strings.Repeat("m", 256)), Reply{}, "message without its NUL"},
		{"negative status", reply(-1, 0, 0, 0, 0, ""), Reply{}, "status -1 is no errno"},
		{"huge status", reply(1<<20, 0, 0, 0, 0, ""), Reply{}, "is no errno"},
		{"negative pid", reply(0, -5, 0, 0, 0, ""), Reply{}, "pid -5"},
		{"too many QPs", reply(0, 1, 257, 0, 0, ""), Reply{}, "257 QPs"},
		{"more new than given", reply(0, 1, 1, 2, 0, ""), Reply{}, "1 QPs, 2 of them new"},
		{"a day in the zygote", reply(0, 1, 0, 0, 1<<60, ""), Reply{}, "us in the zygote"},
		{"control characters", reply(5, 0, 0, 0, 0, "a\x1b[2Jb"), Reply{}, "control characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseReply(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errdefs.IsDataLoss(err) {
					t.Errorf("got %+v, %v; want a DataLoss error saying %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseExit(t *testing.T) {
	le := func(v uint32) []byte { b := make([]byte, 4); binary.NativeEndian.PutUint32(b, v); return b }
	for _, tc := range []struct {
		name         string
		in           []byte
		exit, signal int
		err          string
	}{
		{"exit 0", le(0), 0, -1, ""},
		{"exit 3", le(3 << 8), 3, -1, ""},
		{"SIGSEGV", le(11), -1, 11, ""},
		{"SIGKILL with core flag", le(9 | 0x80), -1, 9, ""},
		{"stopped", le(0x137f), 0, 0, "neither an exit nor a signal"},
		{"short", []byte{0, 0}, 0, 0, "exit message of 2 bytes"},
		{"long", make([]byte, 8), 0, 0, "exit message of 8 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, err := ParseExit(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errdefs.IsDataLoss(err) {
					t.Errorf("got %v, %v; want a DataLoss error saying %q", ws, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.exit >= 0 && (!ws.Exited() || ws.ExitStatus() != tc.exit) {
				t.Errorf("got %#x, want exit %d", uint32(ws), tc.exit)
			}
			if tc.signal >= 0 && (!ws.Signaled() || int(ws.Signal()) != tc.signal) {
				t.Errorf("got %#x, want signal %d", uint32(ws), tc.signal)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	if s, err := ParseStatus([]byte("zygote a tenant t1\n\trow 0\n")); err != nil || s != "zygote a tenant t1\n\trow 0\n" {
		t.Errorf("got %q, %v", s, err)
	}
	for _, in := range [][]byte{nil, make([]byte, StatusMax+1), []byte("a\x00b"), []byte("a\x1b]0;x\x07")} {
		if _, err := ParseStatus(in); !errdefs.IsDataLoss(err) {
			t.Errorf("status %.20q: got %v, want a DataLoss error", in, err)
		}
	}
}

func TestRefusedErrorClass(t *testing.T) {
	for errno, is := range map[syscall.Errno]func(error) bool{
		syscall.ENOENT: errdefs.IsInvalidArgument, syscall.EACCES: errdefs.IsPermissionDenied,
		syscall.EAGAIN: errdefs.IsResourceExhausted, syscall.EIO: errdefs.IsUnavailable,
	} {
		var err error = &RefusedError{Reply: Reply{Errno: errno, Msg: "m"}}
		var re *RefusedError
		if !is(err) || !errors.As(err, &re) {
			t.Errorf("errno %v: %v classed wrong", errno, err)
		}
	}
}

// The decoders take any bytes: never a panic, and what they accept
// satisfies their own checks.
func FuzzParseReply(f *testing.F) {
	f.Add(reply(0, 42, 1, 0, 250, ""))
	f.Add(reply(2, 0, 0, 0, 0, "no peer"))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseReply(b)
		if err != nil {
			return
		}
		if r.PID < 0 || r.QPs > QPsMax || r.NewDest > r.QPs || len(r.Msg) > 255 || strings.ContainsRune(r.Msg, 0) {
			t.Errorf("accepted %+v", r)
		}
	})
}

func FuzzParseExit(f *testing.F) {
	f.Add([]byte{0, 3, 0, 0})
	f.Add([]byte{11, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		ws, err := ParseExit(b)
		if err == nil && !ws.Exited() && !ws.Signaled() {
			t.Errorf("accepted %#x", uint32(ws))
		}
	})
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte("zygote a tenant t1\nrows total=1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseStatus(b)
		if err == nil && (len(s) == 0 || len(s) > StatusMax || strings.ContainsRune(s, 0)) {
			t.Errorf("accepted %q", s)
		}
	})
}
