package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/opencontainers/runtime-spec/specs-go"
)

// Env names the environment variables that locate the binaries.
const (
	EnvContainerdBin = "SWIFT_CONTAINERD_BIN" // dir with containerd, ctr, containerd-shim-runc-v2
	EnvSwiftBin      = "SWIFT_BIN"            // dir with containerd-shim-swift-v2, swiftctl
)

// Daemon is a running containerd.
type Daemon struct {
	Dir       string // everything of this daemon lives below Dir
	Root      string
	State     string
	Socket    string
	Log       string
	Namespace string
	// Version is what `containerd --version` reports (e.g. 2.4.2+unknown);
	// Major its major number, which picks the config format.
	Version string
	Major   int
	ctr     string
	crictl  string
	cmd     *exec.Cmd
	done    chan error
}

// Options configure Start.
type Options struct {
	ContainerdBin string // defaults to $SWIFT_CONTAINERD_BIN
	SwiftBin      string // defaults to $SWIFT_BIN
	Env           []string
	// CRI, when set, enables containerd's CRI plugin with this
	// configuration; by default it is disabled.
	CRI *CRIConfig
	// ExtraConfig is appended to the generated config.toml.
	ExtraConfig string
}

// Missing returns what a run needs but cannot find, each with how to get it.
func (o *Options) Missing() []string {
	if o.ContainerdBin == "" {
		o.ContainerdBin = os.Getenv(EnvContainerdBin)
	}
	if o.SwiftBin == "" {
		o.SwiftBin = os.Getenv(EnvSwiftBin)
	}
	var miss []string
	if os.Geteuid() != 0 {
		miss = append(miss, "root (containerd and runc need it)")
	}
	for _, f := range []string{"containerd", "ctr", "containerd-shim-runc-v2"} {
		if o.ContainerdBin == "" || !isExec(filepath.Join(o.ContainerdBin, f)) {
			miss = append(miss, fmt.Sprintf("%s in $%s=%q (run `make deps`)", f, EnvContainerdBin, o.ContainerdBin))
		}
	}
	if o.SwiftBin == "" || !isExec(filepath.Join(o.SwiftBin, "containerd-shim-swift-v2")) {
		miss = append(miss, fmt.Sprintf("containerd-shim-swift-v2 in $%s=%q (run `make build`)", EnvSwiftBin, o.SwiftBin))
	}
	if _, err := exec.LookPath("runc"); err != nil {
		miss = append(miss, "runc on PATH (run `make deps`)")
	}
	if !isExec(BusyboxPath) {
		miss = append(miss, BusyboxPath+" (Debian busybox-static; run `make deps`)")
	}
	if o.CRI != nil {
		miss = append(miss, o.CRI.missing()...)
	}
	return miss
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// configTemplate is the daemon's config; containerd 2.x reads version 3,
// 1.7 version 2 (the keys used here are the same in both).
const configTemplate = `version = %d
root = %q
state = %q
disabled_plugins = [%s]
[grpc]
  address = %q
[ttrpc]
  address = %q
[debug]
  level = "debug"
`

// Start runs containerd below dir and waits until it answers.
func Start(ctx context.Context, dir string, o Options) (*Daemon, error) {
	if miss := o.Missing(); len(miss) > 0 {
		return nil, fmt.Errorf("cannot start containerd, missing: %s", strings.Join(miss, "; "))
	}
	d := &Daemon{
		Dir: dir, Root: filepath.Join(dir, "root"), State: filepath.Join(dir, "state"),
		Socket: filepath.Join(dir, "containerd.sock"), Log: filepath.Join(dir, "containerd.log"),
		Namespace: "swift-test", ctr: filepath.Join(o.ContainerdBin, "ctr"), done: make(chan error, 1),
	}
	var err error
	if d.Version, d.Major, err = DaemonVersion(ctx, filepath.Join(o.ContainerdBin, "containerd")); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "config.toml")
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, err
	}
	cfgVersion := 3
	if d.Major < 2 {
		cfgVersion = 2
	}
	disabled := []string{"io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"}
	if o.CRI == nil {
		disabled = append([]string{"io.containerd.grpc.v1.cri"}, disabled...)
	}
	for i := range disabled {
		disabled[i] = strconv.Quote(disabled[i])
	}
	body := fmt.Appendf(nil, configTemplate, cfgVersion, d.Root, d.State, strings.Join(disabled, ", "), d.Socket, d.Socket+".ttrpc")
	if o.CRI != nil {
		d.crictl = filepath.Join(o.CRI.CrictlBin, "crictl")
		criCfg, err := o.CRI.config(d)
		if err != nil {
			return nil, err
		}
		body = append(body, criCfg...)
	}
	body = append(body, o.ExtraConfig...)
	if err := os.WriteFile(cfg, body, 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(d.Log)
	if err != nil {
		return nil, err
	}
	d.cmd = exec.Command(filepath.Join(o.ContainerdBin, "containerd"), "--config", cfg)
	d.cmd.Env = append(os.Environ(), "PATH="+o.SwiftBin+":"+o.ContainerdBin+":"+os.Getenv("PATH"))
	d.cmd.Env = append(d.cmd.Env, o.Env...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start containerd: %w", err)
	}
	go func() { d.done <- d.cmd.Wait(); logf.Close() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, _, err := d.Ctr(ctx, "version"); err == nil {
			return d, nil
		}
		select {
		case err := <-d.done:
			d.done <- err
			return nil, fmt.Errorf("containerd exited at start (%v); log:\n%s", err, d.LogTail(40))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.Stop()
			return nil, fmt.Errorf("containerd did not answer within 30s; log:\n%s", d.LogTail(40))
		}
	}
}

// Ctr runs ctr against the daemon in its namespace.
func (d *Daemon) Ctr(ctx context.Context, args ...string) (string, string, error) {
	full := append([]string{"--address", d.Socket, "--namespace", d.Namespace}, args...)
	cmd := exec.CommandContext(ctx, d.ctr, full...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	return so.String(), se.String(), err
}

// ExitCode returns the exit code of a Ctr error, or -1.
func ExitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// LogTail returns the last n lines of the daemon's log.
func (d *Daemon) LogTail(n int) string {
	b, _ := os.ReadFile(d.Log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// BundleDir is where the runtime v2 shim keeps container id's bundle.
// InNamespace returns the daemon seen from another containerd namespace:
// its Ctr and BundleDir use ns (the daemon itself is shared).
func (d *Daemon) InNamespace(ns string) *Daemon {
	c := *d
	c.Namespace = ns
	return &c
}

func (d *Daemon) BundleDir(id string) string {
	return filepath.Join(d.State, "io.containerd.runtime.v2.task", d.Namespace, id)
}

// BundleSpec reads the OCI spec of container id as the shim left it in its
// bundle.
func (d *Daemon) BundleSpec(id string) (*specs.Spec, error) {
	b, err := os.ReadFile(filepath.Join(d.BundleDir(id), "config.json"))
	if err != nil {
		return nil, err
	}
	var s specs.Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s bundle spec: %w", id, err)
	}
	return &s, nil
}

// Stop ends the daemon (SIGTERM, then SIGKILL after 10s).
func (d *Daemon) Stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.done
	}
	d.cmd = nil
}
