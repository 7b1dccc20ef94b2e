package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDocumentedKeys(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"none", "no figures here, `fork` alone, fork.ratio without quotes", nil},
		{"each once, sorted", "`shim.ratio` then `fork.ratio` and `fork.ratio` again, `data.lat_ratio`.",
			[]string{"data.lat_ratio", "fork.ratio", "shim.ratio"}},
		{"nested", "`fork.x.own_us`, `verbs.speedup_ceiling`", []string{"fork.x.own_us", "verbs.speedup_ceiling"}},
		{"other prefixes ignored", "`swift.io/rdma` `rdma.max` `shim.runs`", []string{"shim.runs"}},
		{"kubernetes figures, not the k8s.io namespace", "`k8s.io` `k8s.pod_start_ratio`", []string{"k8s.pod_start_ratio"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DocumentedKeys(tc.text); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("DocumentedKeys = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMissing(t *testing.T) {
	got := Missing([]string{"fork.ratio", "fork.warm_us", "shim.ratio", "data.ratio"},
		map[string]any{"fork.ratio": 1.9, "shim.ratio": "1.0", "data.ratio": nil})
	want := []string{"fork.warm_us", "shim.ratio", "data.ratio"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Missing = %v, want %v", got, want)
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "b.md")
	a := filepath.Join(dir, "a.json")
	b := filepath.Join(dir, "b.json")
	os.WriteFile(doc, []byte("| `fork.ratio` | x |\n| `shim.ratio` | y |\n"), 0o644)
	os.WriteFile(a, []byte(`{"fork.ratio": 1.5}`), 0o644)
	os.WriteFile(b, []byte(`{"shim.ratio": 1.01}`), 0o644)
	var out strings.Builder
	if err := run([]string{"-doc", doc, a, b}, &out); err != nil {
		t.Fatalf("both files together hold both keys: %v", err)
	}
	if err := run([]string{"-doc", doc, a}, &out); err == nil || !strings.Contains(err.Error(), "shim.ratio") {
		t.Errorf("one file alone: err = %v, want one naming shim.ratio", err)
	}
	if err := run([]string{"-doc", doc}, &out); err == nil {
		t.Error("no JSON file: want a usage error")
	}
}
