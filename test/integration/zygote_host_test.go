//go:build e2e

package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hostZygote is swift-init run directly on this host (no container, no
// RDMA: functions run without QPs), its control socket in dir/run.
type hostZygote struct {
	dir, sock, status string
	cmd               *exec.Cmd
}

// startHostZygote starts swift-init under umask mask, with an entrypoint
// that sleeps, and waits (at most 10 s) for its control socket.
func startHostZygote(t *testing.T, mask int) *hostZygote {
	t.Helper()
	bin := os.Getenv("SWIFT_BIN")
	for _, f := range []string{"swift-init", "swift-run"} {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			t.Fatalf("%s not built in %s (run `make build`)", f, bin)
		}
	}
	dir, err := os.MkdirTemp("", "swift-hostzygote-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// another uid may reach the socket's directory: only the socket's own
	// mode stands between it and the zygote
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	z := &hostZygote{dir: dir, sock: filepath.Join(dir, "run", "zygote.sock"), status: filepath.Join(dir, "run", "pool.status")}
	conf := filepath.Join(dir, "pool.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("name a\ntenant t1\nsocket %s\n", z.sock)), 0o644); err != nil {
		t.Fatal(err)
	}
	z.cmd = exec.Command(filepath.Join(bin, "swift-init"), "--config", conf, "--status", z.status, "--", "/bin/sleep", "60")
	z.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	old := syscall.Umask(mask)
	err = z.cmd.Start()
	syscall.Umask(old)
	if err != nil {
		t.Fatalf("start swift-init: %v", err)
	}
	t.Cleanup(func() {
		syscall.Kill(-z.cmd.Process.Pid, syscall.SIGKILL)
		z.cmd.Wait()
	})
	// the socket exists from its bind, and answers from its listen
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if fi, err := os.Stat(z.sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			if c, err := net.Dial("unixpacket", z.sock); err == nil {
				c.Close()
				return z
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("swift-init made no control socket at %s that takes connections within 10 s", z.sock)
		}
	}
}

// run runs swift-run against the zygote (as uid when uid > 0), bounded by
// 10 s; its output and exit code (-1: it did not end in time).
func (z *hostZygote) run(t *testing.T, uid int, args ...string) (string, int) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(c, filepath.Join(os.Getenv("SWIFT_BIN"), "swift-run"), append([]string{"--socket", z.sock}, args...)...)
	if uid > 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	// swift-run hands its stdout to the zygote: a zygote that holds it
	// must not hold the test too
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	if c.Err() != nil {
		return string(out), -1
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("swift-run: %v", err)
	}
	return string(out), 0
}

// TestZygoteSocketIgnoresUmask: an init started with a permissive umask
// (000) still makes its control socket the zygote user's, mode 0755: a
// process under another uid (a function's own) cannot connect to ask for
// forks or the pool's status.
func TestZygoteSocketIgnoresUmask(t *testing.T) {
	z := startHostZygote(t, 0)
	fi, err := os.Stat(z.sock)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o755 {
		t.Errorf("control socket mode %v under umask 000, want -rwxr-xr-x", fi.Mode().Perm())
	}
	if out, code := z.run(t, 65534, "--status"); code != 125 || !strings.Contains(out, "Permission denied") {
		t.Errorf("uid 65534 asked for the status: exit %d, output %q; want 125 and Permission denied", code, out)
	}
	if out, code := z.run(t, 0, "--status"); code != 0 || !strings.HasPrefix(out, "zygote a tenant t1") {
		t.Errorf("the zygote's own user asked for the status: exit %d, output %q", code, out)
	}
}

// TestZygoteStatusFIFO: a function under the zygote's own uid puts a FIFO
// where the zygote writes its status file (pool.status.tmp). The zygote
// must not wait for a reader: the next function ends, its status is
// written anew as a regular file, and the zygote keeps answering.
func TestZygoteStatusFIFO(t *testing.T) {
	z := startHostZygote(t, 0o022)
	// after its first status write (its socket comes first): the FIFO
	// must be what the next write meets, not a race with this one
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(z.status); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("swift-init wrote no status file %s within 10 s", z.status)
		}
	}
	if err := syscall.Mkfifo(z.status+".tmp", 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if out, code := z.run(t, 0, "--no-qp", "--", "noop"); code != 0 {
			t.Fatalf("function %d after the FIFO: exit %d, output %q (-1: the zygote did not answer in 10 s)", i, code, out)
		}
	}
	if out, code := z.run(t, 0, "--status"); code != 0 {
		t.Fatalf("status after the FIFO: exit %d, output %q (-1: the zygote did not answer in 10 s)", code, out)
	}
	fi, err := os.Lstat(z.status)
	if err != nil || !fi.Mode().IsRegular() {
		t.Errorf("status file %s after the FIFO: %v, %v; want a regular file written anew", z.status, fi, err)
	}
	if fi, err := os.Lstat(z.status + ".tmp"); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
		t.Errorf("%s.tmp is still a FIFO: the zygote never replaced it", z.status)
	}
}
