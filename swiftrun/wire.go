package swiftrun

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
)

// The wire's constants, as zygote/proto.h and zygote/swift-limits.h
// define them.
const (
	reqMagic = "SRN2"
	sigMagic = "SSG1"
	// NameMax is the longest peer name, in bytes.
	NameMax = 127
	// ArgsMax is the most bytes the arguments take, each with its NUL.
	ArgsMax = 4096
	// ArgcMax is the most arguments, the handler's name included.
	ArgcMax = 255
	// QPsMax is the most QPs one request may ask for.
	QPsMax = 256
	// StatusMax is the most bytes of a status reply's text.
	StatusMax = 96 * 1024

	reqHdr  = 16 + NameMax + 1 // offsetof(struct swift_req, args)
	repSize = 4 + 4 + 4 + 4 + 8 + 256
	msgSize = 256
)

// Flags of a request (SWIFT_REQ_*).
type Flags uint32

// The request flags.
const (
	// NoQP forks without a QP.
	NoQP Flags = 1
	// All hands over every free QP of the peer.
	All Flags = 2
	// Status asks for the pool's and assignments' tables (no function).
	Status Flags = 4
	// New connects fresh QPs on demand even when pooled ones are free.
	New Flags = 8
	// Own has the function create and connect QPs of its own.
	Own Flags = 16
	// connect is SWIFT_REQ_CONNECT: not this package's (swift-warm's).
	connect    Flags = 32
	knownFlags       = NoQP | All | Status | New | Own | connect
)

// Request asks the zygote for a function (or, with Status, its tables).
type Request struct {
	// Peer names the peer whose QPs the function gets: as configured, or a
	// bare name in the zygote's own namespace. Empty: the first peer.
	Peer string
	// QPs is how many QPs to hand over (0: one).
	QPs   int
	Flags Flags
	// Args are the handler (a built-in's name or a shared object's path)
	// and its arguments.
	Args []string
}

// MarshalBinary is the request as the zygote reads it: struct swift_req's
// header, then exactly its arguments. A request the zygote would refuse
// for its form is an InvalidArgument error naming what is wrong.
func (r Request) MarshalBinary() ([]byte, error) {
	if r.Flags&^(knownFlags&^connect) != 0 {
		return nil, fmt.Errorf("request flags %#x: unknown or not a function's: %w", uint32(r.Flags), errdefs.ErrInvalidArgument)
	}
	if len(r.Peer) > NameMax || strings.ContainsFunc(r.Peer, func(c rune) bool { return c <= ' ' || c > '~' }) {
		return nil, fmt.Errorf("peer %.40q: a name of at most %d printable ASCII bytes, without spaces: %w", r.Peer, NameMax, errdefs.ErrInvalidArgument)
	}
	if r.QPs < 0 || r.QPs > QPsMax {
		return nil, fmt.Errorf("qps %d: want 0 to %d: %w", r.QPs, QPsMax, errdefs.ErrInvalidArgument)
	}
	status := r.Flags&Status != 0
	if status && (r.Flags != Status || len(r.Args) > 0 || r.Peer != "" || r.QPs != 0) {
		return nil, fmt.Errorf("a status request takes no other flag, peer, QP count or argument: %w", errdefs.ErrInvalidArgument)
	}
	// the combinations the zygote refuses (zygote/ctl.c)
	switch {
	case r.Flags&NoQP != 0 && (r.Flags&(All|New|Own) != 0 || r.QPs != 0):
		return nil, fmt.Errorf("no-qp takes no QP option: %w", errdefs.ErrInvalidArgument)
	case r.Flags&New != 0 && r.Flags&Own != 0:
		return nil, fmt.Errorf("new and own exclude each other: %w", errdefs.ErrInvalidArgument)
	case r.Flags&All != 0 && r.QPs != 0:
		return nil, fmt.Errorf("all and a QP count exclude each other: %w", errdefs.ErrInvalidArgument)
	}
	if !status && len(r.Args) == 0 {
		return nil, fmt.Errorf("no handler named: %w", errdefs.ErrInvalidArgument)
	}
	if len(r.Args) > ArgcMax {
		return nil, fmt.Errorf("%d arguments: at most %d: %w", len(r.Args), ArgcMax, errdefs.ErrInvalidArgument)
	}
	var args bytes.Buffer
	for i, a := range r.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, fmt.Errorf("argument %d holds a NUL: %w", i, errdefs.ErrInvalidArgument)
		}
		if i == 0 && a == "" {
			return nil, fmt.Errorf("empty handler name: %w", errdefs.ErrInvalidArgument)
		}
		args.WriteString(a)
		args.WriteByte(0)
	}
	if args.Len() > ArgsMax {
		return nil, fmt.Errorf("arguments of %d bytes: at most %d with their NULs: %w", args.Len(), ArgsMax, errdefs.ErrInvalidArgument)
	}
	b := make([]byte, reqHdr, reqHdr+args.Len())
	copy(b, reqMagic)
	binary.NativeEndian.PutUint32(b[4:], uint32(r.Flags))
	copy(b[8:8+NameMax], r.Peer)
	binary.NativeEndian.PutUint32(b[8+NameMax+1:], uint32(r.QPs))
	binary.NativeEndian.PutUint32(b[12+NameMax+1:], uint32(len(r.Args)))
	return append(b, args.Bytes()...), nil
}

// Reply is the zygote's first answer (struct swift_rep).
type Reply struct {
	// Errno is 0 when the function was forked, else why not.
	Errno syscall.Errno
	// PID is the function's pid in the container (0 for a status reply).
	PID int
	// QPs were handed over, NewDest of them connected on demand.
	QPs, NewDest int
	// ZygoteTime is the zygote's time before fork returned.
	ZygoteTime time.Duration
	// Msg says why, when Errno is not 0.
	Msg string
}

// ParseReply reads a struct swift_rep. Anything but exactly its size, a
// message without its NUL, a negative errno or pid, or a forked function
// without a pid is an error.
func ParseReply(b []byte) (Reply, error) {
	if len(b) != repSize {
		return Reply{}, fmt.Errorf("zygote reply of %d bytes, want %d: %w", len(b), repSize, errdefs.ErrDataLoss)
	}
	st := int32(binary.NativeEndian.Uint32(b[0:]))
	pid := int32(binary.NativeEndian.Uint32(b[4:]))
	nqp := binary.NativeEndian.Uint32(b[8:])
	nd := binary.NativeEndian.Uint32(b[12:])
	us := binary.NativeEndian.Uint64(b[16:])
	raw := b[24:]
	end := bytes.IndexByte(raw, 0)
	if end < 0 {
		return Reply{}, fmt.Errorf("zygote reply: message without its NUL: %w", errdefs.ErrDataLoss)
	}
	switch {
	case st < 0 || st > 4095:
		return Reply{}, fmt.Errorf("zygote reply: status %d is no errno: %w", st, errdefs.ErrDataLoss)
	case pid < 0:
		return Reply{}, fmt.Errorf("zygote reply: pid %d: %w", pid, errdefs.ErrDataLoss)
	case nqp > QPsMax || nd > nqp:
		return Reply{}, fmt.Errorf("zygote reply: %d QPs, %d of them new: %w", nqp, nd, errdefs.ErrDataLoss)
	case us > uint64(24*time.Hour/time.Microsecond):
		return Reply{}, fmt.Errorf("zygote reply: %d us in the zygote: %w", us, errdefs.ErrDataLoss)
	}
	msg := string(raw[:end])
	if strings.ContainsFunc(msg, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return Reply{}, fmt.Errorf("zygote reply: message with control characters: %w", errdefs.ErrDataLoss)
	}
	return Reply{Errno: syscall.Errno(st), PID: int(pid), QPs: int(nqp), NewDest: int(nd),
		ZygoteTime: time.Duration(us) * time.Microsecond, Msg: msg}, nil
}

// ParseExit reads the second answer (struct swift_exit): the function's
// wait status, which must be an exit or a death by signal.
func ParseExit(b []byte) (syscall.WaitStatus, error) {
	if len(b) != 4 {
		return 0, fmt.Errorf("zygote exit message of %d bytes, want 4: %w", len(b), errdefs.ErrDataLoss)
	}
	ws := syscall.WaitStatus(binary.NativeEndian.Uint32(b))
	if !ws.Exited() && !ws.Signaled() {
		return 0, fmt.Errorf("zygote exit message: wait status %#x is neither an exit nor a signal: %w", uint32(ws), errdefs.ErrDataLoss)
	}
	return ws, nil
}

// ParseStatus checks a status reply's text: at most StatusMax bytes of
// printable lines.
func ParseStatus(b []byte) (string, error) {
	if len(b) == 0 || len(b) > StatusMax {
		return "", fmt.Errorf("zygote status of %d bytes: want 1 to %d: %w", len(b), StatusMax, errdefs.ErrDataLoss)
	}
	s := string(b)
	if strings.ContainsFunc(s, func(r rune) bool { return (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f }) {
		return "", fmt.Errorf("zygote status: control characters in its text: %w", errdefs.ErrDataLoss)
	}
	return s, nil
}

// signalMessage is a struct swift_sig: deliver signo to the function.
func signalMessage(sig syscall.Signal) []byte {
	b := make([]byte, 8)
	copy(b, sigMagic)
	binary.NativeEndian.PutUint32(b[4:], uint32(sig))
	return b
}
