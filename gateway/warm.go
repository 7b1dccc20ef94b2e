package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/swift-rdma/swift-containerd/swiftrun"
)

// warm is Config.Warm's one long-lived function: its stdin and stdout.
type warm struct {
	mu  sync.Mutex
	fn  *swiftrun.Function
	in  *os.File
	out *os.File
	rd  *bufio.Reader
}

// serve sends stdin as one line to the long-lived function (forked on
// first use, and again after it failed) and answers with its line.
func (w *warm) serve(ctx context.Context, g *Gateway, req swiftrun.Request, stdin []byte) result {
	if bytes.IndexByte(stdin, '\n') >= 0 {
		return fail(http.StatusBadRequest, "warm: a request's input must be one line")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	t0 := time.Now()
	// output left from before (a function that answered a line with
	// two) must not answer this request: start again
	if w.fn != nil && w.rd.Buffered() > 0 {
		w.stop()
	}
	if w.fn == nil {
		if r := w.start(ctx, g, req); r.err != nil {
			return r
		}
	}
	dl, _ := ctx.Deadline()
	w.in.SetWriteDeadline(dl)
	w.out.SetReadDeadline(dl)
	if _, err := w.in.Write(append(stdin, '\n')); err != nil {
		w.stop()
		return fail(http.StatusBadGateway, "warm: the function took no input: %v", err)
	}
	line, err := w.rd.ReadSlice('\n')
	if err != nil {
		w.stop()
		if errors.Is(err, bufio.ErrBufferFull) {
			return fail(http.StatusBadGateway, "the function's result exceeds the gateway's bound of %d bytes: it was ended", g.cfg.MaxResult)
		}
		return fail(http.StatusBadGateway, "warm: the function gave no result: %v", err)
	}
	return result{stdout: bytes.Clone(line), forked: true, took: time.Since(t0)}
}

func (w *warm) start(ctx context.Context, g *Gateway, req swiftrun.Request) result {
	// the function outlives this request: only the deadline of its start
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	fn, inW, outR, errR, err := g.fork(sctx, req)
	if errors.Is(err, errPipe) {
		return fail(http.StatusInternalServerError, "%v", err)
	}
	if err != nil {
		return fail(http.StatusServiceUnavailable, "warm: %v", err)
	}
	go func() {
		defer errR.Close()
		g.copyLog(errR)
	}()
	w.fn, w.in, w.out, w.rd = fn, inW, outR, bufio.NewReaderSize(outR, int(g.cfg.MaxResult)+1)
	return result{}
}

// stop ends the function; the next request forks another.
func (w *warm) stop() {
	w.fn.Close()
	w.in.Close()
	w.out.Close()
	w.fn, w.in, w.out, w.rd = nil, nil, nil, nil
}
