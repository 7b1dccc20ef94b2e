package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

func TestInstallCommand(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "config.toml")
	orig := "version = 3\n"
	if err := os.WriteFile(root, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	dropIn := filepath.Join(dir, "conf.d", "swift.toml")
	steps := []struct {
		verb string
		args []string
		out  []string // fragments, in order
		// state after the step
		dropIn bool
	}{
		{"install", []string{"--dry-run"}, []string{"--- /dev/null\n+++ " + dropIn, "+imports = [\"" + dir + "/conf.d/*.toml\"]",
			"would create drop-in: " + dropIn, "would add", "dry run: nothing written"}, false},
		{"install", nil, []string{"create drop-in: " + dropIn, "add \"" + dir + "/conf.d/*.toml\" to imports: " + root, "restart containerd"}, true},
		{"install", nil, []string{"runtime \"swift\" is already installed (" + dropIn + "): nothing changed"}, true},
		{"install", []string{"--dry-run"}, []string{"already installed"}, true},
		{"uninstall", []string{"--dry-run"}, []string{"+++ /dev/null", "would remove drop-in", "dry run: nothing written"}, true},
		{"uninstall", nil, []string{"remove drop-in: " + dropIn, "remove \"" + dir + "/conf.d/*.toml\" from imports"}, false},
		{"uninstall", nil, []string{"runtime \"swift\" is not installed: nothing changed"}, false},
	}
	for i, s := range steps {
		args := append([]string{"containerd", "--config", root}, s.args...)
		out, _, err := swiftctl(t, append([]string{s.verb}, args...)...)
		if err != nil {
			t.Fatalf("step %d: %s %q: %v", i, s.verb, args, err)
		}
		rest := out
		for _, f := range s.out {
			j := strings.Index(rest, f)
			if j < 0 {
				t.Fatalf("step %d: %s %q: output lacks %q (in order):\n%s", i, s.verb, args, f, out)
			}
			rest = rest[j+len(f):]
		}
		if _, err := os.Stat(dropIn); (err == nil) != s.dropIn {
			t.Fatalf("step %d: drop-in exists = %v, want %v", i, err == nil, s.dropIn)
		}
	}
	if b, _ := os.ReadFile(root); string(b) != orig {
		t.Errorf("root config after uninstall = %q, want %q", b, orig)
	}
}

// -o json reports the change file by file, as the node installer reads
// it; --shim becomes the entry's runtime_path.
func TestInstallCommandJSON(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(root, []byte("version = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	shim := filepath.Join(dir, "containerd-shim-swift-v2")
	if err := os.WriteFile(shim, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dropIn := filepath.Join(dir, "conf.d", "swift.toml")
	for i, s := range []struct {
		args []string
		want string
	}{
		{[]string{"install", "containerd", "--shim", shim, "-o", "json", "--dry-run"},
			`{"runtime":"swift","drop_in":"` + dropIn + `","changed":true,"dry_run":true,"changes":[` +
				`{"path":"` + dropIn + `","action":"write","what":"create drop-in"},` +
				`{"path":"` + root + `","action":"write","what":"add \"` + dir + `/conf.d/*.toml\" to imports"}],"notes":[]}`},
		{[]string{"install", "containerd", "--shim", shim, "-o", "json"},
			`{"runtime":"swift","drop_in":"` + dropIn + `","changed":true,"dry_run":false,"changes":[` +
				`{"path":"` + dropIn + `","action":"write","what":"create drop-in"},` +
				`{"path":"` + root + `","action":"write","what":"add \"` + dir + `/conf.d/*.toml\" to imports"}],"notes":[]}`},
		{[]string{"install", "containerd", "--shim", shim, "-o", "json"},
			`{"runtime":"swift","drop_in":"` + dropIn + `","changed":false,"dry_run":false,"changes":[],"notes":[]}`},
		{[]string{"uninstall", "containerd", "-o", "json"},
			`{"runtime":"swift","drop_in":"` + dropIn + `","changed":true,"dry_run":false,"changes":[` +
				`{"path":"` + dropIn + `","action":"remove","what":"remove drop-in"},` +
				`{"path":"` + root + `","action":"write","what":"remove \"` + dir + `/conf.d/*.toml\" from imports"}],"notes":[]}`},
	} {
		out, _, err := swiftctl(t, append(s.args, "--config", root)...)
		if err != nil {
			t.Fatalf("step %d: %q: %v", i, s.args, err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(out)); err != nil {
			t.Fatalf("step %d: %q: not JSON: %v\n%s", i, s.args, err, out)
		}
		if compact.String() != s.want {
			t.Errorf("step %d: %q:\n got %s\nwant %s", i, s.args, compact.String(), s.want)
		}
		if i == 1 {
			b, _ := os.ReadFile(dropIn)
			if !strings.Contains(string(b), "\n  runtime_path = \""+shim+"\"\n") {
				t.Errorf("drop-in lacks runtime_path %s:\n%s", shim, b)
			}
		}
	}
	if _, _, err := swiftctl(t, "install", "containerd", "--config", root, "-o", "yaml"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("-o yaml: err = %v, want invalid argument", err)
	}
}

func TestInstallCommandErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		verb string
		args []string
		err  error
	}{
		{"install", nil, errdefs.ErrInvalidArgument},
		{"install", []string{"docker"}, errdefs.ErrInvalidArgument},
		{"install", []string{"containerd", "--config", filepath.Join(dir, "none.toml")}, errdefs.ErrNotFound},
		{"install", []string{"containerd", "--config", filepath.Join(dir, "none.toml"), "extra"}, errdefs.ErrInvalidArgument},
		{"uninstall", []string{"containerd", "--version", "3"}, nil}, // flag only install has
	} {
		_, _, err := swiftctl(t, append([]string{tc.verb}, tc.args...)...)
		if tc.err == nil {
			if code, _ := classify(err); err == nil || !strings.Contains(err.Error(), "unknown flag: --version") || code != exitUsage {
				t.Errorf("%s %q: err = %v, want an unknown flag", tc.verb, tc.args, err)
			}
			continue
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("%s %q: err = %v, want %v", tc.verb, tc.args, err, tc.err)
		}
	}
}

// TestInstallInheritsRunc: without --runc and --systemd-cgroup the entry
// takes the node's runc entry's options; with them, the flags win.
func TestInstallInheritsRunc(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "config.toml")
	body := "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n" +
		"[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc.options]\nBinaryName = \"/bin/true\"\nSystemdCgroup = true\n"
	if err := os.WriteFile(root, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := swiftctl(t, "install", "containerd", "--config", root, "--dry-run")
	if err != nil || !strings.Contains(out, "+  BinaryName = \"/bin/true\"\n") || !strings.Contains(out, "+  SystemdCgroup = true\n") {
		t.Fatalf("install --dry-run (%v):\n%s", err, out)
	}
	out, _, err = swiftctl(t, "install", "containerd", "--dry-run", "--config", root, "--runc", "/bin/false")
	if err != nil || !strings.Contains(out, "+  BinaryName = \"/bin/false\"\n") {
		t.Fatalf("install --runc /bin/false --dry-run (%v):\n%s", err, out)
	}
}
