package doctor

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/keys"
	"github.com/swift-rdma/swift-containerd/rdma/rdmatest"
)

// fakeNode is a node with no files and hooks that say everything is fine.
func fakeNode(t *testing.T) Node {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"sysroot", "dev", "proc", "boot", "cgroup"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	on := true
	// a private state dir: no verbs cache the machine may hold leaks in
	write(t, filepath.Join(dir, "swift.toml"), fmt.Sprintf("state_dir = %q\n", filepath.Join(dir, "state")))
	return Node{
		ConfigPath:        filepath.Join(dir, "swift.toml"),
		ContainerdPIDFile: filepath.Join(dir, "containerd.pid"),
		ContainerdConfig:  filepath.Join(dir, "containerd.toml"),
		SysRoot:           filepath.Join(dir, "sysroot"),
		DevRoot:           filepath.Join(dir, "dev"),
		ProcRoot:          filepath.Join(dir, "proc"),
		BootRoot:          filepath.Join(dir, "boot"),
		CgroupRoot:        filepath.Join(dir, "cgroup"),
		KernelRelease:     "6.1.0-test",
		Containerd:        "containerd",
		Runc:              "runc",
		RDMASystem:        func() (SystemInfo, error) { return SystemInfo{NetnsMode: "shared", CopyOnFork: &on}, nil },
		Version: func(_ context.Context, bin string) (string, error) {
			if bin == "runc" {
				return "runc version 1.1.5+ds1\ncommit: x\n", nil
			}
			return "containerd github.com/containerd/containerd/v2 2.4.2+unknown\n", nil
		},
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeGzip(t *testing.T, path, content string) {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(content))
	zw.Close()
	write(t, path, b.String())
}

// byCheck indexes results; it fails the test on a duplicate check name.
func byCheck(t *testing.T, rs []Result) map[string]Result {
	t.Helper()
	m := map[string]Result{}
	for _, r := range rs {
		if _, dup := m[r.Check]; dup {
			t.Errorf("check %s reported twice", r.Check)
		}
		if r.Status != OK && r.Fix == "" {
			t.Errorf("%s is %s without a fix", r.Check, r.Status)
		}
		if strings.Contains(r.Detail, "\n") || strings.Contains(r.Fix, "\n") {
			t.Errorf("%s: detail or fix spans lines: %q %q", r.Check, r.Detail, r.Fix)
		}
		m[r.Check] = r
	}
	return m
}

// want is an expected status and a fragment of the detail.
type want struct {
	status Status
	detail string
}

func expect(t *testing.T, rs []Result, wants map[string]want) {
	t.Helper()
	got := byCheck(t, rs)
	for check, w := range wants {
		r, ok := got[check]
		if !ok {
			t.Errorf("no %s check in %+v", check, rs)
			continue
		}
		if r.Status != w.status || !strings.Contains(r.Detail, w.detail) {
			t.Errorf("%s = %s %q, want %s containing %q", check, r.Status, r.Detail, w.status, w.detail)
		}
	}
}

func TestKernel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, n Node)
		want  want
		fix   string
	}{
		{"class present", func(t *testing.T, n Node) {
			os.MkdirAll(filepath.Join(n.SysRoot, "sys/class/infiniband"), 0o755)
		}, want{OK, "RDMA core loaded"}, ""},
		{"built without CONFIG_INFINIBAND", func(t *testing.T, n Node) {
			writeGzip(t, filepath.Join(n.ProcRoot, "config.gz"), "CONFIG_NET=y\n# CONFIG_INFINIBAND is not set\n")
		}, want{Fail, "built without CONFIG_INFINIBAND (" + "PROC/config.gz), so there are no RDMA devices"}, "CONFIG_INFINIBAND=m"},
		{"module not loaded (boot config)", func(t *testing.T, n Node) {
			write(t, filepath.Join(n.BootRoot, "config-6.1.0-test"), "CONFIG_INFINIBAND=m\nCONFIG_INFINIBAND_USER_ACCESS=m\n")
		}, want{Fail, "CONFIG_INFINIBAND=m but ib_core is not loaded"}, "modprobe ib_uverbs"},
		{"built in but no sysfs", func(t *testing.T, n Node) {
			writeGzip(t, filepath.Join(n.ProcRoot, "config.gz"), "CONFIG_INFINIBAND=y\n")
		}, want{Fail, "is sysfs mounted"}, "rdma.sys_root"},
		{"kernel config unreadable", func(t *testing.T, n Node) {
			write(t, filepath.Join(n.ProcRoot, "config.gz"), "not gzip")
		}, want{Fail, "no RDMA devices or kernel without CONFIG_INFINIBAND"}, "modprobe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := fakeNode(t)
			tc.setup(t, n)
			r := checkKernel(n, readKernelConfig(n.ProcRoot, n.BootRoot, n.KernelRelease))
			tc.want.detail = strings.ReplaceAll(tc.want.detail, "PROC", n.ProcRoot)
			expect(t, []Result{r}, map[string]want{"rdma.kernel": tc.want})
			if !strings.Contains(r.Fix, tc.fix) {
				t.Errorf("fix %q lacks %q", r.Fix, tc.fix)
			}
		})
	}
}

func TestDevices(t *testing.T) {
	rxe := rdmatest.Device{Name: "rxe0", Uverbs: "uverbs0", Major: rdmatest.UverbsMajor, Minor: 192}
	mlx := rdmatest.Device{Name: "mlx5_0", Uverbs: "uverbs1", Major: rdmatest.UverbsMajor, Minor: 193}
	for _, tc := range []struct {
		name  string
		devs  []rdmatest.Device
		cm    bool
		extra func(t *testing.T, n Node)
		wants map[string]want
	}{
		{"rxe and mlx5 with rdma_cm", []rdmatest.Device{rxe, mlx}, true, nil, map[string]want{
			"rdma.devices":         {OK, "2 with uverbs nodes: mlx5_0, rxe0"},
			"rdma.device/rxe0":     {OK, "uverbs0 is 231:192 as sysfs says"},
			"rdma.device/mlx5_0":   {OK, "uverbs1 is 231:193"},
			"rdma.provider/rxe0":   {OK, "rxe (name prefix): fork sharing by relay doorbell"},
			"rdma.provider/mlx5_0": {Warn, "mlx5 (name prefix): fork sharing by shared buffers (untested on hardware)"},
			"rdma.cm":              {OK, "rdma_cm is 10:58"},
			"rdma.netns":           {OK, "shared"},
			"rdma.copy_on_fork":    {OK, "on"},
		}},
		{"driver link wins over the name", []rdmatest.Device{{Name: "roce0", Uverbs: "uverbs0", Major: 231, Minor: 192}}, false,
			func(t *testing.T, n Node) {
				drv := filepath.Join(n.SysRoot, "sys/bus/pci/drivers/mlx5_core")
				os.MkdirAll(drv, 0o755)
				if err := os.Symlink(filepath.Join(n.SysRoot, "sys/devices/pci0000:00/0000:00:03.0"), filepath.Join(n.SysRoot, "sys/class/infiniband/roce0/device")); err != nil {
					t.Fatal(err)
				}
				os.MkdirAll(filepath.Join(n.SysRoot, "sys/devices/pci0000:00/0000:00:03.0"), 0o755)
				if err := os.Symlink(drv, filepath.Join(n.SysRoot, "sys/devices/pci0000:00/0000:00:03.0/driver")); err != nil {
					t.Fatal(err)
				}
			}, map[string]want{
				"rdma.provider/roce0": {Warn, "mlx5_core (device/driver): fork sharing by shared buffers"},
				"rdma.cm":             {Warn, "no rdma_cm device"},
			}},
		{"siw and an unknown provider", []rdmatest.Device{{Name: "siw0", Uverbs: "uverbs0", Major: 231, Minor: 192},
			{Name: "bnxt_re0", Uverbs: "uverbs1", Major: 231, Minor: 193}}, true, nil, map[string]want{
			"rdma.provider/siw0":     {OK, "siw (name prefix): fork sharing by relay doorbell"},
			"rdma.provider/bnxt_re0": {Warn, "bnxt_re (name prefix): fork sharing by none (functions connect QPs of their own)"},
		}},
		{"node number differs from sysfs", []rdmatest.Device{{Name: "rxe0", Uverbs: "uverbs0", Major: 231, Minor: 192, NodeMajor: 231, NodeMinor: 200}}, true, nil,
			map[string]want{
				"rdma.devices": {Fail, "is 231:200 but sysfs says 231:192"},
				"rdma.cm":      {Warn, "not checked"},
			}},
		{"no devices", nil, false, nil, map[string]want{
			"rdma.devices": {Fail, "no RDMA devices"},
			"rdma.cm":      {Warn, "no rdma_cm"},
		}},
		{"a device without uverbs", []rdmatest.Device{rxe}, true, func(t *testing.T, n Node) {
			os.MkdirAll(filepath.Join(n.SysRoot, "sys/class/infiniband/mlx5_1"), 0o755)
		}, map[string]want{
			"rdma.devices":       {Warn, "1 with uverbs nodes (rxe0), 1 without (mlx5_1)"},
			"rdma.device/mlx5_1": {Fail, "ib_uverbs not loaded"},
			"rdma.device/rxe0":   {OK, ""},
		}},
		{"only devices without uverbs", nil, false, func(t *testing.T, n Node) {
			os.MkdirAll(filepath.Join(n.SysRoot, "sys/class/infiniband/mlx5_1"), 0o755)
		}, map[string]want{
			"rdma.devices": {Fail, "0 with uverbs nodes"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := fakeNode(t)
			tree, err := rdmatest.Make(filepath.Dir(n.SysRoot), tc.devs, tc.cm, 58)
			if err != nil {
				t.Fatal(err)
			}
			n.SysRoot, n.DevRoot = tree.SysRoot, tree.DevRoot
			os.MkdirAll(filepath.Join(n.SysRoot, "sys/class/infiniband"), 0o755)
			if tc.extra != nil {
				tc.extra(t, n)
			}
			expect(t, Run(context.Background(), n), tc.wants)
		})
	}
}

func TestNoRDMAKernel(t *testing.T) {
	n := fakeNode(t)
	writeGzip(t, filepath.Join(n.ProcRoot, "config.gz"), "# CONFIG_INFINIBAND is not set\n# CONFIG_CGROUP_RDMA is not set\n")
	n.RDMASystem = func() (SystemInfo, error) { t.Error("netlink queried without RDMA support"); return SystemInfo{}, nil }
	rs := Run(context.Background(), n)
	expect(t, rs, map[string]want{
		"rdma.kernel":       {Fail, "built without CONFIG_INFINIBAND"},
		"rdma.devices":      {Warn, "not checked: no RDMA kernel support"},
		"rdma.cm":           {Warn, "not checked"},
		"rdma.netns":        {Warn, "not checked"},
		"rdma.copy_on_fork": {Warn, "not checked"},
		"rdma.cgroup":       {Warn, "without CONFIG_CGROUP_RDMA"},
		"verbs.cache":       {Warn, "no verbs cache built on this node"},
	})
	if !Failed(rs) {
		t.Error("Failed() = false for a node without RDMA")
	}
}

func TestSystem(t *testing.T) {
	on, off := true, false
	for _, tc := range []struct {
		name  string
		info  SystemInfo
		err   error
		wants map[string]want
	}{
		{"shared, copy-on-fork", SystemInfo{"shared", &on}, nil, map[string]want{
			"rdma.netns": {OK, "shared"}, "rdma.copy_on_fork": {OK, "on"}}},
		{"exclusive, old kernel", SystemInfo{"exclusive", nil}, nil, map[string]want{
			"rdma.netns": {Warn, "exclusive"}, "rdma.copy_on_fork": {Warn, "not reported (kernel older than 5.13)"}}},
		{"copy-on-fork off, no netns mode", SystemInfo{"", &off}, nil, map[string]want{
			"rdma.netns": {Warn, "reports no RDMA netns mode"}, "rdma.copy_on_fork": {Warn, "copy-on-fork off"}}},
		{"netlink error", SystemInfo{}, errors.New("protocol not supported"), map[string]want{
			"rdma.netns": {Fail, "RDMA netlink query failed: protocol not supported"}, "rdma.copy_on_fork": {Fail, "protocol not supported"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := fakeNode(t)
			n.RDMASystem = func() (SystemInfo, error) { return tc.info, tc.err }
			expect(t, checkSystem(n, true), tc.wants)
		})
	}
}

func nlattr(typ uint16, val ...byte) []byte {
	b := make([]byte, 4, 8)
	binary.NativeEndian.PutUint16(b[0:], uint16(4+len(val)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, val...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func TestParseSystemAttrs(t *testing.T) {
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	for _, tc := range []struct {
		name    string
		in      []byte
		mode    string
		cow     string // "", "on", "off"
		wantErr bool
	}{
		{"both", cat(nlattr(66, 1), nlattr(93, 1)), "shared", "on", false},
		{"exclusive, off, other attrs between", cat(nlattr(1, 0, 0, 0, 0), nlattr(66, 0), nlattr(2, 'a', 'b', 'c', 0, 'x'), nlattr(93, 0)), "exclusive", "off", false},
		{"only netns", nlattr(66, 1), "shared", "", false},
		{"nested flag masked", nlattr(66|0x8000, 1), "shared", "", false},
		{"empty", nil, "", "", false},
		{"truncated header", []byte{8, 0}, "", "", true},
		{"length beyond the buffer", []byte{12, 0, 66, 0, 1, 0, 0, 0}, "", "", true},
		{"empty netns value", nlattr(66), "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, err := ParseSystemAttrs(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			cow := ""
			if info.CopyOnFork != nil {
				cow = map[bool]string{true: "on", false: "off"}[*info.CopyOnFork]
			}
			if info.NetnsMode != tc.mode || cow != tc.cow {
				t.Errorf("got %q %q, want %q %q", info.NetnsMode, cow, tc.mode, tc.cow)
			}
		})
	}
}

func TestCgroup(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  map[string]string
		kconf  string
		cfg    string
		want   want
		fixHas string
	}{
		{"v2 with rdma", map[string]string{"cgroup.controllers": "cpu memory rdma pids\n"}, "", "", want{OK, "cgroup v2"}, ""},
		{"v2 without rdma", map[string]string{"cgroup.controllers": "cpu memory pids\n"}, "", "", want{Warn, "rdma is not in"}, "CONFIG_CGROUP_RDMA"},
		{"v1 with the rdma hierarchy", map[string]string{"rdma/rdma.max": ""}, "", "", want{OK, "cgroup v1"}, ""},
		{"v1 without it", map[string]string{"memory/x": ""}, "", "", want{Warn, "no rdma hierarchy is mounted"}, "mount -t cgroup -o rdma"},
		{"kernel without the controller, limits configured", map[string]string{"memory/x": ""}, "# CONFIG_CGROUP_RDMA is not set\n",
			"[rdma]\nhca_handle = 4\n", want{Warn, "without CONFIG_CGROUP_RDMA; the configured limits (hca_handle=4, hca_object=0) are left out"}, "CONFIG_CGROUP_RDMA=y"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := fakeNode(t)
			for p, c := range tc.files {
				write(t, filepath.Join(n.CgroupRoot, p), c)
			}
			if tc.kconf != "" {
				writeGzip(t, filepath.Join(n.ProcRoot, "config.gz"), tc.kconf)
			}
			if tc.cfg != "" {
				write(t, n.ConfigPath, tc.cfg)
			}
			rs := Run(context.Background(), n)
			expect(t, rs, map[string]want{"rdma.cgroup": tc.want})
			if r := byCheck(t, rs)["rdma.cgroup"]; !strings.Contains(r.Fix, tc.fixHas) {
				t.Errorf("fix %q lacks %q", r.Fix, tc.fixHas)
			}
		})
	}
}

func TestNodeConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  *string
		want want
	}{
		{"absent", nil, want{OK, "absent, defaults apply"}},
		{"valid", ptr("[rdma]\ndefault = true\n"), want{OK, "valid (rdma.default=true, rdma.memlock=unlimited)"}},
		{"unknown key", ptr("[rdma]\nbogus = 1\n"), want{Fail, "line 2: rdma.bogus: unknown key (known here: default, memlock"}},
		{"bad value", ptr("[rdma]\nmemlock = \"1Ki\"\n"), want{Fail, `rdma.memlock: "1Ki" is below 64KiB`}},
		{"ambiguous size", ptr("[rdma]\nmemlock = \"1g\"\n"), want{Fail, `rdma.memlock: "1g": ambiguous size; write 1Gi (1073741824 bytes) or 1G (1000000000 bytes)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := fakeNode(t)
			if tc.cfg != nil {
				write(t, n.ConfigPath, *tc.cfg)
			} else if err := os.Remove(n.ConfigPath); err != nil {
				t.Fatal(err)
			}
			expect(t, Run(context.Background(), n), map[string]want{"node.config": tc.want})
		})
	}
}

func ptr(s string) *string { return &s }

func TestVersions(t *testing.T) {
	for _, tc := range []struct {
		name       string
		containerd string
		runc       string
		err        error
		wants      map[string]want
	}{
		{"2.4.2 and runc 1.1", "containerd github.com/containerd/containerd/v2 2.4.2+unknown\n", "runc version 1.1.5+ds1\ncommit: x\n", nil, map[string]want{
			"containerd": {OK, "containerd 2.4.2+unknown: supported (2.x"}, "runc": {OK, "runc 1.1.5+ds1: supported"}}},
		{"1.7 packaged, runc 1.2", "containerd containerd.io 1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da\n", "runc version 1.2.4\n", nil, map[string]want{
			"containerd": {OK, "1.7.27: supported (1.7"}, "runc": {OK, "1.2.4"}}},
		{"1.7 from source with v prefix", "containerd github.com/containerd/containerd v1.7.35 abc\n", "runc version 1.1.0\n", nil, map[string]want{
			"containerd": {OK, "v1.7.35: supported (1.7"}}},
		{"Debian 12's 1.6, old runc", "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+b1\n", "runc version 1.0.0-rc93\n", nil, map[string]want{
			"containerd": {Fail, "1.6.20~ds1: unsupported"}, "runc": {Fail, "1.0.0-rc93: too old"}}},
		{"newer than the matrix", "containerd github.com/containerd/containerd/v3 3.0.0\n", "runc version 2.0.0\n", nil, map[string]want{
			"containerd": {Warn, "newer than the support matrix"}, "runc": {OK, "2.0.0"}}},
		{"unparseable", "containerd dev\n", "runc\n", nil, map[string]want{
			"containerd": {Warn, "unrecognised version output"}, "runc": {Warn, "unrecognised"}}},
		{"missing", "", "", errors.New(`exec: "containerd": executable file not found in $PATH`), map[string]want{
			"containerd": {Fail, "executable file not found"}, "runc": {Fail, "cannot run runc --version"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := fakeNode(t)
			n.Version = func(_ context.Context, bin string) (string, error) {
				if bin == "runc" {
					return tc.runc, tc.err
				}
				return tc.containerd, tc.err
			}
			expect(t, Run(context.Background(), n), tc.wants)
		})
	}
}

func TestOutput(t *testing.T) {
	rs := []Result{
		{Check: "a", Status: OK, Detail: "fine"},
		{Check: "longer.check", Status: Fail, Detail: "broken", Fix: "mend it"},
		{Check: "c", Status: Warn, Detail: "meh", Fix: "maybe"},
	}
	var text bytes.Buffer
	if err := WriteText(&text, rs); err != nil {
		t.Fatal(err)
	}
	want := "OK    a             fine\n" +
		"FAIL  longer.check  broken\n" +
		"                    fix: mend it\n" +
		"WARN  c             meh\n" +
		"                    fix: maybe\n" +
		"1 OK, 1 WARN, 1 FAIL\n"
	if text.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", text.String(), want)
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, rs); err != nil {
		t.Fatal(err)
	}
	var back []map[string]string
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back) != 3 || back[1]["check"] != "longer.check" || back[1]["status"] != "FAIL" || back[1]["detail"] != "broken" ||
		back[1]["fix"] != "mend it" || back[0]["fix"] != "" || len(back[0]) != 4 {
		t.Errorf("json = %s", js.String())
	}
	js.Reset()
	WriteJSON(&js, nil)
	if strings.TrimSpace(js.String()) != "[]" {
		t.Errorf("no results = %s, want []", js.String())
	}
	for _, tc := range []struct {
		rs   []Result
		fail bool
	}{{nil, false}, {rs[:1], false}, {rs[2:], false}, {rs, true}} {
		if Failed(tc.rs) != tc.fail {
			t.Errorf("Failed(%v) = %v", tc.rs, !tc.fail)
		}
	}
}

// TestCheckKeys: tenants with a provisioned keyring, without one (a
// warning: they cannot reach other nodes), and with a broken one (a failure).
func TestCheckKeys(t *testing.T) {
	dir := t.TempDir()
	keysDir := filepath.Join(dir, "keys")
	os.MkdirAll(keysDir, 0o700)
	k, _ := keys.New("k1")
	if err := keys.Write(filepath.Join(keysDir, "a.keys"), keys.Ring{k}); err != nil {
		t.Fatal(err)
	}
	pol := filepath.Join(dir, "policy.toml")
	cfg := config.Default()
	cfg.KeysDir, cfg.PolicyPath = keysDir, pol
	t.Setenv(config.EnvPolicy, "")
	write := func(body string) {
		if err := os.WriteFile(pol, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("[tenants.a]\n")
	if r := checkKeys(cfg); r.Status != OK || !strings.Contains(r.Detail, "a ("+filepath.Join(keysDir, "a.keys")+")") {
		t.Errorf("all provisioned: %+v", r)
	}
	write("[tenants.a]\n[tenants.b]\n")
	if r := checkKeys(cfg); r.Status != Warn || !strings.HasSuffix(r.Detail, "cannot reach other nodes: b") {
		t.Errorf("b without a ring: %+v", r)
	}
	os.WriteFile(filepath.Join(keysDir, "b.keys"), []byte("k1 zz\n"), 0o400)
	if r := checkKeys(cfg); r.Status != Fail || !strings.Contains(r.Detail, "b.keys") {
		t.Errorf("b with a broken ring: %+v", r)
	}
	os.Remove(pol)
	cfg.PolicyPath = "" // no policy, explicitly
	if r := checkKeys(cfg); r.Status != Fail {
		t.Errorf("no policy, a broken ring in keys_dir: %+v", r)
	}
	os.Remove(filepath.Join(keysDir, "b.keys"))
	if r := checkKeys(cfg); r.Status != OK {
		t.Errorf("no policy, one good ring: %+v", r)
	}
	os.Remove(filepath.Join(keysDir, "a.keys"))
	if r := checkKeys(cfg); r.Status != Warn {
		t.Errorf("no policy, no ring: %+v", r)
	}
}

// TestCheckPolicy: a policy (OK), none by choice or a fresh node (a loud
// warning), a configured one that is missing or malformed (a failure).
func TestCheckPolicy(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(config.EnvPolicy, "")
	cfg := config.Default()
	cfg.StateDir = dir
	pol := filepath.Join(dir, "policy.toml")
	for _, tc := range []struct {
		name, path, body string
		want             Status
		detail           string
	}{
		{"present", pol, "[tenants.a]\n[tenants.b]\n", OK, pol + ": 2 tenant(s)"},
		{"none by choice", "", "", Warn, `policy_path = "": NO TENANT POLICY IS ENFORCED: any pod or local caller may claim any tenant`},
		{"configured, missing", filepath.Join(dir, "typo.toml"), "", Fail, filepath.Join(dir, "typo.toml") + " (policy_path or $SWIFT_POLICY) does not exist"},
		{"malformed", pol, "[tenants.a]\nqps = -1\n", Fail, pol},
	} {
		os.Remove(pol)
		if tc.body != "" {
			if err := os.WriteFile(pol, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cfg.PolicyPath = tc.path
		r := checkPolicy(cfg)
		if r.Check != "tenant.policy" || r.Status != tc.want || !strings.Contains(r.Detail, tc.detail) {
			t.Errorf("%s: %+v, want %s with %q", tc.name, r, tc.want, tc.detail)
		}
	}
}
