package metrics

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"
)

// TestMain runs a sender in a child process when asked (SWIFT_TEST_SEND
// names the socket): the tests' way to send as another uid.
func TestMain(m *testing.M) {
	if p := os.Getenv("SWIFT_TEST_SEND"); p != "" {
		if err := Send(p, Report{Outcome: OutcomeZygote, Seconds: 0.01}); err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestReason(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{errdefs.ErrInvalidArgument, "invalid_argument"},
		{errors.Join(errors.New("quota"), errdefs.ErrResourceExhausted), "resource_exhausted"},
		{errdefs.ErrPermissionDenied, "permission_denied"},
		{errdefs.ErrFailedPrecondition, "failed_precondition"},
		{errdefs.ErrDataLoss, "data_loss"},
		{errdefs.ErrUnavailable, "unavailable"},
		{errors.New("plain"), "unknown"},
	}
	for _, tc := range tests {
		if got := Reason(tc.err); got != tc.want {
			t.Errorf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		in      string
		want    Report
		wantErr string
	}{
		{`{"outcome":"zygote","seconds":0.25}`, Report{Outcome: "zygote", Seconds: 0.25}, ""},
		{`{"outcome":"refused","reason":"resource_exhausted","seconds":0.004}`, Report{Outcome: "refused", Reason: "resource_exhausted", Seconds: 0.004}, ""},
		{`{"outcome":"failed","reason":"unknown","seconds":1}`, Report{Outcome: "failed", Reason: "unknown", Seconds: 1}, ""},
		{`{"outcome":"left","seconds":0}`, Report{Outcome: "left"}, ""},
		{`{"outcome":"borrowed","seconds":1}`, Report{}, `outcome "borrowed": not one of`},
		{`{"outcome":"refused","reason":"made_up","seconds":1}`, Report{}, `reason "made_up": not an error class`},
		{`{"outcome":"refused","seconds":1}`, Report{}, `reason "": not an error class`},
		{`{"outcome":"zygote","reason":"invalid_argument","seconds":1}`, Report{}, `outcome "zygote" has a reason`},
		{`{"outcome":"zygote","seconds":-1}`, Report{}, "duration -1 s"},
		{`{"outcome":"zygote","seconds":1e9}`, Report{}, "duration 1e+09 s"},
		{`{"outcome":"zygote","seconds":1,"tenant":"x"}`, Report{}, `unknown field "tenant"`},
		{`{"outcome":"zygote","seconds":1}{}`, Report{}, "data after its object"},
		{`{"outcome":"zygote"`, Report{}, "does not decode"},
		{`[]`, Report{}, "does not decode"},
		{`{"outcome":"zygote","seconds":1,"x":"` + strings.Repeat("a", 300) + `"}`, Report{}, "at most 256"},
	}
	for _, tc := range tests {
		got, err := Decode([]byte(tc.in))
		if tc.wantErr == "" {
			if err != nil || got != tc.want {
				t.Errorf("Decode(%s) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errdefs.IsInvalidArgument(err) {
			t.Errorf("Decode(%s) error %v: want InvalidArgument with %q", tc.in, err, tc.wantErr)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"outcome":"refused","reason":"resource_exhausted","seconds":0.004}`))
	f.Add([]byte(`{"outcome":"zygote","seconds":1}`))
	f.Add([]byte(`{"outcome":"left","seconds":1e308}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		if err != nil {
			if !errdefs.IsInvalidArgument(err) {
				t.Fatalf("error of no class: %v", err)
			}
			return
		}
		if !known(Outcomes, r.Outcome) || r.Seconds < 0 || r.Seconds > maxSeconds {
			t.Fatalf("accepted %+v", r)
		}
		if (r.Outcome == OutcomeRefused || r.Outcome == OutcomeFailed) != (r.Reason != "") {
			t.Fatalf("accepted %+v: a reason exactly where the outcome has one", r)
		}
	})
}

// TestSendReceive: root's reports are counted; a send never waits (no
// agent, a stale socket, a full queue); another uid cannot reach the
// socket, and is not counted even where it could.
func TestSendReceive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (a report socket only root may use, a sender of another uid)")
	}
	dir := t.TempDir()
	path := SocketPath(dir)
	if err := Send(path, Report{Outcome: OutcomeLeft}); err == nil || !errors.Is(err, unix.ENOENT) {
		t.Fatalf("send with no agent: %v, want ENOENT", err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path); err == nil || !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("listen over a regular file: %v, want FailedPrecondition", err)
	}
	os.Remove(path)
	r, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, %v: want 0600", st, err)
	}
	c := NewCollector()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { r.Serve(ctx, c.Observe, c.Drop); close(served) }()
	for _, rep := range []Report{
		{Outcome: OutcomeZygote, Seconds: 0.02}, {Outcome: OutcomeZygote, Seconds: 0.03},
		{Outcome: OutcomeRefused, Reason: "resource_exhausted", Seconds: 0.001},
	} {
		if err := Send(path, rep); err != nil {
			t.Fatal(err)
		}
	}
	// a malformed datagram from root
	raw := func(b []byte) {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if err := unix.Sendto(fd, b, 0, &unix.SockaddrUnix{Name: path}); err != nil {
			t.Fatal(err)
		}
	}
	raw([]byte(`{"outcome":"zygote","seconds":"soon"}`))
	raw([]byte(strings.Repeat("x", 4096)))
	// another uid: the socket's mode keeps it out
	// the test binary, where uid 65534 may run it
	binDir, err := os.MkdirTemp("", "swift-metrics-sender-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(binDir)
	bin := filepath.Join(binDir, "sender")
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(os.Args[0]); err != nil || os.WriteFile(bin, b, 0o755) != nil {
		t.Fatalf("copy the test binary: %v", err)
	}
	nobody := func() error {
		cmd := exec.Command(bin, "-test.run=^$")
		cmd.Env = append(os.Environ(), "SWIFT_TEST_SEND="+path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	if err := nobody(); err == nil || !strings.Contains(err.Error(), "report to "+path+": permission denied") {
		t.Fatalf("uid 65534 sending: %v, want permission denied", err)
	}
	// and were the socket and its directory opened to all, its reports
	// are still not counted
	if err := os.Chmod(path, 0o666); err != nil || os.Chmod(dir, 0o755) != nil || os.Chmod(filepath.Dir(dir), 0o755) != nil {
		t.Fatal(err)
	}
	if err := nobody(); err != nil {
		t.Fatalf("uid 65534 sending to an open socket: %v", err)
	}
	want := map[string]float64{"zygote": 2, "refused": 1}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && (testutil.ToFloat64(c.dropped.WithLabelValues("not_root")) < 1 ||
		testutil.ToFloat64(c.dropped.WithLabelValues("truncated")) < 1) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := testutil.ToFloat64(c.creates.WithLabelValues("zygote", "")); got != want["zygote"] {
		t.Errorf("zygote creates %v, want 2 (uid 65534's not counted)", got)
	}
	if got := testutil.ToFloat64(c.creates.WithLabelValues("refused", "resource_exhausted")); got != want["refused"] {
		t.Errorf("refused creates %v, want 1", got)
	}
	for why, n := range map[string]float64{"not_root": 1, "malformed": 1, "truncated": 1} {
		if got := testutil.ToFloat64(c.dropped.WithLabelValues(why)); got != n {
			t.Errorf("dropped %s: %v, want %v", why, got, n)
		}
	}
	cancel()
	<-served
	r.Close()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after Close: %v", err)
	}

	// a stale socket (its agent gone) and a full queue: no wait
	r, err = Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var full error
	for i := 0; i < 5000 && full == nil; i++ {
		full = Send(path, Report{Outcome: OutcomeLeft})
	}
	if full == nil || !errors.Is(full, unix.EAGAIN) {
		t.Errorf("5000 sends to an agent that does not read: %v, want EAGAIN once its queue is full", full)
	}
	r.conn.Close() // the agent gone, its socket file left
	if err := Send(path, Report{Outcome: OutcomeLeft}); !errors.Is(err, unix.ECONNREFUSED) {
		t.Errorf("send to a stale socket: %v, want ECONNREFUSED", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("sends to a full queue and a stale socket took %v", d)
	}
	// the next agent replaces the stale socket
	r2, err := Listen(path)
	if err != nil {
		t.Fatalf("listen over a stale socket: %v", err)
	}
	r2.Close()
}
