package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/doctor"
	"github.com/swift-rdma/swift-containerd/verbs"
)

const cacheUsage = "usage: swiftctl cache build|check|show [flags] (-h for a subcommand's flags)"

// cmdCache is `swiftctl cache build|check|show`: the node's verbs cache.
// check returns an error (exit 1) when the cache is not valid.
func cmdCache(ctx context.Context, w io.Writer, args []string) error {
	if len(args) < 1 {
		return fmt.Errorf("%s: %w", cacheUsage, errdefs.ErrInvalidArgument)
	}
	switch args[0] {
	case "build":
		return cacheBuild(ctx, w, args[1:])
	case "check":
		return cacheCheck(w, args[1:])
	case "show":
		return cacheShow(w, args[1:])
	}
	return fmt.Errorf("unknown cache command %q; %s: %w", args[0], cacheUsage, errdefs.ErrInvalidArgument)
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

func cacheBuild(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("cache build", flag.ContinueOnError)
	cfgPath := fs.String("config", config.PathFromEnv(), "node config (state_dir, rdma.sys_root, zygote.bin_dir)")
	runs := fs.Int("runs", 10, "profiling runs per path, a fresh process each")
	device := fs.String("device", "", "device the control-plane sequence runs on (default: the first)")
	libDir := fs.String("lib-dir", "", "directory with swift-profile and libswiftverbs.so (default: next to swiftctl, then zygote.bin_dir)")
	confDir := fs.String("config-dir", verbs.DefaultConfigDir, "the node's libibverbs provider config directory")
	noCached := fs.Bool("no-cached", false, "do not profile the cached path (it needs root)")
	chart := fs.String("chart", "", "also write the per-call stock/cached medians as an SVG chart to this file")
	asJSON := fs.Bool("json", false, "print the manifest as JSON")
	quiet := fs.Bool("quiet", false, "do not show the profiler's progress")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: %w", fs.Args(), errdefs.ErrInvalidArgument)
	}
	c, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	dirs := libDirs(*libDir, c)
	prof, err := verbs.FindBinary(verbs.ProfilerBinary, dirs...)
	if err != nil {
		return err
	}
	pre, err := verbs.FindBinary(verbs.PreloadBinary, dirs...)
	if err != nil {
		return err
	}
	var log io.Writer = os.Stderr
	if *quiet {
		log = nil
	}
	res, err := verbs.Build(ctx, verbs.BuildOptions{
		StateDir: c.StateDir, Sources: verbs.Sources{SysRoot: c.RDMA.SysRoot},
		Profiler: prof, Preload: pre, ConfigDir: *confDir, Runs: *runs, Device: *device,
		MeasureCached: !*noCached, System: rdmaSystem, Log: log,
	})
	if err != nil {
		return fmt.Errorf("verbs cache build: %w", err)
	}
	if *chart != "" {
		if err := writeCacheChart(*chart, res.Manifest); err != nil {
			return err
		}
	}
	if *asJSON {
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

// errCacheNotValid makes `swiftctl cache check` exit 1.
var errCacheNotValid = errors.New("verbs cache not valid")

func cacheCheck(w io.Writer, args []string) error {
	fs := flag.NewFlagSet("cache check", flag.ContinueOnError)
	cfgPath := fs.String("config", config.PathFromEnv(), "node config")
	asJSON := fs.Bool("json", false, `print {"state", "reasons", "dir"}`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	r := verbs.Check(cacheNode(c))
	if *asJSON {
		if err := writeJSON(w, map[string]any{"state": r.State, "reasons": r.Reasons, "dir": r.Dir}); err != nil {
			return err
		}
	} else if r.Valid() {
		fmt.Fprintf(w, "valid: %s\n", r.Dir)
	} else {
		fmt.Fprintf(w, "%s: %s\n", r.State, r.Why())
	}
	if !r.Valid() {
		return fmt.Errorf("%w (%s)", errCacheNotValid, r.State)
	}
	return nil
}

func cacheShow(w io.Writer, args []string) error {
	fs := flag.NewFlagSet("cache show", flag.ContinueOnError)
	cfgPath := fs.String("config", config.PathFromEnv(), "node config")
	asJSON := fs.Bool("json", false, "print the manifest as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	r := verbs.Check(cacheNode(c))
	if r.Manifest == nil {
		return fmt.Errorf("no verbs cache to show: %s: %w", r.Why(), errdefs.ErrNotFound)
	}
	if *asJSON {
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

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
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
	fmt.Fprintf(w, "  %-22s %12s %12s\n", "call (median)", "stock ms", "cached ms")
	for _, c := range append(append([]string{}, verbs.Calls...), "init", "critical", "process") {
		s, ok := p.StockUS[c]
		if !ok {
			continue
		}
		cached := "-"
		if v, ok := p.CachedUS[c]; ok {
			cached = fmt.Sprintf("%.3f", v/1000)
		}
		fmt.Fprintf(w, "  %-22s %12.3f %12s\n", c, s/1000, cached)
	}
	if p.Speedup > 0 {
		fmt.Fprintf(w, "speedup (critical path): %.2fx\n", p.Speedup)
	} else if p.CachedNote != "" {
		fmt.Fprintf(w, "%s\n", p.CachedNote)
	}
}
