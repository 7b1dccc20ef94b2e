package vm

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/swift-rdma/swift-containerd/verbs"
)

// The verbs cache scenarios (guest/verbs.sh); vm_test.go checks them with
// checkVerbs (verbs_test.go).
const (
	ScenarioVerbs           = "verbs"
	ScenarioVerbsInvalidate = "verbs-invalidate"
	ScenarioVerbsBench      = "verbs-bench"
)

// VerbsTargetSpeedup is the target for verbs.speedup.
const VerbsTargetSpeedup = 5

// VerbsBenchKeys turns the two verbs-bench profiles (stock and cached
// containers, same boot) into bench.json keys: verbs.stock_ms and
// verbs.cached_ms (median control-plane critical path), verbs.speedup, and
// verbs.calls.{stock,cached}.<call>_ms per call (preload_init_ms is the
// library's validation: as a provider entry it is spent inside
// ibv_get_device_list, so it is part of that call's time, not added),
// verbs.never_cached.{stock,cached}_ms (the sum of verbs.NeverCached) and
// verbs.speedup_ceiling (stock over the cached never-cached sum).
func VerbsBenchKeys(stock, cached verbs.Profile) (map[string]any, error) {
	ms, mc := stock.Medians(), cached.Medians()
	if ms["critical"] <= 0 || mc["critical"] <= 0 {
		return nil, fmt.Errorf("no completed runs (stock %d, cached %d)", len(stock.Runs), len(cached.Runs))
	}
	kv := map[string]any{
		"verbs.runs":        len(stock.Runs) - len(stock.Failed()),
		"verbs.cached_runs": len(cached.Runs) - len(cached.Failed()),
		"verbs.speedup":     ms["critical"] / mc["critical"],
	}
	medianKeys(kv, "stock", ms)
	medianKeys(kv, "cached", mc)
	// The floor: calls no cache may answer. stock over the cached path's
	// floor is the speed-up a cache that made everything else free would
	// reach in this run.
	var floorStock, floorCached float64
	for _, c := range verbs.NeverCached {
		floorStock += ms[c] / 1000
		floorCached += mc[c] / 1000
	}
	kv["verbs.never_cached.stock_ms"] = floorStock
	kv["verbs.never_cached.cached_ms"] = floorCached
	if floorCached > 0 {
		kv["verbs.speedup_ceiling"] = ms["critical"] / 1000 / floorCached
	}
	return kv, nil
}

// VerbsModeKeys adds one more measured mode p as verbs.<mode>_ms,
// verbs.<mode>_speedup (verbs.stock_ms over it, when kv has that),
// verbs.process.<mode>_ms and verbs.calls.<mode>.*: "trimmed" (a
// swift.io/verbs=trimmed container: provider trimming alone), "bindnow"
// (the same with LD_BIND_NOW=1) and "static"
// (swift-profile-static: every provider linked in, none loaded: what no
// provider-loading optimization can beat). Nothing when p has no
// completed run.
func VerbsModeKeys(kv map[string]any, mode string, p verbs.Profile) {
	m := p.Medians()
	if m["critical"] <= 0 {
		return
	}
	medianKeys(kv, mode, m)
	if stock, ok := kv["verbs.stock_ms"].(float64); ok {
		kv["verbs."+mode+"_speedup"] = stock / (m["critical"] / 1000)
	}
}

// medianKeys writes one mode's medians (µs, from Profile.Medians) in ms:
// verbs.<mode>_ms (the critical path), verbs.process.<mode>_ms and
// verbs.calls.<mode>.<call>_ms for preload_init and every call.
func medianKeys(kv map[string]any, mode string, m map[string]float64) {
	kv["verbs."+mode+"_ms"] = m["critical"] / 1000
	kv["verbs.process."+mode+"_ms"] = m["process"] / 1000
	kv["verbs.calls."+mode+".preload_init_ms"] = m["init"] / 1000
	for _, c := range verbs.Calls {
		kv["verbs.calls."+mode+"."+c+"_ms"] = m[c] / 1000
	}
}

// VerbsNoASLRKeys adds the same keys as VerbsBenchKeys and VerbsModeKeys
// under verbs.noaslr. for the runs made without address space
// randomization (swift-profile --no-aslr): verbs.noaslr.stock_ms,
// verbs.noaslr.cached_ms, verbs.noaslr.speedup, verbs.noaslr.calls.*, ...
// Under TCG a randomized process translates all the library code it runs
// anew; these runs reuse the translations, as a real CPU has none to make.
func VerbsNoASLRKeys(kv map[string]any, stock, cached, trimmed, static verbs.Profile) error {
	nk, err := VerbsBenchKeys(stock, cached)
	if err != nil {
		return fmt.Errorf("without address space randomization: %w", err)
	}
	VerbsModeKeys(nk, "trimmed", trimmed)
	VerbsModeKeys(nk, "static", static)
	putNoASLR(kv, nk)
	return nil
}

// putNoASLR copies keys made for the runs without address space
// randomization (verbs.X) into kv as verbs.noaslr.X.
func putNoASLR(kv, nk map[string]any) {
	for k, v := range nk {
		kv["verbs.noaslr."+strings.TrimPrefix(k, "verbs.")] = v
	}
}

// VerbsBindNowKeys adds the trimmed list with eager binding
// (LD_BIND_NOW=1: every symbol of the program and its libraries bound at
// load, none through the lazy resolver) as verbs.bindnow_* and
// verbs.noaslr.bindnow_*, like VerbsModeKeys; kv must already hold
// verbs.stock_ms and verbs.noaslr.stock_ms.
func VerbsBindNowKeys(kv map[string]any, aslr, noASLR verbs.Profile) error {
	if _, ok := kv["verbs.noaslr.stock_ms"]; !ok {
		return fmt.Errorf("bindnow: no verbs.noaslr.stock_ms to compare with")
	}
	VerbsModeKeys(kv, "bindnow", aslr)
	nk := map[string]any{"verbs.stock_ms": kv["verbs.noaslr.stock_ms"]}
	VerbsModeKeys(nk, "bindnow", noASLR)
	delete(nk, "verbs.stock_ms")
	putNoASLR(kv, nk)
	return nil
}

// VerbsSpawnKeys turns verbs-bench's swift-spawn facts (a program that
// never uses RDMA, run in the cached container as it is and with
// LD_PRELOAD removed; and again with libswiftverbs.so preloaded) into
// verbs.spawn.{plain,with,overhead}_us, verbs.spawn.preload_overhead_us
// and verbs.spawn.overhead_ratio (overhead over preload_overhead), and the
// same under verbs.noaslr.spawn. without address space randomization.
func VerbsSpawnKeys(kv map[string]any, facts map[string]string) error {
	num := func(k string) (float64, error) {
		v, err := strconv.ParseFloat(facts[k], 64)
		if err != nil {
			return 0, fmt.Errorf("fact %s = %q: not a number", k, facts[k])
		}
		return v, nil
	}
	for _, m := range []struct{ fact, pre, key string }{{"spawn_", "spawn_preload_", "verbs.spawn."}, {"spawn_noaslr_", "spawn_preload_noaslr_", "verbs.noaslr.spawn."}} {
		for _, f := range []string{"plain_us", "with_us", "overhead_us"} {
			v, err := num(m.fact + f)
			if err != nil {
				return err
			}
			kv[m.key+f] = v
		}
		p, err := num(m.pre + "overhead_us")
		if err != nil {
			return err
		}
		kv[m.key+"preload_overhead_us"] = p
		if p > 0 {
			kv[m.key+"overhead_ratio"] = kv[m.key+"overhead_us"].(float64) / p
		}
	}
	return nil
}

// WriteVerbsChart draws the per-call medians of VerbsBenchKeys' input;
// trimmed (provider trimming alone) and static (every
// provider linked in) are drawn when they have runs. label is added to the
// title (e.g. "without ASLR").
func WriteVerbsChart(w io.Writer, label string, stock, cached, trimmed, static verbs.Profile) error {
	ms, mc, mt, mst := stock.Medians(), cached.Medians(), trimmed.Medians(), static.Medians()
	conv := func(m map[string]float64) map[string]float64 {
		out := map[string]float64{"critical path": m["critical"] / 1000, "preload init": m["init"] / 1000}
		for _, c := range verbs.Calls {
			out[c] = m[c] / 1000
		}
		return out
	}
	rows := append([]string{"critical path", "preload init"}, verbs.Calls...)
	if label != "" {
		label = ", " + label
	}
	title := fmt.Sprintf("verbs control plane in a container (rxe, qemu%s), median of %d runs: stock %.1f ms, cached %.1f ms (%.1fx)",
		label, len(stock.Runs), ms["critical"]/1000, mc["critical"]/1000, ms["critical"]/mc["critical"])
	series := []verbs.ChartSeries{
		{Name: "stock", Color: "#c0392b", Values: conv(ms)},
		{Name: "cached (swift.io/verbs=cached)", Color: "#27ae60", Values: conv(mc)},
	}
	if mt["critical"] > 0 {
		series = append(series, verbs.ChartSeries{Name: "trimmed (swift.io/verbs=trimmed)", Color: "#7f8c8d", Values: conv(mt)})
	}
	if mst["critical"] > 0 {
		series = append(series, verbs.ChartSeries{Name: "static (every provider linked in, none loaded)", Color: "#2980b9", Values: conv(mst)})
	}
	return verbs.WriteChartSVG(w, title, "ms", rows, series)
}
