package verbs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

// fakeProfiler writes a shell script standing in for swift-profile: the
// stock path prints stockOut, the cached path (--config-dir of a list
// with the provider entry, which Build writes under .profile-) cachedOut,
// and the trimmed path (--config-dir of the cache's libibverbs.d) the
// same runs without the library and 1150 µs faster. before, if set, runs
// first (to change the node mid-profile).
func fakeProfiler(t *testing.T, stockOut, cachedOut, before string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	s := write("stock.txt", stockOut)
	c := write("cached.txt", cachedOut)
	tr := write("trimmed.txt", strings.NewReplacer("cache=valid", "cache=none", "entry=provider", "entry=none",
		"patched=7", "patched=0", "critical_us=41150.0", "critical_us=40000.0").Replace(cachedOut))
	script := write("swift-profile", "#!/bin/sh\n"+before+"\n"+
		`case " $* " in *"/.profile-"*) cat '`+c+`' ;; *" --config-dir "*) cat '`+tr+`' ;; *) cat '`+s+`' ;; esac`+"\n"+
		`[ -z "$LD_PRELOAD$RDMAV_DRIVERS$SWIFT_VERBS_CACHE" ] || { echo "profiler env not clean" >&2; exit 9; }`+"\n")
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

func cachedOutput() string {
	var b strings.Builder
	for i := 0; i < 3; i++ {
		b.WriteString("run=" + string(rune('0'+i)) + " exit=0 process_us=90000.0 cache=valid served=1 port_checks=1 entry=provider patched=7 init_us=150.0")
		for _, c := range Calls {
			v := "1000.0"
			if c == "ibv_get_device_list" {
				v = "30000.0"
			}
			b.WriteString(" " + c + "_us=" + v)
		}
		b.WriteString(" critical_us=41150.0 pingpong=ok pingpong_n=10 pingpong_us=1.0 device=rxe0 ndev=2\n")
	}
	return b.String()
}

type buildEnv struct {
	opts     BuildOptions
	src      Sources
	stateDir string
}

func newBuildEnv(t *testing.T) *buildEnv {
	t.Helper()
	stock, err := os.ReadFile("testdata/profile-stock.txt")
	if err != nil {
		t.Fatal(err)
	}
	src := fakeNode(t, rxe0, rxe1)
	conf := t.TempDir()
	for name, body := range map[string]string{"rxe.driver": "driver rxe\n", "mlx5.driver": "driver mlx5\n", "siw.driver": "driver siw\n"} {
		if err := os.WriteFile(filepath.Join(conf, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pre := filepath.Join(t.TempDir(), PreloadFile)
	if err := os.WriteFile(pre, fakeELF, 0o755); err != nil {
		t.Fatal(err)
	}
	cof := true
	e := &buildEnv{src: src, stateDir: t.TempDir()}
	e.opts = BuildOptions{
		StateDir: e.stateDir, Sources: src, Profiler: fakeProfiler(t, string(stock), cachedOutput(), ""),
		Preload: pre, ConfigDir: conf, CPUInfo: filepath.Join(conf, "absent-cpuinfo"), Runs: 3, MeasureCached: true,
		System: func() (*bool, string, error) { return &cof, "shared", nil },
	}
	return e
}

func TestBuild(t *testing.T) {
	e := newBuildEnv(t)
	t.Setenv("LD_PRELOAD", "/nonexistent/should-be-removed.so")
	t.Setenv("RDMAV_DRIVERS", "foo")
	var log bytes.Buffer
	e.opts.Log = &log
	res, err := Build(context.Background(), e.opts)
	if err != nil {
		t.Fatalf("Build: %v\n%s", err, log.String())
	}
	m := res.Manifest
	if r := Check(Node{StateDir: e.stateDir, Sources: e.src}); !r.Valid() || r.Dir != res.Dir {
		t.Fatalf("Check after Build: %+v", r)
	}
	if len(m.Providers) != 2 || m.Providers[0].Name != "rxe" || strings.Join(m.DriverFiles, ",") != "rxe.driver" ||
		strings.Join(m.StockDrivers, ",") != "mlx5,rxe,siw" {
		t.Fatalf("providers %+v, driver files %v, stock %v", m.Providers, m.DriverFiles, m.StockDrivers)
	}
	if len(m.Env) != 0 || m.CopyOnFork == nil || !*m.CopyOnFork || m.NetnsMode != "shared" {
		t.Fatalf("env %v, copy-on-fork %v, netns %q", m.Env, m.CopyOnFork, m.NetnsMode)
	}
	if len(m.Stability) != 2 || !m.Stability[0].AttrStable || m.Stability[0].PortsStable != 1 ||
		m.Stability[1].AttrStable || m.Stability[1].PortsStable != 0 {
		t.Fatalf("stability %+v", m.Stability)
	}
	_, snap, err := Load(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if !snap.CopyOnFork || strings.Join(snap.Drivers, ":") != "mlx5:rxe:siw" || len(snap.Devices) != 2 ||
		!snap.Devices[0].AttrStable || snap.Devices[1].AttrStable || len(snap.Devices[0].Attr) != 400 ||
		snap.Devices[0].Major != 231 || snap.Devices[0].Minor != 192 || !snap.Devices[0].Ports[0].Stable || snap.Devices[1].Ports[0].Stable {
		t.Fatalf("snapshot %+v", snap)
	}
	p := m.Profile
	if p.Runs != 3 || p.Device != "rxe0" || p.StockUS["ibv_get_device_list"] != 210000 {
		t.Fatalf("profile %+v", p)
	}
	if os.Geteuid() == 0 {
		if res.Cached == nil || p.CachedUS["critical"] != 41150 || p.Speedup < 5 || p.Speedup > 6 {
			t.Fatalf("cached profile %+v (speedup %v)", p.CachedUS, p.Speedup)
		}
		// the fake's trimmed path is 1150 µs faster: trimmed is the default
		if res.Trimmed == nil || p.TrimmedUS["critical"] != 40000 || p.DefaultMode != "trimmed" ||
			p.DefaultWhy != "measured at build: cached 41.15 ms, trimmed 40.00 ms: trimmed is faster" {
			t.Fatalf("trimmed profile %+v, default %q (%s)", p.TrimmedUS, p.DefaultMode, p.DefaultWhy)
		}
	} else if res.Cached != nil || !strings.Contains(p.CachedNote, "root") || p.DefaultMode != "trimmed" {
		t.Fatalf("not root: cached %+v note %q default %q", res.Cached, p.CachedNote, p.DefaultMode)
	}
}

func TestBuildMLX5Tuning(t *testing.T) {
	e := newBuildEnv(t)
	stock, _ := os.ReadFile("testdata/profile-stock.txt")
	out := strings.ReplaceAll(string(stock), "provider=rxe", "provider=mlx5")
	e.opts.Profiler = fakeProfiler(t, out, cachedOutput(), "")
	cpu := filepath.Join(t.TempDir(), "cpuinfo")
	os.WriteFile(cpu, []byte("processor : 0\ncpu family : 6\nmodel : 106\n"), 0o644)
	e.opts.CPUInfo = cpu
	res, err := Build(context.Background(), e.opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Manifest.Env["MLX5_STALL_CQ_POLL"] != "0" || strings.Join(res.Manifest.DriverFiles, ",") != "mlx5.driver" {
		t.Fatalf("env %v files %v", res.Manifest.Env, res.Manifest.DriverFiles)
	}
	env, _ := os.ReadFile(filepath.Join(res.Dir, EnvFile))
	if string(env) != "MLX5_STALL_CQ_POLL=0\n" {
		t.Fatalf("env file %q", env)
	}
}

// TestBuildFails: every failure leaves the node without a new current cache.
func TestBuildFails(t *testing.T) {
	stock, _ := os.ReadFile("testdata/profile-stock.txt")
	cases := []struct {
		name string
		edit func(*buildEnv)
		is   error
		msg  string
	}{
		{"run fails", func(e *buildEnv) {
			e.opts.Profiler = fakeProfiler(t, "run=0 exit=1 process_us=1.0 error=ibv_open_device errno=13 msg=\"x\"\n", "", "")
		}, errdefs.ErrFailedPrecondition, "at ibv_open_device, errno 13"},
		{"no output", func(e *buildEnv) { e.opts.Profiler = fakeProfiler(t, "", "", "") }, errdefs.ErrFailedPrecondition, "no run"},
		{"profiler missing", func(e *buildEnv) { e.opts.Profiler = "/nonexistent/swift-profile" }, errdefs.ErrFailedPrecondition, "not found"},
		{"preload missing", func(e *buildEnv) { e.opts.Preload = "/nonexistent/libswiftverbs.so" }, errdefs.ErrFailedPrecondition, "not found"},
		{"no devices", func(e *buildEnv) { e.opts.Sources = fakeNode(t) }, errdefs.ErrFailedPrecondition, "no RDMA devices"},
		{"unknown device", func(e *buildEnv) { e.opts.Device = "mlx5_9" }, errdefs.ErrInvalidArgument, "mlx5_9"},
		{"zero runs", func(e *buildEnv) { e.opts.Runs = 0 }, errdefs.ErrInvalidArgument, "runs"},
		{"device without provider", func(e *buildEnv) {
			e.opts.Profiler = fakeProfiler(t, strings.ReplaceAll(string(stock), "provider=rxe", "provider="), cachedOutput(), "")
		}, errdefs.ErrFailedPrecondition, "cannot tell which provider"},
		{"device libibverbs does not list", func(e *buildEnv) {
			e.opts.Sources = fakeNode(t, rxe0, rxe1, fakeDev{"siw0", "uverbs2", "231:194", "g", ""})
		}, errdefs.ErrFailedPrecondition, "siw0 (uverbs2): libibverbs does not list it"},
		{"no driver file", func(e *buildEnv) { os.Remove(filepath.Join(e.opts.ConfigDir, "rxe.driver")) }, errdefs.ErrFailedPrecondition, "names provider(s) rxe"},
		{"node changes while profiling", func(e *buildEnv) {
			f := filepath.Join(e.src.SysRoot, "sys/class/infiniband/rxe0/node_guid")
			e.opts.Profiler = fakeProfiler(t, string(stock), cachedOutput(), "echo changed > '"+f+"'")
		}, errdefs.ErrAborted, "changed while it was profiled"},
	}
	if os.Geteuid() == 0 { // the cached path is profiled only as root
		cases = append(cases, []struct {
			name string
			edit func(*buildEnv)
			is   error
			msg  string
		}{{"the library finds the new cache stale", func(e *buildEnv) {
			e.opts.Profiler = fakeProfiler(t, string(stock), strings.ReplaceAll(cachedOutput(), "cache=valid", "cache=stale"), "")
		}, errdefs.ErrInternal, `finds the new cache "stale"`},
			{"cached path finds the library preloaded, not a provider entry", func(e *buildEnv) {
				e.opts.Profiler = fakeProfiler(t, string(stock), strings.ReplaceAll(cachedOutput(), "entry=provider", "entry=preload"), "")
			}, errdefs.ErrInternal, `as entry "preload", not valid as a provider entry`},
			{"the library wraps nothing", func(e *buildEnv) {
				e.opts.Profiler = fakeProfiler(t, string(stock), strings.ReplaceAll(cachedOutput(), "patched=7", "patched=0"), "")
			}, errdefs.ErrInternal, "wraps none of the profiler's verbs calls"}}...)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newBuildEnv(t)
			tc.edit(e)
			_, err := Build(context.Background(), e.opts)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Build = %v, want %v containing %q", err, tc.is, tc.msg)
			}
			if _, err := Current(e.stateDir); !errors.Is(err, errdefs.ErrNotFound) {
				t.Fatalf("a failed build left a current cache: %v", err)
			}
			entries, _ := os.ReadDir(Root(e.stateDir))
			if len(entries) != 0 {
				t.Fatalf("a failed build left %d entries under %s", len(entries), Root(e.stateDir))
			}
		})
	}
}

func TestFindBinary(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x"), nil, 0o755)
	if p, err := FindBinary("x", "", "/nonexistent", dir); err != nil || p != filepath.Join(dir, "x") {
		t.Fatalf("FindBinary = %q, %v", p, err)
	}
	if _, err := FindBinary("y", dir); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("FindBinary(absent) = %v", err)
	}
}

func TestChart(t *testing.T) {
	var b bytes.Buffer
	err := WriteChartSVG(&b, "a <title> & more", "ms", []string{"critical", "ibv_open_device"}, []ChartSeries{
		{Name: "stock", Color: "#c0392b", Values: map[string]float64{"critical": 300, "ibv_open_device": 5}},
		{Name: "cached", Color: "#27ae60", Values: map[string]float64{"critical": 50}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for _, want := range []string{`<svg xmlns="http://www.w3.org/2000/svg"`, "a &lt;title&gt; &amp; more", "300.00 ms", "0.00 ms", "</svg>"} {
		if !strings.Contains(s, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if strings.Count(s, "<rect") != 1+2+4 { // background, legend, bars
		t.Errorf("chart has %d rects", strings.Count(s, "<rect"))
	}
}

// TestDefaultMode: the rule for the node's default, with literal figures.
func TestDefaultMode(t *testing.T) {
	for _, tc := range []struct {
		cached, trimmed float64
		mode, why       string
	}{
		{7100, 5800, "trimmed", "measured at build: cached 7.10 ms, trimmed 5.80 ms: trimmed is faster"},
		{5000, 5800, "cached", "measured at build: cached 5.00 ms, trimmed 5.80 ms: cached is faster"},
		{5800, 5800, "cached", "measured at build: cached 5.80 ms, trimmed 5.80 ms: cached is faster"},
		{0, 5800, "trimmed", "not measured: trimmed loads nothing into a process"},
		{5000, 0, "trimmed", "not measured: trimmed loads nothing into a process"},
	} {
		mode, why := DefaultMode(tc.cached, tc.trimmed)
		if mode != tc.mode || why != tc.why {
			t.Errorf("DefaultMode(%v, %v) = %q, %q; want %q, %q", tc.cached, tc.trimmed, mode, why, tc.mode, tc.why)
		}
	}
}
