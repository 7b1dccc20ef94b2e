package doctor

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/swift-rdma/swift-containerd/config"
)

// proc is a fake containerd process under a Node's ProcRoot.
type proc struct {
	pid     int
	comm    string // "containerd" when empty
	limits  string // the "Max locked memory" line's values; "" writes no limits file
	capEff  string // CapEff in hex; "" writes no status file
	environ []string
	exe     string
	cmdline []string
}

func (p proc) write(t *testing.T, n Node) {
	t.Helper()
	dir := filepath.Join(n.ProcRoot, strconv.Itoa(p.pid))
	comm := p.comm
	if comm == "" {
		comm = "containerd"
	}
	write(t, filepath.Join(dir, "comm"), comm+"\n")
	if p.limits != "" {
		write(t, filepath.Join(dir, "limits"), "Limit                     Soft Limit           Hard Limit           Units     \n"+
			"Max cpu time              unlimited            unlimited            seconds   \n"+
			"Max locked memory         "+p.limits+"\n"+
			"Max address space         unlimited            unlimited            bytes     \n")
	}
	if p.capEff != "" {
		write(t, filepath.Join(dir, "status"), "Name:\tcontainerd\nCapInh:\t0000000000000000\nCapEff:\t"+p.capEff+"\nCapBnd:\t000001ffffffffff\n")
	}
	if p.environ != nil {
		write(t, filepath.Join(dir, "environ"), strings.Join(p.environ, "\x00")+"\x00")
	}
	if p.exe != "" {
		if err := os.Symlink(p.exe, filepath.Join(dir, "exe")); err != nil {
			t.Fatal(err)
		}
	}
	if p.cmdline != nil {
		write(t, filepath.Join(dir, "cmdline"), strings.Join(p.cmdline, "\x00")+"\x00")
	}
}

// executableFile writes an executable file (mode 0755, owned by whoever
// runs the test).
func executableFile(t *testing.T, path string) {
	t.Helper()
	write(t, path, "#!/bin/sh\n")
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

const (
	capsAll  = "000001ffffffffff"
	capsNone = "0000000000000000"
)

// The memlock check reads containerd's limits (which the shim and runc
// inherit), not those of the process running doctor.
func TestMemlock(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    string
		procs  []proc
		pidTxt string // the pid file's content; "" writes none
		want   want
		fix    string
	}{
		{"unlimited", "", []proc{{pid: 4242, limits: "unlimited unlimited bytes", capEff: capsNone}}, "4242\n",
			want{OK, "containerd (pid 4242 from PIDFILE) has hard RLIMIT_MEMLOCK unlimited, which covers rdma.memlock unlimited"}, ""},
		{"8MiB, no capability", "", []proc{{pid: 4242, limits: "8388608 8388608 bytes", capEff: capsNone}}, "4242\n",
			want{Fail, "containerd (pid 4242 from PIDFILE) has hard RLIMIT_MEMLOCK 8MiB, below rdma.memlock unlimited, and no CAP_SYS_RESOURCE to raise it: every opted-in container is refused"},
			"systemctl edit containerd, add [Service] LimitMEMLOCK=infinity, then systemctl restart containerd; or lower rdma.memlock in CONFIG to 8MiB"},
		{"8MiB, CAP_SYS_RESOURCE", "", []proc{{pid: 4242, limits: "8388608 8388608 bytes", capEff: capsAll}}, "4242\n",
			want{OK, "has hard RLIMIT_MEMLOCK 8MiB, below rdma.memlock unlimited, but it holds CAP_SYS_RESOURCE, so runc can raise it"}, ""},
		{"configured below the hard limit", "[rdma]\nmemlock = \"4Mi\"\n", []proc{{pid: 4242, limits: "65536 8388608 bytes", capEff: capsNone}}, "4242\n",
			want{OK, "has hard RLIMIT_MEMLOCK 8MiB, which covers rdma.memlock 4Mi"}, ""},
		{"odd size", "[rdma]\nmemlock = \"1Gi\"\n", []proc{{pid: 4242, limits: "65537 65537 bytes", capEff: capsNone}}, "4242\n",
			want{Fail, "hard RLIMIT_MEMLOCK 65537, below rdma.memlock 1Gi"},
			"systemctl edit containerd, add [Service] LimitMEMLOCK=infinity, then systemctl restart containerd; or lower rdma.memlock in CONFIG to 65537"},
		{"no pid file: the process named containerd", "", []proc{{pid: 30, comm: "bash"}, {pid: 77, limits: "unlimited unlimited bytes"}, {pid: 91, limits: "0 0 bytes"}}, "",
			want{OK, "containerd (pid 77, the process named containerd (of 2)) has hard RLIMIT_MEMLOCK unlimited"}, ""},
		{"stale pid file", "", []proc{{pid: 30, comm: "bash"}, {pid: 77, limits: "unlimited unlimited bytes"}}, "30\n",
			want{OK, "containerd (pid 77, the process named containerd) has hard RLIMIT_MEMLOCK unlimited"}, ""},
		{"not running", "", nil, "",
			want{Warn, "containerd is not running (no containerd process under PROC, PIDFILE names none): its RLIMIT_MEMLOCK, which the shim inherits, is unknown"},
			"start containerd (systemctl start containerd), then run swiftctl doctor again"},
		{"limits unreadable", "", []proc{{pid: 4242}}, "4242\n",
			want{Warn, "containerd (pid 4242 from PIDFILE): cannot read its RLIMIT_MEMLOCK"}, "run swiftctl doctor as root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := fakeNode(t)
			if tc.cfg != "" {
				write(t, n.ConfigPath, tc.cfg)
			}
			for _, p := range tc.procs {
				p.write(t, n)
			}
			if tc.pidTxt != "" {
				write(t, n.ContainerdPIDFile, tc.pidTxt)
			}
			r := strings.NewReplacer("PIDFILE", n.ContainerdPIDFile, "PROC", n.ProcRoot, "CONFIG", n.ConfigPath)
			tc.want.detail = r.Replace(tc.want.detail)
			rs := Run(context.Background(), n)
			expect(t, rs, map[string]want{"memlock": tc.want})
			if got := byCheck(t, rs)["memlock"].Fix; got != r.Replace(tc.fix) {
				t.Errorf("fix = %q, want %q", got, r.Replace(tc.fix))
			}
		})
	}
}

// The shim is looked for where containerd looks: the runtime entry's
// runtime_path, containerd's PATH (from its environment), then beside
// containerd's binary.
func TestShim(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, n Node, dir string)
		want  want
		fix   string
	}{
		{"on containerd's PATH", func(t *testing.T, n Node, dir string) {
			executableFile(t, filepath.Join(dir, "bin2", ShimBinary))
			proc{pid: 10, environ: []string{"HOME=/root", "PATH=" + dir + "/bin1:" + dir + "/bin2"}}.write(t, n)
		}, want{OK, "DIR/bin2/" + ShimBinary + ", on containerd's PATH (pid 10, the process named containerd)"}, ""},
		{"not on containerd's PATH", func(t *testing.T, n Node, dir string) {
			executableFile(t, filepath.Join(dir, "elsewhere", ShimBinary))
			proc{pid: 10, environ: []string{"PATH=" + dir + "/bin1"}}.write(t, n)
		}, want{Fail, ShimBinary + " is not on containerd's PATH (pid 10, the process named containerd) (PATH=DIR/bin1): containerd cannot start a Swift container"},
			"make install (puts " + ShimBinary + " in /usr/local/bin), or copy it into a directory of that PATH, then run swiftctl doctor again"},
		{"not executable", func(t *testing.T, n Node, dir string) {
			write(t, filepath.Join(dir, "bin1", ShimBinary), "x")
			proc{pid: 10, environ: []string{"PATH=" + dir + "/bin1"}}.write(t, n)
		}, want{Fail, "is not on containerd's PATH"}, "make install"},
		{"environment without PATH", func(t *testing.T, n Node, dir string) {
			proc{pid: 10, environ: []string{"HOME=/root"}}.write(t, n)
		}, want{Fail, "is not on PATH unset in PROC/10/environ: the default service PATH (pid 10, the process named containerd) (PATH=" + DefaultServicePath + ")"}, "make install"},
		{"beside containerd's binary", func(t *testing.T, n Node, dir string) {
			executableFile(t, filepath.Join(dir, "opt", "containerd"))
			executableFile(t, filepath.Join(dir, "opt", ShimBinary))
			proc{pid: 10, environ: []string{"PATH=" + dir + "/bin1"}, exe: filepath.Join(dir, "opt", "containerd")}.write(t, n)
		}, want{OK, "DIR/opt/" + ShimBinary + ", beside containerd's binary DIR/opt/containerd"}, ""},
		{"runtime_path of the runtime entry", func(t *testing.T, n Node, dir string) {
			executableFile(t, filepath.Join(dir, "shim"))
			write(t, n.ContainerdConfig, "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.swift]\n"+
				"runtime_type = \"io.containerd.swift.v2\"\nruntime_path = \""+dir+"/shim\"\npod_annotations = [\"swift.io/*\"]\n")
		}, want{OK, "DIR/shim (runtime_path of runtime \"swift\" in CTRCONFIG)"}, ""},
		{"runtime_path that is missing", func(t *testing.T, n Node, dir string) {
			write(t, n.ContainerdConfig, "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.swift]\n"+
				"runtime_type = \"io.containerd.swift.v2\"\nruntime_path = \"/nonexistent/shim\"\npod_annotations = [\"swift.io/*\"]\n")
		}, want{Fail, "runtime \"swift\" in CTRCONFIG sets runtime_path = \"/nonexistent/shim\", which is not an executable file"},
			"install " + ShimBinary + " there (make install), or remove runtime_path from that entry so containerd looks on its PATH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := fakeNode(t)
			dir := t.TempDir()
			tc.setup(t, n, dir)
			r := strings.NewReplacer("DIR", dir, "PROC", n.ProcRoot, "CTRCONFIG", n.ContainerdConfig)
			tc.want.detail = r.Replace(tc.want.detail)
			rs := Run(context.Background(), n)
			expect(t, rs, map[string]want{"shim.binary": tc.want})
			if got := byCheck(t, rs)["shim.binary"].Fix; !strings.HasPrefix(got, tc.fix) {
				t.Errorf("fix = %q, want it to start with %q", got, tc.fix)
			}
		})
	}
}

// swift-hook is at hooks.path, else beside the shim; runc runs it as
// root, so it must be root's and writable by root only.
func TestHook(t *testing.T) {
	for _, tc := range []struct {
		name   string
		asRoot bool // the case chowns a file
		setup  func(t *testing.T, dir string) (cfg config.Config, shim string)
		want   want
		fix    string
	}{
		{"beside the shim", false, func(t *testing.T, dir string) (config.Config, string) {
			executableFile(t, filepath.Join(dir, HookBinary))
			return config.Default(), filepath.Join(dir, ShimBinary)
		}, want{OK, "DIR/swift-hook (beside the shim (hooks.path unset)): executable, root's, writable by root only"}, ""},
		{"hooks.path", false, func(t *testing.T, dir string) (config.Config, string) {
			executableFile(t, filepath.Join(dir, "hooks", HookBinary))
			c := config.Default()
			c.Hooks.Path = filepath.Join(dir, "hooks", HookBinary)
			return c, ""
		}, want{OK, "DIR/hooks/swift-hook (hooks.path): executable"}, ""},
		{"missing beside the shim", false, func(t *testing.T, dir string) (config.Config, string) {
			return config.Default(), filepath.Join(dir, ShimBinary)
		}, want{Fail, "DIR/swift-hook (beside the shim (hooks.path unset)) is not an executable file: every opted-in container is refused"},
			"install swift-hook with the shim (make install), or set hooks.path in CONFIG"},
		{"group-writable", false, func(t *testing.T, dir string) (config.Config, string) {
			executableFile(t, filepath.Join(dir, HookBinary))
			if err := os.Chmod(filepath.Join(dir, HookBinary), 0o775); err != nil {
				t.Fatal(err)
			}
			return config.Default(), filepath.Join(dir, ShimBinary)
		}, want{Fail, "with mode -rwxrwxr-x: runc runs it as root, so it must be root's and writable by no one else"},
			"chown root:root DIR/swift-hook && chmod go-w DIR/swift-hook"},
		{"not root's", true, func(t *testing.T, dir string) (config.Config, string) {
			executableFile(t, filepath.Join(dir, HookBinary))
			if err := os.Chown(filepath.Join(dir, HookBinary), 1000, 1000); err != nil {
				t.Fatal(err)
			}
			return config.Default(), filepath.Join(dir, ShimBinary)
		}, want{Fail, "DIR/swift-hook (beside the shim (hooks.path unset)) is owned by uid 1000 with mode -rwxr-xr-x"},
			"chown root:root DIR/swift-hook && chmod go-w DIR/swift-hook"},
		{"no shim, no hooks.path", false, func(t *testing.T, dir string) (config.Config, string) {
			return config.Default(), ""
		}, want{Warn, "not checked: hooks.path is unset and the shim was not found"}, "see shim.binary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if os.Getuid() != 0 && (tc.asRoot || tc.want.status == OK) {
				t.Skip("needs root: the files must be root's")
			}
			n := fakeNode(t)
			dir := t.TempDir()
			cfg, shim := tc.setup(t, dir)
			r := strings.NewReplacer("DIR", dir, "CONFIG", n.ConfigPath)
			got := checkHook(n, cfg, shim)
			tc.want.detail = r.Replace(tc.want.detail)
			expect(t, []Result{got}, map[string]want{"hooks.swift-hook": tc.want})
			if got.Fix != r.Replace(tc.fix) {
				t.Errorf("fix = %q, want %q", got.Fix, r.Replace(tc.fix))
			}
		})
	}
}

func TestZygoteBin(t *testing.T) {
	dir := t.TempDir()
	n := fakeNode(t)
	cfg := config.Default()
	cfg.Zygote.BinDir = dir
	executableFile(t, filepath.Join(dir, "swift-init"))
	r := checkZygoteBin(n, cfg)
	if r.Status != Warn || r.Detail != dir+" (zygote.bin_dir) lacks swift-run: containers with swift.io/zygote=true are refused" ||
		r.Fix != "make install (puts swift-init and swift-run in /usr/local/lib/swift), or set zygote.bin_dir in "+n.ConfigPath+" to where they are" {
		t.Errorf("swift-run missing: %+v", r)
	}
	executableFile(t, filepath.Join(dir, "swift-run"))
	if r := checkZygoteBin(n, cfg); r.Status != OK || r.Detail != dir+": swift-init and swift-run" {
		t.Errorf("both present: %+v", r)
	}
	yama := filepath.Join(n.ProcRoot, "sys/kernel/yama/ptrace_scope")
	if err := os.MkdirAll(filepath.Dir(yama), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		scope  string
		status Status
	}{{"1\n", OK}, {"2\n", OK}, {"3\n", Warn}} {
		if err := os.WriteFile(yama, []byte(tc.scope), 0o644); err != nil {
			t.Fatal(err)
		}
		r := checkZygoteBin(n, cfg)
		if r.Status != tc.status || (tc.status == Warn && !strings.Contains(r.Detail, "kernel.yama.ptrace_scope is 3: the shim cannot hand a zygote its tenant key")) {
			t.Errorf("ptrace_scope %q: %+v, want %s", tc.scope, r, tc.status)
		}
	}
	os.Remove(yama)
	cfg.Zygote.BinDir = filepath.Join(dir, "absent")
	if r := checkZygoteBin(n, cfg); r.Status != Warn || !strings.Contains(r.Detail, "lacks swift-init and swift-run") {
		t.Errorf("no bin_dir: %+v", r)
	}
}

// The CRI runtime entry of the Swift type must pass the swift.io/ pod
// annotations (CRI matches them with path.Match: "*" passes none of them).
func TestCRIRuntime(t *testing.T) {
	entry := func(name, annotations string) string {
		return "[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes." + name + "]\n  runtime_type = \"io.containerd.swift.v2\"\n" +
			"  pod_annotations = " + annotations + "\n"
	}
	for _, tc := range []struct {
		name    string
		config  string // containerd's root config; "" writes none
		cmdline bool   // containerd runs with --config naming it, and the Node names none
		want    want
		fix     string
	}{
		{"installed", "version = 3\n" + entry("swift", `["swift.io/*"]`), false,
			want{OK, `runtime "swift" (CTRCONFIG) of type io.containerd.swift.v2 passes the swift.io/ pod annotations`}, ""},
		{"found through containerd's --config", "version = 3\n" + entry("rdma", `["swift.io/*", "other/*"]`), true,
			want{OK, `runtime "rdma" (CTRCONFIG)`}, ""},
		{"some annotations only", "version = 3\n" + entry("swift", `["swift.io/rdma", "swift.io/tenant"]`), false,
			want{Fail, `runtime "swift" in CTRCONFIG: pod_annotations ["swift.io/rdma" "swift.io/tenant"] do not pass swift.io/devices, swift.io/pool, swift.io/peers, swift.io/verbs, swift.io/zygote, swift.io/zygote-container, swift.io/name, swift.io/listen, swift.io/remote-access: pods cannot ask for RDMA, a tenant or the zygote`},
			`set pod_annotations = ["swift.io/*"] in that runtime entry (swiftctl install containerd writes it), then systemctl restart containerd`},
		{"a star passes no swift.io/ key", "version = 3\n" + entry("swift", `["*"]`), false,
			want{Fail, `pod_annotations ["*"] do not pass swift.io/rdma, swift.io/tenant`}, "set pod_annotations"},
		{"no pod_annotations", "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.swift]\n  runtime_type = \"io.containerd.swift.v2\"\n", false,
			want{Fail, `runtime "swift" in CTRCONFIG: pod_annotations [] do not pass swift.io/rdma`}, "set pod_annotations"},
		{"no Swift runtime", "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n", false,
			want{Warn, "CTRCONFIG (and its imports) declares no CRI runtime of type io.containerd.swift.v2: Kubernetes pods cannot select it (ctr and nerdctl --runtime io.containerd.swift.v2 can)"},
			"swiftctl install containerd --config CTRCONFIG, then systemctl restart containerd"},
		{"no containerd config", "", false,
			want{Warn, "cannot read containerd's config: containerd config CTRCONFIG does not exist: not found"},
			"swiftctl install containerd --config CTRCONFIG (containerd config default > CTRCONFIG first when it does not exist), then systemctl restart containerd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := fakeNode(t)
			ctrConfig := n.ContainerdConfig
			if tc.cmdline {
				ctrConfig = filepath.Join(t.TempDir(), "elsewhere.toml")
				proc{pid: 5, cmdline: []string{"/usr/bin/containerd", "--config", ctrConfig}}.write(t, n)
				n.ContainerdConfig = ""
			}
			if tc.config != "" {
				write(t, ctrConfig, tc.config)
			}
			r := strings.NewReplacer("CTRCONFIG", ctrConfig)
			tc.want.detail = r.Replace(tc.want.detail)
			rs := Run(context.Background(), n)
			expect(t, rs, map[string]want{"containerd.cri_runtime": tc.want})
			if got := byCheck(t, rs)["containerd.cri_runtime"].Fix; !strings.HasPrefix(got, r.Replace(tc.fix)) {
				t.Errorf("fix = %q, want it to start with %q", got, r.Replace(tc.fix))
			}
		})
	}
}

func TestFindContainerdConfigFlag(t *testing.T) {
	for _, args := range [][]string{
		{"containerd", "--config", "/c.toml"}, {"containerd", "-c", "/c.toml"}, {"containerd", "--config=/c.toml"}, {"containerd", "-c=/c.toml", "--log-level", "debug"},
	} {
		n := fakeNode(t)
		proc{pid: 3, cmdline: args}.write(t, n)
		cd, ok := findContainerd(n.ProcRoot, n.ContainerdPIDFile)
		if !ok || cd.Config != "/c.toml" || cd.PID != 3 {
			t.Errorf("%q: %+v, %v; want config /c.toml", args, cd, ok)
		}
	}
}

// The version checked is that of the containerd that runs, unless the
// operator names another binary.
func TestVersionOfRunningContainerd(t *testing.T) {
	for _, tc := range []struct {
		name, flag, want string
	}{
		{"default", "", "EXE"},
		{"named", "/opt/other/containerd", "/opt/other/containerd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := fakeNode(t)
			exe := filepath.Join(t.TempDir(), "containerd")
			executableFile(t, exe)
			proc{pid: 8, exe: exe}.write(t, n)
			if tc.flag != "" {
				n.Containerd = tc.flag
			}
			var asked []string
			n.Version = func(_ context.Context, bin string) (string, error) {
				asked = append(asked, bin)
				return "x 2.4.2\n", nil
			}
			Run(context.Background(), n)
			want := strings.ReplaceAll(tc.want, "EXE", exe)
			if len(asked) != 2 || asked[0] != want {
				t.Errorf("versions asked of %q, want %s first", asked, want)
			}
		})
	}
}
