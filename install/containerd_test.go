//go:build e2e

package install

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// defaultContainerdDir is where `make deps` builds containerd; the
// environment variable SWIFT_CONTAINERD_BIN names another directory.
const defaultContainerdDir = "/var/cache/swift-build/containerd-2.4.2"

func containerdBin(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SWIFT_CONTAINERD_BIN")
	if dir == "" {
		dir = defaultContainerdDir
	}
	bin := filepath.Join(dir, "containerd")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("this test runs a real containerd 2.x: %v; run `make deps` (builds it into %s) or set SWIFT_CONTAINERD_BIN to the directory holding containerd",
			err, defaultContainerdDir)
	}
	return bin
}

func runContainerd(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// A real containerd 2.4 reads what install writes, for every config version,
// and keeps the root config's own CRI settings next to the swift runtime.
func TestContainerdConfigDump(t *testing.T) {
	bin := containerdBin(t)
	defaults := runContainerd(t, bin, "config", "default")
	for _, tc := range []struct {
		name string
		root func(dir string) string
		// keys that must survive from the root config, with their values
		keep map[string]any
		// options of the swift entry copied from the runc entry
		swift map[string]any
	}{
		{"v4 from containerd config default", func(dir string) string {
			return strings.ReplaceAll(string(defaults), "/etc/containerd/conf.d/*.toml", dir+"/conf.d/*.toml")
		}, map[string]any{"plugins/io.containerd.cri.v1.runtime/containerd/runtimes/runc/runtime_type": "io.containerd.runc.v2"}, nil},
		{"v4 default without imports", func(dir string) string {
			return strings.Replace(string(defaults), "imports = ['/etc/containerd/conf.d/*.toml']\n", "", 1)
		}, nil, nil},
		{"v3 with a runc entry", func(string) string {
			return "version = 3\n\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n" +
				"[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n"
		}, map[string]any{"plugins/io.containerd.cri.v1.runtime/containerd/runtimes/runc/options/SystemdCgroup": true},
			map[string]any{"SystemdCgroup": true}},
		{"v2 with a CRI section", func(string) string {
			return "version = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"example.com/pause:9\"\n" +
				"[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n" +
				"[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n"
		}, map[string]any{
			"plugins/io.containerd.cri.v1.images/pinned_images/sandbox":                           "example.com/pause:9",
			"plugins/io.containerd.cri.v1.runtime/containerd/runtimes/runc/options/SystemdCgroup": true,
		}, map[string]any{"SystemdCgroup": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			root := filepath.Join(dir, "config.toml")
			if err := os.WriteFile(root, []byte(tc.root(dir)), 0o644); err != nil {
				t.Fatal(err)
			}
			o := Options{ConfigPath: root, SwiftConfig: filepath.Join(dir, "swift.toml")}
			plan, err := PlanInstall(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := plan.Apply(); err != nil {
				t.Fatal(err)
			}
			out := runContainerd(t, bin, "--config", root, "config", "dump")
			tree, err := parseTOML("config dump", out)
			if err != nil {
				t.Fatal(err)
			}
			rt := "plugins/" + PluginV3 + "/containerd/runtimes/swift/"
			want := map[string]any{
				rt + "runtime_type":          RuntimeType,
				rt + "pod_annotations":       []any{"swift.io/*"},
				rt + "container_annotations": []any{"swift.io/*"},
				rt + "options/SwiftConfig":   o.SwiftConfig,
				rt + "options/BinaryName":    DefaultBinaryName,
			}
			for k, v := range tc.keep {
				want[k] = v
			}
			for k, v := range tc.swift {
				want[rt+"options/"+k] = v
			}
			for path, v := range want {
				got, ok := lookup(tree, splitPath(path)...)
				if !ok || !equalAny(got, v) {
					t.Errorf("containerd config dump: %s = %#v, want %#v", path, got, v)
				}
			}
			if t.Failed() {
				t.Logf("drop-in %s:\n%s\nconfig dump:\n%s", plan.DropIn, plan.Changes[0].New, out)
			}
			// and after uninstall the runtime is gone again
			un, err := PlanUninstall(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := un.Apply(); err != nil {
				t.Fatal(err)
			}
			tree, err = parseTOML("config dump", runContainerd(t, bin, "--config", root, "config", "dump"))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := lookup(tree, splitPath(rt+"runtime_type")...); ok {
				t.Error("the swift runtime is still in containerd's config after uninstall")
			}
		})
	}
}
