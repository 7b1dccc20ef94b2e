package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/spf13/cobra"

	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/doctor"
	"github.com/swift-rdma/swift-containerd/verbs"
)

func newCacheCmd() *cobra.Command {
	build := &cobra.Command{
		Use:   "build",
		Short: "Profile libibverbs and build the node's verbs cache",
		Long: `Profile libibverbs' control plane on this node (swift-profile, a fresh
process per run) and build the verbs cache that opted-in containers use
(swift.io/verbs=cached or trimmed): the device snapshot, the provider driver
lists and libswiftverbs.so. It profiles both modes and records the faster
as the node's default. Run it as root after the node's RDMA devices and
drivers change.`,
		Args: noArgs,
	}
	var bo cacheBuildOptions
	bo.cfgPath = addConfigFlag(build, "state_dir, rdma.sys_root, zygote.bin_dir")
	build.Flags().IntVar(&bo.runs, "runs", 10, "profiling runs per path, a fresh process each")
	build.Flags().StringVar(&bo.device, "device", "", "device the control-plane sequence runs on (default: the first)")
	build.Flags().StringVar(&bo.libDir, "lib-dir", "", "directory with swift-profile and libswiftverbs.so (default: next to swiftctl, then zygote.bin_dir)")
	build.Flags().StringVar(&bo.confDir, "config-dir", verbs.DefaultConfigDir, "the node's libibverbs provider config directory")
	build.Flags().BoolVar(&bo.noCached, "no-cached", false, "do not profile the cached path (it needs root)")
	build.Flags().StringVar(&bo.chart, "chart", "", "also write the per-call stock/cached medians as an SVG chart to this file")
	build.Flags().BoolVar(&bo.quiet, "quiet", false, "do not show the profiler's progress")
	bo.out = addOutputFlag(build, true)
	build.RunE = func(cmd *cobra.Command, _ []string) error {
		return cacheBuild(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), bo)
	}

	check := &cobra.Command{
		Use:   "check",
		Short: "Check the node's verbs cache (exit 1 unless valid)",
		Long: `Check that the node's verbs cache is valid for the node as it is now
(devices, kernel, rdma-core, the cache's own files): it prints the state
(valid, missing, stale or invalid) and why, and exits 1 unless valid.
With -o json it prints {"state", "reasons", "dir"}.`,
		Args: noArgs,
	}
	checkConfig := addConfigFlag(check, "its state_dir holds the cache")
	checkOut := addOutputFlag(check, true)
	check.RunE = func(cmd *cobra.Command, _ []string) error {
		return cacheCheck(cmd.OutOrStdout(), configPath(*checkConfig), *checkOut)
	}

	showCmd := &cobra.Command{
		Use:   "show",
		Short: "Show the node's verbs cache: what it holds and its profile",
		Long: `Show the node's verbs cache: its state, the devices and providers it
holds, its environment, the profile (stock, cached and trimmed medians per
call) and the default mode with why.
With -o json it prints the cache's manifest.`,
		Args: noArgs,
	}
	showConfig := addConfigFlag(showCmd, "its state_dir holds the cache")
	showOut := addOutputFlag(showCmd, true)
	showCmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return cacheShow(cmd.OutOrStdout(), configPath(*showConfig), *showOut)
	}
	return newGroupCmd("cache", "Build, check or show the node's verbs cache", "", build, check, showCmd)
}

func cacheNode(c config.Config) verbs.Node {
	return verbs.Node{StateDir: c.StateDir, Sources: verbs.Sources{SysRoot: c.RDMA.SysRoot}}
}

// libDirs are where swift-profile and libswiftverbs.so are looked for:
// the flag, then swiftctl's own directory, then the zygote bin_dir.
func libDirs(flagDir string, c config.Config) []string {
	if flagDir != "" {
		return []string{flagDir}
	}
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
	}
	return append(dirs, c.Zygote.BinDir, config.DefaultZygoteBinDir)
}

// cacheBuildOptions are the flags of `cache build`.
type cacheBuildOptions struct {
	cfgPath                        *string
	runs                           int
	device, libDir, confDir, chart string
	noCached, quiet                bool
	out                            *outputFormat
}

func cacheBuild(ctx context.Context, w, stderr io.Writer, o cacheBuildOptions) error {
	c, err := config.Load(configPath(*o.cfgPath))
	if err != nil {
		return err
	}
	dirs := libDirs(o.libDir, c)
	prof, err := verbs.FindBinary(verbs.ProfilerBinary, dirs...)
	if err != nil {
		return err
	}
	pre, err := verbs.FindBinary(verbs.PreloadBinary, dirs...)
	if err != nil {
		return err
	}
	log := stderr
	if o.quiet {
		log = nil
	}
	res, err := verbs.Build(ctx, verbs.BuildOptions{
		StateDir: c.StateDir, Sources: verbs.Sources{SysRoot: c.RDMA.SysRoot},
		Profiler: prof, Preload: pre, ConfigDir: o.confDir, Runs: o.runs, Device: o.device,
		MeasureCached: !o.noCached, System: rdmaSystem, Log: log,
	})
	if err != nil {
		return fmt.Errorf("verbs cache build: %w", err)
	}
	if o.chart != "" {
		if err := writeCacheChart(o.chart, res.Manifest); err != nil {
			return err
		}
	}
	if *o.out == outputJSON {
		return writeJSON(w, res.Manifest)
	}
	fmt.Fprintf(w, "verbs cache built: %s\n", res.Dir)
	printManifest(w, res.Manifest)
	return nil
}

func rdmaSystem() (*bool, string, error) {
	info, err := doctor.QueryRDMASystem()
	if err != nil {
		return nil, "", err
	}
	return info.CopyOnFork, info.NetnsMode, nil
}

func writeCacheChart(path string, m verbs.Manifest) error {
	if len(m.Profile.CachedUS) == 0 {
		return fmt.Errorf("--chart: the cached path was not measured (%s): %w", m.Profile.CachedNote, errdefs.ErrFailedPrecondition)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	rows := append([]string{"critical"}, verbs.Calls...)
	ms := func(us map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for k, v := range us {
			out[k] = v / 1000
		}
		return out
	}
	title := fmt.Sprintf("libibverbs control plane on %s, median of %d runs: %.1fx", m.Profile.Device, m.Profile.Runs, m.Profile.Speedup)
	err = verbs.WriteChartSVG(f, title, "ms", rows, []verbs.ChartSeries{
		{Name: "stock", Color: "#c0392b", Values: ms(m.Profile.StockUS)},
		{Name: "cached", Color: "#27ae60", Values: ms(m.Profile.CachedUS)},
	})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// cacheCheckReport is `cache check -o json`.
type cacheCheckReport struct {
	State   string   `json:"state"`
	Reasons []string `json:"reasons"`
	// Dir is the current cache directory, null when there is none.
	Dir *string `json:"dir"`
}

// errCacheNotValid makes `swiftctl cache check` exit 1.
var errCacheNotValid = errors.New("verbs cache not valid")

func cacheCheck(w io.Writer, cfgPath string, out outputFormat) error {
	c, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	r := verbs.Check(cacheNode(c))
	if out == outputJSON {
		if err := writeJSON(w, cacheCheckReport{State: string(r.State), Reasons: orEmpty(r.Reasons), Dir: strOrNull(r.Dir)}); err != nil {
			return err
		}
	} else if r.Valid() {
		fmt.Fprintf(w, "valid: %s\n", r.Dir)
	} else {
		fmt.Fprintf(w, "%s: %s\n", r.State, r.Why())
	}
	if !r.Valid() {
		return &checkFailed{fmt.Errorf("%w (%s)", errCacheNotValid, r.State)}
	}
	return nil
}

func cacheShow(w io.Writer, cfgPath string, out outputFormat) error {
	c, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	r := verbs.Check(cacheNode(c))
	if r.Manifest == nil {
		return fmt.Errorf("no verbs cache to show: %s: %w", r.Why(), errdefs.ErrNotFound)
	}
	if out == outputJSON {
		return writeJSON(w, r.Manifest)
	}
	fmt.Fprintf(w, "cache: %s\nstate: %s", r.Dir, r.State)
	if !r.Valid() {
		fmt.Fprintf(w, " (%s)", r.Why())
	}
	fmt.Fprintln(w)
	printManifest(w, *r.Manifest)
	return nil
}

func printManifest(w io.Writer, m verbs.Manifest) {
	fp := m.Fingerprint
	fmt.Fprintf(w, "built: %s\nkernel: %s\nrdma-core: %s\n", m.Built.Format("2006-01-02 15:04:05 UTC"), fp.Kernel, fp.RDMACore)
	for _, d := range fp.Devices {
		prov := ""
		for _, p := range m.Providers {
			if p.Device == d.Name {
				prov = p.Name
			}
		}
		st := ""
		for _, s := range m.Stability {
			if s.Device == d.Name {
				st = fmt.Sprintf("attributes %s, %d/%d ports static-stable", map[bool]string{true: "served", false: "not served (unstable)"}[s.AttrStable], s.PortsStable, s.Ports)
			}
		}
		fmt.Fprintf(w, "device: %s %s %s guid=%s fw=%s provider=%s; %s\n", d.Name, d.Uverbs, d.Dev, d.NodeGUID, d.FWVersion, prov, st)
	}
	fmt.Fprintf(w, "libibverbs.d: %s (of %d providers)\n", strings.Join(m.DriverFiles, " "), len(m.StockDrivers))
	if len(m.Env) == 0 {
		fmt.Fprintln(w, "env: (none)")
	} else {
		keys := make([]string, 0, len(m.Env))
		for k := range m.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "env: %s=%s\n", k, m.Env[k])
		}
	}
	for _, r := range m.EnvReasons {
		fmt.Fprintf(w, "  (%s)\n", r)
	}
	if m.CopyOnFork != nil {
		fmt.Fprintf(w, "copy-on-fork: %v (netns mode %s)\n", *m.CopyOnFork, m.NetnsMode)
	}
	p := m.Profile
	fmt.Fprintf(w, "profile: %d runs on %s\n", p.Runs, p.Device)
	fmt.Fprintf(w, "  %-22s %12s %12s %12s\n", "call (median)", "stock ms", "cached ms", "trimmed ms")
	ms := func(m map[string]float64, c string) string {
		if v, ok := m[c]; ok {
			return fmt.Sprintf("%.3f", v/1000)
		}
		return "-"
	}
	for _, c := range append(append([]string{}, verbs.Calls...), "init", "critical", "process") {
		s, ok := p.StockUS[c]
		if !ok {
			continue
		}
		fmt.Fprintf(w, "  %-22s %12.3f %12s %12s\n", c, s/1000, ms(p.CachedUS, c), ms(p.TrimmedUS, c))
	}
	if p.Speedup > 0 {
		fmt.Fprintf(w, "speedup (critical path): %.2fx\n", p.Speedup)
	} else if p.CachedNote != "" {
		fmt.Fprintf(w, "%s\n", p.CachedNote)
	}
	fmt.Fprintf(w, "default mode: %s (%s)\n", p.DefaultMode, p.DefaultWhy)
}
