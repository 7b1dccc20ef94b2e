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

	"sigs.k8s.io/yaml"
	"tags.cncf.io/container-device-interface/pkg/parser"

	"github.com/swift-rdma/swift-containerd/cdispec"
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

// TestExampleManifests: every Kubernetes example parses, names its kind,
// runs under the RuntimeClass "swift" when it is a pod, and a CDI device
// it names is one `swiftctl cdi generate` describes (kind swift.io/rdma).
func TestExampleManifests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "examples", "*", "*.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("examples/*/*.yaml: %q, %v", files, err)
	}
	cdiNames := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range strings.Split(string(b), "\n---\n") {
			var m struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
				Spec struct {
					RuntimeClassName string `json:"runtimeClassName"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil { // the other fields are Kubernetes'
				t.Errorf("%s document %d: %v", f, i, err)
				continue
			}
			if m.APIVersion == "" || m.Kind == "" {
				t.Errorf("%s document %d: no apiVersion or kind", f, i)
			}
			if m.Kind == "Pod" && m.Spec.RuntimeClassName != "swift" {
				t.Errorf("%s: pod with runtimeClassName %q, want swift", f, m.Spec.RuntimeClassName)
			}
			for k, v := range m.Metadata.Annotations {
				if !strings.HasPrefix(k, "cdi.k8s.io/") {
					continue
				}
				vendor, class, _, err := parser.ParseQualifiedName(v)
				if err != nil || vendor+"/"+class != cdispec.Kind {
					t.Errorf("%s: %s=%q is not a %s device (%v)", f, k, v, cdispec.Kind, err)
				}
				cdiNames++
			}
		}
	}
	if cdiNames == 0 {
		t.Error("no example names a CDI device")
	}
}
