//go:build e2e

package integration

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/swift-rdma/swift-containerd/gateway"
	"github.com/swift-rdma/swift-containerd/swiftrun"
)

// both is one function run two ways: through package swiftrun and
// through swift-run.
type both struct {
	goOut string
	goWS  syscall.WaitStatus
	goErr error
	cOut  string
	cCode int
}

// runBoth runs a handler as swiftrun's client does and as swift-run does,
// on the same zygote, with the same stdin.
func (z *hostZygote) runBoth(t *testing.T, stdin string, args ...string) (r both) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	go func() { inW.WriteString(stdin); inW.Close() }()
	c := &swiftrun.Client{Socket: z.sock}
	fn, err := c.Start(ctx, swiftrun.Request{Flags: swiftrun.NoQP, Args: args}, inR, outW, outW)
	inR.Close()
	outW.Close()
	if err != nil {
		outR.Close()
		r.goErr = err
	} else {
		b, _ := io.ReadAll(outR)
		outR.Close()
		r.goOut = string(b)
		r.goWS, r.goErr = fn.Wait(ctx)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(os.Getenv("SWIFT_BIN"), "swift-run"), append([]string{"--socket", z.sock, "--no-qp", "--"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.cCode = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("swift-run: %v", err)
	}
	r.cOut = string(out)
	return r
}

// TestSwiftrunClient: package swiftrun, a second implementation of the
// wire swift-run speaks, gets what swift-run gets from a real swift-init:
// the function's output and exit status, a death by signal, a refusal's
// message, the status text.
func TestSwiftrunClient(t *testing.T) {
	z := startHostZygote(t, 0o022)
	for _, tc := range []struct {
		name   string
		stdin  string
		args   []string
		out    string
		exit   int // -1: killed by signal sig
		sig    syscall.Signal
		cCode  int
		cMatch string
	}{
		{"stdin to stdout", "through the zygote\n", []string{"cat"}, "through the zygote\n", 0, 0, 0, "through the zygote\n"},
		{"exit status", "", []string{"exit", "3"}, "", 3, 0, 3, ""},
		{"crash", "", []string{"crash"}, "", -1, syscall.SIGSEGV, 139, ""},
		{"unknown handler", "", []string{"nosuch"}, "swift: no handler nosuch", 127, 0, 127, "swift: no handler nosuch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := z.runBoth(t, tc.stdin, tc.args...)
			goOut, ws, err, cOut, cCode := r.goOut, r.goWS, r.goErr, r.cOut, r.cCode
			if err != nil {
				t.Fatalf("swiftrun: %v", err)
			}
			if !strings.HasPrefix(goOut, tc.out) || !strings.HasPrefix(cOut, tc.cMatch) {
				t.Errorf("output: swiftrun %q, swift-run %q; want %q", goOut, cOut, tc.out)
			}
			switch {
			case tc.exit >= 0 && (!ws.Exited() || ws.ExitStatus() != tc.exit):
				t.Errorf("swiftrun: wait status %#x, want exit %d", uint32(ws), tc.exit)
			case tc.exit < 0 && (!ws.Signaled() || ws.Signal() != tc.sig):
				t.Errorf("swiftrun: wait status %#x, want signal %v", uint32(ws), tc.sig)
			}
			if cCode != tc.cCode {
				t.Errorf("swift-run exit %d, want %d", cCode, tc.cCode)
			}
		})
	}
	// a refusal: the same message both ways (a peer this zygote lacks)
	c := &swiftrun.Client{Socket: z.sock}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Start(ctx, swiftrun.Request{Peer: "nosuchpeer", Args: []string{"noop"}}, os.Stdin, os.Stdout, os.Stderr)
	var refused *swiftrun.RefusedError
	out, _ := z.run(t, 0, "--peer", "nosuchpeer", "--", "noop")
	if !errors.As(err, &refused) || refused.Reply.Msg == "" || !strings.Contains(out, refused.Reply.Msg) {
		t.Errorf("refusal: swiftrun %v, swift-run %q: want the same message", err, out)
	}
	// the status text
	st, err := c.Status(ctx)
	cst, _ := z.run(t, 0, "--status")
	if err != nil || !strings.HasPrefix(st, "zygote a tenant t1") || firstLine(st) != firstLine(cst) {
		t.Errorf("status: swiftrun %q (%v), swift-run %q", st, err, cst)
	}
	// a signal to the function's process group
	inR, inW, _ := os.Pipe()
	defer inW.Close()
	fn, err := c.Start(ctx, swiftrun.Request{Flags: swiftrun.NoQP, Args: []string{"sleep", "5000"}}, inR, os.Stderr, os.Stderr)
	inR.Close()
	if err != nil {
		t.Fatal(err)
	}
	// at once: in the moments after fork the function has no process
	// group of its own yet, and the signal must reach it all the same
	if err := fn.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if ws, err := fn.Wait(ctx); err != nil || !ws.Signaled() || ws.Signal() != syscall.SIGUSR1 {
		t.Errorf("after SIGUSR1: %#x %v, want killed by SIGUSR1", uint32(ws), err)
	}
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// children are the processes whose parent is pid.
func children(pid int) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestGatewayOnZygote: swift-gateway's OpenWhisk mode on a real swift-init
// (no RDMA here: functions without QPs). /run's activation reaches the
// function, and a function past its deadline is ended by the zygote: no
// process of it is left.
func TestGatewayOnZygote(t *testing.T) {
	z := startHostZygote(t, 0o022)
	g, err := gateway.New(gateway.Config{Mode: gateway.ModeOpenWhisk, NoQP: true, Zygote: &swiftrun.Client{Socket: z.sock},
		Concurrency: 4, Stdout: io.Discard, Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	defer srv.Close()
	post := func(path, body string) (int, string) {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	if code, body := post("/init", `{"value":{"main":"cat"}}`); code != 200 {
		t.Fatalf("/init: %d %s", code, body)
	}
	for i := range 20 {
		code, body := post("/run", `{"value":{"i":`+strconv.Itoa(i)+`},"activation_id":"a`+strconv.Itoa(i)+`"}`)
		if want := `{"value":{"i":` + strconv.Itoa(i) + `},"activation_id":"a` + strconv.Itoa(i) + `"}`; code != 200 || body != want {
			t.Fatalf("/run %d: %d %s, want 200 %s", i, code, body, want)
		}
	}
	// past its deadline: a second gateway whose handler sleeps
	g2, err := gateway.New(gateway.Config{Mode: gateway.ModeOpenWhisk, NoQP: true, Zygote: &swiftrun.Client{Socket: z.sock},
		Handler: []string{"sleep", "20000"}, Stdout: io.Discard, Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	srv2 := httptest.NewServer(g2)
	defer srv2.Close()
	before := len(children(z.cmd.Process.Pid))
	dl := time.Now().Add(500 * time.Millisecond).UnixMilli()
	resp, err := http.Post(srv2.URL+"/run", "application/json", strings.NewReader(`{"value":{},"deadline":`+strconv.FormatInt(dl, 10)+`}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || !strings.Contains(string(b), "did not end by the activation's deadline") {
		t.Errorf("past the deadline: %d %s", resp.StatusCode, b)
	}
	// SIGTERM at once, SIGKILL a second later at the latest
	for deadline := time.Now().Add(3 * time.Second); len(children(z.cmd.Process.Pid)) > before; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the zygote's children %v 3 s after the deadline, want only its entrypoint's", children(z.cmd.Process.Pid))
		}
	}
}
