package install

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

var update = flag.Bool("update", false, "rewrite examples/containerd from the template")

// The examples document exactly what install writes for the default flags.
func TestExamplesAreGenerated(t *testing.T) {
	for _, tc := range []struct {
		version int
		file    string
	}{
		{3, "swift-v3.toml"},
		{2, "swift-v2.toml"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			want, err := Render(DefaultParams(tc.version))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("..", "examples", "containerd", tc.file)
			if *update {
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s is not what install generates (regenerate: go test ./install -run TestExamplesAreGenerated -update):\n%s",
					path, UnifiedDiff(path, got, want))
			}
		})
	}
}

func TestRender(t *testing.T) {
	cri := map[string]any{"sandbox_image": "pause:3.9", "containerd": map[string]any{
		"runtimes": map[string]any{"runc": map[string]any{"runtime_type": "io.containerd.runc.v2",
			"options": map[string]any{"SystemdCgroup": true}}}}}
	for _, tc := range []struct {
		name   string
		p      Params
		plugin string
		err    error
	}{
		{"v2", DefaultParams(2), PluginV2, nil},
		{"v3", DefaultParams(3), PluginV3, nil},
		{"v4", DefaultParams(4), PluginV3, nil},
		{"v2 with the root's CRI section", func() Params { p := DefaultParams(2); p.CRISection = cri; return p }(), PluginV2, nil},
		{"other name and options", Params{Version: 3, Name: "rdma-fast", BinaryName: "/opt/runc", SystemdCgroup: true,
			SwiftConfig: "/etc/swift/a \"b\".toml", Root: "/c.toml", Dir: "/d", Glob: "/d/*.toml"}, PluginV3, nil},
		{"CNI config directory", func() Params {
			p := DefaultParams(3)
			p.Name = "swift-podnet"
			p.CNIConfDir = "/etc/cni/podnet.d"
			return p
		}(), PluginV3, nil},
		{"CNI config directory on v2", func() Params { p := DefaultParams(2); p.CNIConfDir = "/etc/cni/podnet.d"; return p }(), PluginV2, nil},
		{"shim path", func() Params { p := DefaultParams(3); p.Shim = "/opt/swift/bin/containerd-shim-swift-v2"; return p }(), PluginV3, nil},
		{"shim path on v2", func() Params { p := DefaultParams(2); p.Shim = "/opt/swift/bin/containerd-shim-swift-v2"; return p }(), PluginV2, nil},
		{"v1", DefaultParams(1), "", errdefs.ErrFailedPrecondition},
		{"v5", DefaultParams(5), "", errdefs.ErrFailedPrecondition},
		{"bad name", func() Params { p := DefaultParams(3); p.Name = "a.b"; return p }(), "", errdefs.ErrInvalidArgument},
		{"CRI copy on v3", func() Params { p := DefaultParams(3); p.CRISection = cri; return p }(), "", errdefs.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Render(tc.p)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tree, err := parseTOML("out", out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if v := tree["version"]; v != int64(tc.p.Version) {
				t.Errorf("version = %v, want %d", v, tc.p.Version)
			}
			rt := "plugins/" + tc.plugin + "/containerd/runtimes/" + tc.p.Name
			for path, want := range map[string]any{
				rt + "/runtime_type":          RuntimeType,
				rt + "/pod_annotations":       []any{"swift.io/*"},
				rt + "/container_annotations": []any{"swift.io/*"},
				rt + "/options/BinaryName":    tc.p.BinaryName,
				rt + "/options/SystemdCgroup": tc.p.SystemdCgroup,
				rt + "/options/SwiftConfig":   tc.p.SwiftConfig,
			} {
				got, ok := lookup(tree, splitPath(path)...)
				if !ok || !equalAny(got, want) {
					t.Errorf("%s = %#v, want %#v", path, got, want)
				}
			}
			got, ok := lookup(tree, splitPath(rt+"/cni_conf_dir")...)
			if ok != (tc.p.CNIConfDir != "") || ok && got != tc.p.CNIConfDir {
				t.Errorf("cni_conf_dir = %#v (set: %v), want %q", got, ok, tc.p.CNIConfDir)
			}
			got, ok = lookup(tree, splitPath(rt+"/runtime_path")...)
			if ok != (tc.p.Shim != "") || ok && got != tc.p.Shim {
				t.Errorf("runtime_path = %#v (set: %v), want %q", got, ok, tc.p.Shim)
			}
			if tc.p.CRISection != nil {
				for path, want := range map[string]any{
					"plugins/" + PluginV2 + "/sandbox_image":                                  "pause:3.9",
					"plugins/" + PluginV2 + "/containerd/runtimes/runc/options/SystemdCgroup": true,
				} {
					if got, ok := lookup(tree, splitPath(path)...); !ok || got != want {
						t.Errorf("copied %s = %#v, want %#v", path, got, want)
					}
				}
			}
		})
	}
}

func TestValidateRuntimeName(t *testing.T) {
	for name, ok := range map[string]bool{
		"swift": true, "swift-rdma": true, "a": true, "s2": true, "0x": true,
		"": false, "-a": false, "a-": false, "Swift": false, "a.b": false, "a_b": false, "a/b": false,
		"a b": false, string(bytes.Repeat([]byte("a"), 64)): false, string(bytes.Repeat([]byte("a"), 63)): true,
	} {
		err := ValidateRuntimeName(name)
		if ok != (err == nil) {
			t.Errorf("ValidateRuntimeName(%q) = %v, want ok=%v", name, err, ok)
		}
		if err != nil && !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("ValidateRuntimeName(%q) = %v, not InvalidArgument", name, err)
		}
	}
}

func splitPath(p string) []string { return strings.Split(p, "/") }

func equalAny(a, b any) bool {
	as, ok1 := a.([]any)
	bs, ok2 := b.([]any)
	if ok1 && ok2 {
		if len(as) != len(bs) {
			return false
		}
		for i := range as {
			if as[i] != bs[i] {
				return false
			}
		}
		return true
	}
	return a == b
}
