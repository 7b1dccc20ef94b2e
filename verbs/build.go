package verbs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"

	"github.com/swift-rdma/swift-containerd/rdma"
)

// Binaries Build needs, normally installed next to swiftctl or in the
// zygote bin_dir.
const (
	ProfilerBinary = "swift-profile"
	PreloadBinary  = PreloadFile
)

// BuildOptions configures Build.
type BuildOptions struct {
	StateDir  string
	Sources   Sources
	Profiler  string // path of swift-profile
	Preload   string // path of libswiftverbs.so, copied into the cache
	ConfigDir string // the node's libibverbs.d; "" means DefaultConfigDir
	CPUInfo   string // "" means /proc/cpuinfo
	Runs      int    // profiling runs per path (fresh process each)
	Device    string // device for the timed sequence; "" means the first
	// MeasureCached profiles again through the new cache, in both of its
	// modes (its trimmed libibverbs.d mounted over /etc/libibverbs.d in a
	// private mount namespace, with and without libswiftverbs.so as a
	// provider entry), refuses the cache if the library does not find it
	// valid, and makes the faster mode the default. Needs root.
	MeasureCached bool
	// System reports copy-on-fork support and the RDMA netns mode
	// (netlink RDMA_NLDEV_CMD_SYS_GET); nil skips it.
	System func() (copyOnFork *bool, netnsMode string, err error)
	Log    io.Writer // progress and the profiler's stderr; nil discards
}

// BuildResult is a built (and current) cache.
type BuildResult struct {
	Dir      string
	Manifest Manifest
	Stock    Profile
	Cached   *Profile
	Trimmed  *Profile
}

// profilerEnv is the environment with every knob that would change what
// libibverbs does removed: the stock profile must see the node as it is.
func profilerEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		switch {
		case k == "LD_PRELOAD", k == "RDMAV_DRIVERS", k == "IBV_DRIVERS", strings.HasPrefix(k, "SWIFT_VERBS"):
			continue
		}
		env = append(env, e)
	}
	return env
}

// RunProfiler runs swift-profile with args and parses its output. A run
// that failed is an error naming the call and errno, with the profile so far.
func RunProfiler(ctx context.Context, path string, args []string, log io.Writer) (Profile, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = profilerEnv()
	var out bytes.Buffer
	cmd.Stdout = &out
	if log != nil {
		cmd.Stderr = log
	}
	runErr := cmd.Run()
	p, err := ParseProfile(&out)
	if err != nil {
		return p, err
	}
	if f := p.Failed(); len(f) > 0 {
		r := f[0]
		return p, fmt.Errorf("swift-profile run %d failed (exit %d) at %s, errno %d (%d of %d runs failed): %w",
			r.Index, r.Exit, r.Error, r.Errno, len(f), len(p.Runs), errdefs.ErrFailedPrecondition)
	}
	if runErr != nil {
		return p, fmt.Errorf("swift-profile: %w", runErr)
	}
	if len(p.Runs) == 0 {
		return p, fmt.Errorf("swift-profile printed no run: %w", errdefs.ErrFailedPrecondition)
	}
	return p, nil
}

func logf(w io.Writer, format string, a ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", a...)
	}
}

// Build profiles the node's control plane, decides what can be cached, and
// writes and activates a new cache. It changes nothing on failure.
func Build(ctx context.Context, o BuildOptions) (res BuildResult, retErr error) {
	if o.Runs < 1 {
		return res, fmt.Errorf("runs must be at least 1: %w", errdefs.ErrInvalidArgument)
	}
	for _, f := range []struct{ what, path string }{{"profiler", o.Profiler}, {"preload library", o.Preload}} {
		if st, err := os.Stat(f.path); err != nil || !st.Mode().IsRegular() {
			return res, fmt.Errorf("%s %q not found (make build; or pass --lib-dir): %w", f.what, f.path, errdefs.ErrFailedPrecondition)
		}
	}
	fp, err := Collect(o.Sources)
	if err != nil {
		return res, fmt.Errorf("fingerprint the node: %w", err)
	}
	if len(fp.Devices) == 0 {
		return res, fmt.Errorf("this node has no RDMA devices (none under %s): nothing to cache: %w",
			filepath.Join(o.Sources.SysRoot, "sys/class/infiniband_verbs"), errdefs.ErrFailedPrecondition)
	}
	if len(fp.Devices) > MaxDevices {
		return res, fmt.Errorf("%d devices, the cache holds at most %d: %w", len(fp.Devices), MaxDevices, errdefs.ErrFailedPrecondition)
	}
	device := o.Device
	if device == "" {
		device = fp.Devices[0].Name
	} else if _, ok := fp.Device(device); !ok {
		return res, fmt.Errorf("device %q is not on this node: %w", device, errdefs.ErrInvalidArgument)
	}
	confDir := o.ConfigDir
	if confDir == "" {
		confDir = DefaultConfigDir
	}
	files, err := ReadConfigDir(confDir)
	if err != nil {
		return res, err
	}

	logf(o.Log, "profiling the stock path: %d runs on %s", o.Runs, device)
	stock, err := RunProfiler(ctx, o.Profiler, []string{"--runs", strconv.Itoa(o.Runs), "--info", "--device", device}, o.Log)
	res.Stock = stock
	if err != nil {
		return res, err
	}
	after, err := Collect(o.Sources)
	if err != nil {
		return res, fmt.Errorf("fingerprint the node: %w", err)
	}
	if d := Diff(fp, after); len(d) > 0 {
		return res, fmt.Errorf("the node changed while it was profiled (%s): %w", strings.Join(d, "; "), errdefs.ErrAborted)
	}

	m := Manifest{Built: time.Now().UTC(), Fingerprint: fp, StockDrivers: StockDrivers(files), Env: map[string]string{}}
	snap := Snapshot{Kernel: fp.Kernel, RDMACore: fp.RDMACore, Drivers: m.StockDrivers}
	needed, err := describeDevices(fp, stock, confDir, &m, &snap)
	if err != nil {
		return res, err
	}
	selected, missing := SelectDrivers(files, needed)
	if len(missing) > 0 {
		return res, fmt.Errorf("no .driver file in %s names provider(s) %s: %w", confDir, strings.Join(missing, ", "), errdefs.ErrFailedPrecondition)
	}
	cpuPath := o.CPUInfo
	if cpuPath == "" {
		cpuPath = "/proc/cpuinfo"
	}
	cpuinfo, _ := os.ReadFile(cpuPath)
	m.Env, m.EnvReasons = TuningEnv(needed, cpuinfo)
	if o.System != nil {
		cof, mode, err := o.System()
		if err != nil {
			logf(o.Log, "copy-on-fork: %v (not recorded)", err)
		} else {
			m.CopyOnFork, m.NetnsMode = cof, mode
			snap.CopyOnFork = cof != nil && *cof
		}
	}
	m.Profile = ProfileSummary{Runs: len(stock.Runs), Device: device, StockUS: stock.Medians()}
	preload, err := os.ReadFile(o.Preload)
	if err != nil {
		return res, fmt.Errorf("read %s: %w", o.Preload, err)
	}
	dir, err := Write(o.StateDir, Contents{Manifest: m, Snapshot: snap, Preload: preload, Drivers: selected})
	if err != nil {
		return res, err
	}
	defer func() {
		if retErr != nil { // a cache that did not make it is not left behind
			os.RemoveAll(dir)
		}
	}()

	switch {
	case o.MeasureCached && os.Geteuid() == 0:
		if res.Cached, res.Trimmed, err = profileModes(ctx, o, dir, device, selected, &m.Profile); err != nil {
			return res, err
		}
	case o.MeasureCached:
		m.Profile.CachedNote = "cached path not measured: needs root (private mount namespace)"
	default:
		m.Profile.CachedNote = "cached path not measured (--no-cached)"
	}
	if m.Profile.DefaultMode == "" {
		m.Profile.DefaultMode = ModeTrimmed
		m.Profile.DefaultWhy = m.Profile.CachedNote + "; trimmed loads nothing into a process"
	}
	if err := UpdateManifest(dir, m); err != nil {
		return res, err
	}
	final, _, err := Load(dir)
	if err != nil {
		return res, fmt.Errorf("the new cache does not verify: %w", err)
	}
	if err := SetCurrent(o.StateDir, dir); err != nil {
		return res, err
	}
	res.Dir, res.Manifest = dir, final
	return res, nil
}

// describeDevices records each of fp's devices as the stock profile saw
// it: its provider (m.Providers), what of its attributes held still
// (m.Stability), and its snapshot entry (snap.Devices). It returns the
// providers the devices need, sorted.
func describeDevices(fp Fingerprint, stock Profile, confDir string, m *Manifest, snap *Snapshot) ([]string, error) {
	var needed []string
	for _, d := range fp.Devices {
		maj, min, err := rdma.ParseDevNumber(d.Dev)
		if err != nil {
			return nil, fmt.Errorf("device %s: %w", d.Name, err)
		}
		sd := SnapshotDevice{Name: d.Name, Uverbs: d.Uverbs, Major: maj, Minor: min, NodeGUID: d.NodeGUID, FWVersion: d.FWVersion,
			Inode: d.Inode}
		dp := stock.Device(d.Name)
		if dp == nil {
			return nil, fmt.Errorf("device %s (%s): libibverbs does not list it (no provider for it in %s?): %w", d.Name, d.Uverbs, confDir, errdefs.ErrFailedPrecondition)
		}
		if dp.Uverbs != d.Uverbs {
			return nil, fmt.Errorf("device %s: libibverbs says %s, sysfs %s: %w", d.Name, dp.Uverbs, d.Uverbs, errdefs.ErrFailedPrecondition)
		}
		if dp.Provider == "" {
			return nil, fmt.Errorf("device %s: cannot tell which provider drives it: %w", d.Name, errdefs.ErrFailedPrecondition)
		}
		m.Providers = append(m.Providers, Provider{Device: d.Name, Name: dp.Provider, Library: dp.Library})
		needed = appendUnique(needed, dp.Provider)
		if len(dp.Attrs) > 0 && len(dp.Attrs[0]) <= AttrMax {
			sd.Attr = dp.Attrs[0]
			sd.AttrStable = dp.AttrStable() && len(dp.Attrs) == len(stock.Runs)
		}
		sd.Ports = dp.PortsStatic()
		st := DeviceStability{Device: d.Name, AttrStable: sd.AttrStable, AttrLen: len(sd.Attr), Ports: len(sd.Ports)}
		for _, p := range sd.Ports {
			if p.Stable {
				st.PortsStable++
			}
		}
		m.Stability = append(m.Stability, st)
		snap.Devices = append(snap.Devices, sd)
	}
	sort.Strings(needed)
	return needed, nil
}

// profileModes profiles the new cache at dir in its two modes, in
// alternating rounds so that drift hits both alike: cached (the trimmed
// driver list and libswiftverbs.so as a provider entry, which must find
// the cache valid in every run) and trimmed (the list alone). It records
// the medians, the speedup over the stock path, and the default mode
// (the faster; cached on a tie) with the figures, in summary.
func profileModes(ctx context.Context, o BuildOptions, dir, device string, drivers []DriverFile, summary *ProfileSummary) (cached, trimmed *Profile, err error) {
	// The cache's own libibverbs-cached.d names the library where
	// containers see it; the profiler runs on the node, so its entry
	// names dir.
	conf, err := os.MkdirTemp(Root(o.StateDir), ".profile-")
	if err != nil {
		return nil, nil, fmt.Errorf("verbs cache: %w", err)
	}
	defer os.RemoveAll(conf)
	for _, d := range drivers {
		if err := os.WriteFile(filepath.Join(conf, d.Name), d.Data, 0o644); err != nil {
			return nil, nil, fmt.Errorf("verbs cache: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(conf, EntryFile), EntryData(dir), 0o644); err != nil {
		return nil, nil, fmt.Errorf("verbs cache: %w", err)
	}
	if err := os.Chmod(conf, 0o755); err != nil {
		return nil, nil, fmt.Errorf("verbs cache: %w", err)
	}
	cached, trimmed = &Profile{}, &Profile{}
	rounds := min(2, o.Runs)
	for r := range rounds {
		n := o.Runs / rounds
		if r < o.Runs%rounds {
			n++
		}
		logf(o.Log, "profiling the cached and trimmed paths, round %d/%d: %d runs each on %s", r+1, rounds, n, device)
		c, err := RunProfiler(ctx, o.Profiler, []string{"--runs", strconv.Itoa(n), "--device", device, "--config-dir", conf}, o.Log)
		if err != nil {
			return nil, nil, fmt.Errorf("the new cache does not work: %w", err)
		}
		for _, run := range c.Runs {
			if run.Cache != string(StateValid) || run.Entry != "provider" {
				return nil, nil, fmt.Errorf("libswiftverbs.so finds the new cache %q as entry %q, not valid as a provider entry (run %d): %w",
					run.Cache, run.Entry, run.Index, errdefs.ErrInternal)
			}
			if run.Patched == 0 {
				return nil, nil, fmt.Errorf("libswiftverbs.so, a provider entry of the new cache, wraps none of the profiler's verbs calls (run %d): %w",
					run.Index, errdefs.ErrInternal)
			}
		}
		t, err := RunProfiler(ctx, o.Profiler, []string{"--runs", strconv.Itoa(n), "--device", device, "--config-dir", filepath.Join(dir, ConfigDirName)}, o.Log)
		if err != nil {
			return nil, nil, fmt.Errorf("the new cache's trimmed driver list does not work: %w", err)
		}
		cached.Runs = append(cached.Runs, c.Runs...)
		trimmed.Runs = append(trimmed.Runs, t.Runs...)
	}
	summary.CachedUS, summary.TrimmedUS = cached.Medians(), trimmed.Medians()
	c, t := summary.CachedUS["critical"], summary.TrimmedUS["critical"]
	if c > 0 {
		summary.Speedup = summary.StockUS["critical"] / c
	}
	summary.DefaultMode, summary.DefaultWhy = DefaultMode(c, t)
	return cached, trimmed, nil
}

// DefaultMode is the rule for the default: cached when its critical path
// (median, µs) is no slower than trimmed's, else trimmed; and why.
func DefaultMode(cachedUS, trimmedUS float64) (mode, why string) {
	if cachedUS <= 0 || trimmedUS <= 0 {
		return ModeTrimmed, "not measured: trimmed loads nothing into a process"
	}
	if cachedUS <= trimmedUS {
		return ModeCached, fmt.Sprintf("measured at build: cached %.2f ms, trimmed %.2f ms: cached is faster", cachedUS/1000, trimmedUS/1000)
	}
	return ModeTrimmed, fmt.Sprintf("measured at build: cached %.2f ms, trimmed %.2f ms: trimmed is faster", cachedUS/1000, trimmedUS/1000)
}

func appendUnique(l []string, s string) []string {
	for _, v := range l {
		if v == s {
			return l
		}
	}
	return append(l, s)
}

// FindBinary looks for name in dirs, in order.
func FindBinary(name string, dirs ...string) (string, error) {
	for _, d := range dirs {
		if d == "" {
			continue
		}
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s: %w", name, strings.Join(dirs, ", "), errdefs.ErrNotFound)
}
