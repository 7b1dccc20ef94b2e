//go:build e2e

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExampleDropIns: the real containerd loads each drop-in its version
// reads through `imports`, and its merged config shows the swift runtime.
// containerd 2.x reads both (it migrates version 2); 1.7 only version 2.
func TestExampleDropIns(t *testing.T) {
	bin := filepath.Join(os.Getenv("SWIFT_CONTAINERD_BIN"), "containerd")
	cases := []struct {
		file, version string
		wants         []string
	}{
		{"swift-v3.toml", "3", []string{
			"[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.swift]",
			"runtime_type = 'io.containerd.swift.v2'", "pod_annotations = ['swift.io/*']",
			"SwiftConfig = '/etc/swift/config.toml'"}},
		{"swift-v2.toml", "2", []string{
			"[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.swift]",
			"runtime_type = 'io.containerd.swift.v2'", "pod_annotations = ['swift.io/*']",
			"SwiftConfig = '/etc/swift/config.toml'"}},
	}
	if daemon.Major == 1 {
		cases = []struct {
			file, version string
			wants         []string
		}{{"swift-v2.toml", "2", []string{
			`[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.swift]`,
			`runtime_type = "io.containerd.swift.v2"`, `pod_annotations = ["swift.io/*"]`,
			`SwiftConfig = "/etc/swift/config.toml"`}}}
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			dir := t.TempDir()
			dropin := filepath.Join(repoRoot(t), "examples", "containerd", c.file)
			root := filepath.Join(dir, "config.toml")
			body := "version = " + c.version + "\nroot = \"" + dir + "/root\"\nstate = \"" + dir + "/state\"\nimports = [\"" + dropin + "\"]\n"
			if err := os.WriteFile(root, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(bin, "--config", root, "config", "dump").CombinedOutput()
			if err != nil {
				t.Fatalf("containerd config dump: %v\n%s", err, out)
			}
			for _, want := range c.wants {
				if !strings.Contains(string(out), want) {
					t.Errorf("merged config lacks %q", want)
				}
			}
			if t.Failed() {
				t.Logf("merged config:\n%s", out)
			}
		})
	}
}
