package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/swift-rdma/swift-containerd/verbs"
)

// cacheNodeFixture writes a fake sysfs tree with rxe0 and a node config
// pointing at it and at a fresh state dir.
func cacheNodeFixture(t *testing.T) (cfgPath, sysRoot, stateDir string) {
	t.Helper()
	dir := t.TempDir()
	sysRoot, stateDir = filepath.Join(dir, "root"), filepath.Join(dir, "state")
	for rel, val := range map[string]string{
		"sys/class/infiniband_verbs/uverbs0/ibdev": "rxe0",
		"sys/class/infiniband_verbs/uverbs0/dev":   "231:192",
		"sys/class/infiniband/rxe0/node_guid":      "0200:00ff:fe00:0001",
	} {
		writeFixture(t, filepath.Join(sysRoot, rel), val+"\n")
	}
	cfgPath = filepath.Join(dir, "config.toml")
	writeFixture(t, cfgPath, "state_dir = \""+stateDir+"\"\n[rdma]\nsys_root = \""+sysRoot+"\"\n")
	return cfgPath, sysRoot, stateDir
}

func writeFixture(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeTestCache stores a cache for the node as Collect sees it now.
func writeTestCache(t *testing.T, sysRoot, stateDir string) string {
	t.Helper()
	fp, err := verbs.Collect(verbs.Sources{SysRoot: sysRoot})
	if err != nil {
		t.Fatal(err)
	}
	snap := verbs.Snapshot{Kernel: fp.Kernel, RDMACore: fp.RDMACore, Drivers: []string{"rxe"},
		Devices: []verbs.SnapshotDevice{{Name: "rxe0", Uverbs: "uverbs0", Major: 231, Minor: 192, NodeGUID: fp.Devices[0].NodeGUID}}}
	dir, err := verbs.Write(stateDir, verbs.Contents{
		Manifest: verbs.Manifest{Fingerprint: fp, Providers: []verbs.Provider{{Device: "rxe0", Name: "rxe"}},
			StockDrivers: []string{"mlx5", "rxe"}, Env: map[string]string{},
			Profile: verbs.ProfileSummary{Runs: 3, Device: "rxe0", StockUS: map[string]float64{"critical": 200000, "ibv_get_device_list": 180000},
				CachedUS: map[string]float64{"critical": 50000, "ibv_get_device_list": 30000}, Speedup: 4,
				TrimmedUS:   map[string]float64{"critical": 45000, "ibv_get_device_list": 27000},
				DefaultMode: "trimmed", DefaultWhy: "measured at build: cached 50.00 ms, trimmed 45.00 ms: trimmed is faster"}},
		Snapshot: snap,
		Preload:  append([]byte("\x7fELF"), make([]byte, 60)...),
		Drivers:  []verbs.DriverFile{{Name: "rxe.driver", Drivers: []string{"rxe"}, Data: []byte("driver rxe\n")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := verbs.SetCurrent(stateDir, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCacheCommands(t *testing.T) {
	cfg, sysRoot, stateDir := cacheNodeFixture(t)
	run := func(args ...string) (string, error) {
		out, _, err := swiftctl(t, append(append([]string{"cache"}, args...), "--config", cfg)...)
		return out, err
	}

	out, err := run("check")
	if !errors.Is(err, errCacheNotValid) || !strings.HasPrefix(out, "missing: no verbs cache built") {
		t.Fatalf("check without a cache: %v, %q", err, out)
	}
	if _, err := run("show"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("show without a cache: %v", err)
	}

	dir := writeTestCache(t, sysRoot, stateDir)
	out, err = run("check")
	if err != nil || out != "valid: "+dir+"\n" {
		t.Fatalf("check: %v, %q", err, out)
	}
	out, err = run("check", "--json")
	var st struct {
		State   string
		Reasons []string
		Dir     string
	}
	if err != nil || json.Unmarshal([]byte(out), &st) != nil || st.State != "valid" || st.Dir != dir {
		t.Fatalf("check --json: %v, %q", err, out)
	}
	out, err = run("show")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"state: valid", "device: rxe0 uverbs0 231:192", "provider=rxe", "libibverbs.d: rxe.driver (of 2 providers)",
		"env: (none)", "ibv_get_device_list", "180.000", "30.000", "27.000", "speedup (critical path): 4.00x",
		"default mode: trimmed (measured at build: cached 50.00 ms, trimmed 45.00 ms: trimmed is faster)"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	out, err = run("show", "--json")
	var m verbs.Manifest
	if err != nil || json.Unmarshal([]byte(out), &m) != nil || m.Fingerprint.Devices[0].Name != "rxe0" {
		t.Fatalf("show --json: %v, %q", err, out)
	}

	// a new device makes it stale, with the reason
	writeFixture(t, filepath.Join(sysRoot, "sys/class/infiniband_verbs/uverbs1/ibdev"), "rxe1\n")
	writeFixture(t, filepath.Join(sysRoot, "sys/class/infiniband_verbs/uverbs1/dev"), "231:193\n")
	out, err = run("check")
	if !errors.Is(err, errCacheNotValid) || out != "stale: device rxe1 (uverbs1) added\n" {
		t.Fatalf("check after adding rxe1: %v, %q", err, out)
	}
	out, err = run("show")
	if err != nil || !strings.Contains(out, "state: stale (device rxe1 (uverbs1) added)") {
		t.Fatalf("show of a stale cache: %v\n%s", err, out)
	}
	// corrupt: invalid, never a crash
	if err := os.Truncate(filepath.Join(dir, verbs.SnapshotFile), 10); err != nil {
		t.Fatal(err)
	}
	out, err = run("check")
	if !errors.Is(err, errCacheNotValid) || !strings.HasPrefix(out, "invalid: ") {
		t.Fatalf("check of a truncated cache: %v, %q", err, out)
	}
}

func TestCacheCommandErrors(t *testing.T) {
	cfg, _, _ := cacheNodeFixture(t)
	for _, args := range [][]string{nil, {"frobnicate"}, {"build", "extra-arg"}} {
		if _, _, err := swiftctl(t, append([]string{"cache"}, args...)...); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("cache %q: %v, want InvalidArgument", args, err)
		}
	}
	// build: the binaries are looked for where --lib-dir says
	_, _, err := swiftctl(t, "cache", "build", "--config", cfg, "--lib-dir", t.TempDir())
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "swift-profile") {
		t.Fatalf("build without swift-profile: %v", err)
	}
	// and the node must have a device the profiler can list
	lib := t.TempDir()
	writeFixture(t, filepath.Join(lib, "swift-profile"), "#!/bin/sh\necho 'run=0 exit=1 process_us=1.0 error=ibv_get_device_list errno=19'\nexit 1\n")
	os.Chmod(filepath.Join(lib, "swift-profile"), 0o755)
	writeFixture(t, filepath.Join(lib, "libswiftverbs.so"), "\x7fELF....")
	conf := t.TempDir()
	writeFixture(t, filepath.Join(conf, "rxe.driver"), "driver rxe\n")
	_, _, err = swiftctl(t, "cache", "build", "--config", cfg, "--lib-dir", lib, "--config-dir", conf, "--quiet")
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "errno 19") {
		t.Fatalf("build with a failing profiler: %v", err)
	}
	if err := writeCacheChart(filepath.Join(t.TempDir(), "c.svg"), verbs.Manifest{}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("chart without cached figures: %v", err)
	}
}
