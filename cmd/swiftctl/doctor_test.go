package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// doctor on a fake node: the sysfs root given by flag, text and JSON.
func TestDoctorCommand(t *testing.T) {
	dir := t.TempDir()
	tree := rxe0Tree(t, dir)
	if err := os.MkdirAll(filepath.Join(tree.SysRoot, "sys/class/infiniband"), 0o755); err != nil {
		t.Fatal(err)
	}
	base := []string{"--config", filepath.Join(dir, "absent.toml"), "--sys-root", tree.SysRoot, "--dev-root", tree.DevRoot,
		"--containerd", filepath.Join(dir, "no-containerd")}
	doctorCmd := func(args ...string) (out string, failed bool, err error) {
		out, _, err = swiftctl(t, append([]string{"doctor"}, args...)...)
		var cf *checkFailed
		if errors.As(err, &cf) {
			return out, true, nil
		}
		return out, false, err
	}
	out, failed, err := doctorCmd(append(base, "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var rs []struct{ Check, Status, Detail, Fix string }
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	st := map[string]string{}
	for _, r := range rs {
		st[r.Check] = r.Status
	}
	for check, want := range map[string]string{"rdma.kernel": "OK", "rdma.device/rxe0": "OK", "rdma.provider/rxe0": "OK", "rdma.cm": "OK",
		"containerd": "FAIL", "node.config": "OK", "verbs.cache": "WARN"} {
		if st[check] != want {
			t.Errorf("%s = %q, want %s (%s)", check, st[check], want, out)
		}
	}
	if !failed {
		t.Error("a FAIL (containerd missing) did not make doctor fail")
	}
	if out, _, err := doctorCmd(base...); err != nil || !strings.Contains(out, "FAIL  containerd") {
		t.Errorf("text output (%v):\n%s", err, out)
	}
	if _, _, err := doctorCmd("extra"); err == nil {
		t.Error("doctor accepted an argument")
	}
}
