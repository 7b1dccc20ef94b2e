//go:build e2e

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/swift-rdma/swift-containerd/config"
)

func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TestExampleNodeConfig: the example documents the defaults exactly.
func TestExampleNodeConfig(t *testing.T) {
	path := filepath.Join(repoRoot(t), "examples", "config.toml")
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d := config.Default()
	if len(c.RDMA.Env) == 0 {
		c.RDMA.Env = d.RDMA.Env // an empty [rdma.env] table decodes as an empty map
	}
	if !reflect.DeepEqual(c, d) {
		t.Errorf("examples/config.toml = %+v, defaults are %+v", c, d)
	}
}

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
