package vm

import (
	"fmt"
	"io"
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
// preload's validation, part of the cached critical path),
// verbs.never_cached.{stock,cached}_ms (the sum of verbs.NeverCached) and
// verbs.speedup_ceiling (stock over the cached never-cached sum).
func VerbsBenchKeys(stock, cached verbs.Profile) (map[string]any, error) {
	ms, mc := stock.Medians(), cached.Medians()
	if ms["critical"] <= 0 || mc["critical"] <= 0 {
		return nil, fmt.Errorf("no completed runs (stock %d, cached %d)", len(stock.Runs), len(cached.Runs))
	}
	kv := map[string]any{
		"verbs.runs":                         len(stock.Runs) - len(stock.Failed()),
		"verbs.cached_runs":                  len(cached.Runs) - len(cached.Failed()),
		"verbs.stock_ms":                     ms["critical"] / 1000,
		"verbs.cached_ms":                    mc["critical"] / 1000,
		"verbs.speedup":                      ms["critical"] / mc["critical"],
		"verbs.process.stock_ms":             ms["process"] / 1000,
		"verbs.process.cached_ms":            mc["process"] / 1000,
		"verbs.calls.stock.preload_init_ms":  ms["init"] / 1000,
		"verbs.calls.cached.preload_init_ms": mc["init"] / 1000,
	}
	for _, c := range verbs.Calls {
		kv["verbs.calls.stock."+c+"_ms"] = ms[c] / 1000
		kv["verbs.calls.cached."+c+"_ms"] = mc[c] / 1000
	}
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

// VerbsTrimmedKeys adds the cached container's runs without the preload
// (provider trimming alone): verbs.trimmed_ms and verbs.calls.trimmed.*.
func VerbsTrimmedKeys(kv map[string]any, trimmed verbs.Profile) {
	m := trimmed.Medians()
	if m["critical"] <= 0 {
		return
	}
	kv["verbs.trimmed_ms"] = m["critical"] / 1000
	kv["verbs.process.trimmed_ms"] = m["process"] / 1000
	kv["verbs.calls.trimmed.preload_init_ms"] = m["init"] / 1000
	for _, c := range verbs.Calls {
		kv["verbs.calls.trimmed."+c+"_ms"] = m[c] / 1000
	}
}

// VerbsNoASLRKeys adds the same keys as VerbsBenchKeys and VerbsTrimmedKeys
// under verbs.noaslr. for the runs made without address space
// randomization (swift-profile --no-aslr): verbs.noaslr.stock_ms,
// verbs.noaslr.cached_ms, verbs.noaslr.speedup, verbs.noaslr.calls.*, ...
// Under TCG a randomized process translates all the library code it runs
// anew; these runs reuse the translations, as a real CPU has none to make.
func VerbsNoASLRKeys(kv map[string]any, stock, cached, trimmed verbs.Profile) error {
	nk, err := VerbsBenchKeys(stock, cached)
	if err != nil {
		return fmt.Errorf("without address space randomization: %w", err)
	}
	VerbsTrimmedKeys(nk, trimmed)
	for k, v := range nk {
		kv["verbs.noaslr."+strings.TrimPrefix(k, "verbs.")] = v
	}
	return nil
}

// WriteVerbsChart draws the per-call medians of VerbsBenchKeys' input;
// trimmed (provider trimming without the preload) is drawn when it has runs.
// label is added to the title (e.g. "without ASLR").
func WriteVerbsChart(w io.Writer, label string, stock, cached, trimmed verbs.Profile) error {
	ms, mc, mt := stock.Medians(), cached.Medians(), trimmed.Medians()
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
		series = append(series, verbs.ChartSeries{Name: "trimmed libibverbs.d only (no preload)", Color: "#7f8c8d", Values: conv(mt)})
	}
	return verbs.WriteChartSVG(w, title, "ms", rows, series)
}
