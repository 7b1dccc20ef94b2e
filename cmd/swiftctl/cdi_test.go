package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCDIGenerate(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test makes device nodes with mknod (rdmatest.Make) and needs root (euid 0)")
	}
	dir := t.TempDir()
	tree, cfg := rxe0Node(t, dir)
	out, _, err := swiftctl(t, "cdi", "generate", "--config", cfg, "--stdout")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`cdiVersion: 0.5.0
containerEdits:
  deviceNodes:
  - hostPath: %[1]s/infiniband/rdma_cm
    major: 10
    minor: 58
    path: /dev/infiniband/rdma_cm
    permissions: rw
    type: c
devices:
- containerEdits:
    deviceNodes:
    - hostPath: %[1]s/infiniband/uverbs0
      major: 231
      minor: 192
      path: /dev/infiniband/uverbs0
      permissions: rw
      type: c
  name: rxe0
kind: swift.io/rdma
`, tree.DevRoot)
	if out != want {
		t.Fatalf("--stdout printed\n%s\nwant\n%s", out, want)
	}
	cdiDir := filepath.Join(dir, "etc-cdi")
	if out, _, err = swiftctl(t, "cdi", "generate", "--config", cfg, "--dir", cdiDir); err != nil {
		t.Fatal(err)
	}
	if got := out; got != "wrote "+cdiDir+"/swift.io-rdma.yaml: swift.io/rdma=rxe0\n" {
		t.Errorf("printed %q", got)
	}
	if _, err := os.Stat(filepath.Join(cdiDir, "swift.io-rdma.yaml")); err != nil {
		t.Error(err)
	}
	for _, args := range [][]string{nil, {"make"}, {"generate", "extra"}, {"generate", "--bogus"}} {
		if _, _, err := swiftctl(t, append([]string{"cdi"}, args...)...); err == nil {
			t.Errorf("cdi %q: want an error", args)
		}
	}
	// a node without devices: a clear error, nothing written
	empty := filepath.Join(dir, "empty.toml")
	if err := os.WriteFile(empty, []byte(fmt.Sprintf("[rdma]\nsys_root = %q\n", filepath.Join(dir, "nothing"))), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = swiftctl(t, "cdi", "generate", "--config", empty, "--dir", filepath.Join(dir, "none"))
	if err == nil || !strings.Contains(err.Error(), "no RDMA devices") {
		t.Errorf("on a node without devices: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "none")); !os.IsNotExist(err) {
		t.Errorf("a spec dir was made on a node without devices: %v", err)
	}
}
