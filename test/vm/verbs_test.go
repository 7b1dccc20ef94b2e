//go:build e2e

package vm

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/swift-rdma/swift-containerd/verbs"
)

// checkVerbs asserts the facts of the verbs cache scenarios; vm_test.go's
// checkScenario calls it for ScenarioVerbs, ScenarioVerbsInvalidate and
// ScenarioVerbsBench (after it has checked the scenario's status).
func checkVerbs(t *testing.T, f map[string]string, dir, name string, benchRuns int) {
	t.Helper()
	want := func(key, val string) {
		t.Helper()
		if f[key] != val {
			t.Errorf("%s: %s = %q, want %q", name, key, f[key], val)
		}
	}
	atLeast := func(key string, min float64) {
		t.Helper()
		v, err := strconv.ParseFloat(f[key], 64)
		if err != nil || v < min {
			t.Errorf("%s: %s = %q, want a number >= %v", name, key, f[key], min)
		}
	}
	switch name {
	case ScenarioVerbs:
		want("check", "valid")
		want("driver_files", "rxe.driver")
		// cached: the trimmed provider list with libswiftverbs.so as a
		// provider entry, nothing preloaded, cached answers through the
		// program's rewritten slots
		want("cached_exit", "0")
		want("cached_ld_preload", "")
		want("cached_cache_env", "")
		want("cached_driver_files", "rxe.driver swiftverbs.driver")
		want("cached_cache_state", "valid")
		want("cached_entry", "provider")
		atLeast("cached_patched_min", 1)
		atLeast("cached_served_min", 1)
		// trimmed: the list alone, no library
		want("trimmed_exit", "0")
		want("trimmed_ld_preload", "")
		want("trimmed_driver_files", "rxe.driver")
		want("trimmed_cache_state", "none")
		want("trimmed_served_min", "0")
		// no swift.io/verbs: the measured default, said in the shim's log
		switch f["default_mode"] {
		case "cached":
			want("default_driver_files", "rxe.driver swiftverbs.driver")
		case "trimmed":
			want("default_driver_files", "rxe.driver")
		default:
			t.Errorf("%s: default_mode = %q, want cached or trimmed", name, f["default_mode"])
		}
		want("default_ld_preload", "")
		atLeast("shim_default_note", 1)
		// stock: the image as it is
		want("stock_exit", "0")
		want("stock_ld_preload", "")
		want("stock_cache_env", "")
		want("stock_cache_state", "none")
		want("stock_served_min", "0")
		if !strings.Contains(" "+f["stock_driver_files"]+" ", " rxe.driver ") || len(strings.Fields(f["stock_driver_files"])) < 2 {
			t.Errorf("%s: stock_driver_files = %q, want the image's full libibverbs.d", name, f["stock_driver_files"])
		}
		for _, p := range []string{"cached", "stock", "trimmed"} {
			want(p+"_devices", "rxe0")
			want(p+"_runs_ok", "3")
			want(p+"_profile_pingpong", "ok")
			want(p+"_rc_client", "yes")
			want(p+"_rc_server_exit", "0")
			if !strings.Contains(f[p+"_rc_pingpong"], "bytes in") {
				t.Errorf("%s: %s_rc_pingpong = %q, want ibv_rc_pingpong's throughput line", name, p, f[p+"_rc_pingpong"])
			}
			for _, c := range []string{"critical", "ibv_get_device_list", "ibv_open_device", "ibv_query_device", "ibv_query_port", "ibv_create_qp", "ibv_modify_qp_rtr"} {
				atLeast(p+"_"+c+"_us", 0.1)
			}
		}
		// error-triggered revalidation: served a wrong max_sge, ibv_create_qp
		// fails for both QPs, the device is re-queried once, both retried with
		// the real limit, one log line, the pingpong works
		want("reval_exit", "0")
		want("reval_cache_state", "stale")
		want("reval_served", "1")
		want("reval_revalidations", "1")
		want("reval_retries", "2")
		want("reval_pingpong", "ok")
		want("reval_log", "1")
		if mx, n := atoiOr(f["reval_max_sge"]), atoiOr(f["reval_qp_send_sge"]); n <= 0 || n*2 > mx {
			t.Errorf("%s: QPs got %d send SGEs with a cached max_sge of %d, want at most half (the real limit)", name, n, mx)
		}
		// a setuid verbs program ignores a caller's forged sysfs root;
		// an ordinary one obeys it (so the check can tell)
		want("forged_plain_cache_state", "stale")
		want("forged_suid_exit", "0")
		want("forged_suid_cache_state", "valid")
		want("forged_suid_entry", "provider")
		t.Logf("%s: critical path stock %s µs, cached %s µs (3 runs each; verbs-bench measures properly)",
			name, f["stock_critical_us"], f["cached_critical_us"])
	case ScenarioVerbsInvalidate:
		want("check_initial", "valid")
		want("host_devices", "rxe0 rxe1")
		// a device added: stale with the reason, new containers run stock and see it
		want("check_after_add", "stale: device rxe1 (uverbs1) added")
		want("check_after_add_exit", "1")
		want("new_ld_preload", "")
		want("new_devices", "rxe0 rxe1")
		want("new_cached_ld_preload", "")
		want("new_cached_devices", "rxe0 rxe1")
		atLeast("shim_warned", 2)
		// a container started with the old cache: the preload finds it stale
		// and says so once; it lists rxe0 only because its /dev holds only
		// the device nodes it was created with
		want("old_exec_exit", "0")
		want("old_devices", "rxe0")
		want("old_cache_state", "stale")
		want("old_profile_exit", "0")
		want("old_log", "1")
		// rebuilt: valid, both devices
		want("check_rebuilt", "valid")
		want("rebuilt_devices", "rxe0 rxe1")
		want("rebuilt_cache_state", "valid")
		// rxe1 registered again with the same name, number and GUID: only
		// the registration (the class entry's inode) tells; both the check
		// and the preload of a container started before say so
		want("rereg_same_numbers_and_guid", "yes")
		want("check_after_rereg", "stale: device rxe1 (uverbs1) was registered again since the cache was built")
		want("check_after_rereg_exit", "1")
		want("rereg_exec_exit", "0")
		want("rereg_cache_state", "stale")
		want("rereg_profile_exit", "0")
		want("rereg_devices", "rxe0 rxe1")
		want("rereg_log", "1")
		want("check_rebuilt_rereg", "valid")
		// a device the cache knows removed: no crash, right list, one clear line
		want("check_after_remove", "stale: device rxe1 (uverbs1) removed")
		want("check_after_remove_exit", "1")
		want("removed_exec_exit", "0")
		want("removed_devices", "rxe0")
		want("removed_cache_state", "stale")
		want("removed_profile_exit", "0")
		want("removed_log", "1")
	case ScenarioVerbsBench:
		runs, _ := strconv.Atoi(f["runs"])
		if runs != benchRuns {
			t.Errorf("%s: %d runs, want %d (SWIFT_VM_BENCH_RUNS)", name, runs, benchRuns)
		}
		atLeast("stock_n", float64(runs))
		atLeast("cached_n", float64(runs))
		want("stock_cache_state", "none")
		want("cached_cache_state", "valid")
		stock, err1 := readProfile(filepath.Join(dir, "verbs-bench-stock.prof"))
		cached, err2 := readProfile(filepath.Join(dir, "verbs-bench-cached.prof"))
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: raw profiles: %v, %v", name, err1, err2)
		}
		kv, err := VerbsBenchKeys(stock, cached)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		trimmed, err := readProfile(filepath.Join(dir, "verbs-bench-trimmed.prof"))
		if err != nil {
			t.Errorf("%s: trimmed profile: %v", name, err)
		}
		VerbsModeKeys(kv, "trimmed", trimmed)
		static, err := readProfile(filepath.Join(dir, "verbs-bench-static.prof"))
		if err != nil {
			t.Errorf("%s: static profile: %v", name, err)
		}
		VerbsModeKeys(kv, "static", static)
		// report logs the keys under prefix (verbs. or verbs.noaslr.) and
		// fails unless the cached path beats stock.
		report := func(prefix, label string) {
			sp := kv[prefix+"speedup"].(float64)
			t.Logf("%s%s: critical path stock %.1f ms, cached %.1f ms, speedup %.2fx (target %dx: met %v; ceiling %.2fx, never-cached calls %.1f ms); ibv_get_device_list %.1f -> %.1f ms; preload init %.2f ms; trimmed only %v ms",
				name, label, kv[prefix+"stock_ms"], kv[prefix+"cached_ms"], sp, VerbsTargetSpeedup, sp >= VerbsTargetSpeedup,
				kv[prefix+"speedup_ceiling"], kv[prefix+"never_cached.cached_ms"],
				kv[prefix+"calls.stock.ibv_get_device_list_ms"], kv[prefix+"calls.cached.ibv_get_device_list_ms"],
				kv[prefix+"calls.cached.preload_init_ms"], kv[prefix+"trimmed_ms"])
			t.Logf("%s%s: static (every provider linked in, none loaded) %v ms (stock over it %v), ibv_get_device_list %v ms",
				name, label, kv[prefix+"static_ms"], kv[prefix+"static_speedup"], kv[prefix+"calls.static.ibv_get_device_list_ms"])
			if sp <= 1 {
				t.Errorf("%s%s: the cached path is not faster (speedup %.2f)", name, label, sp)
			}
		}
		report("verbs.", "")
		// The same three paths without address space randomization.
		for _, p := range []string{"stock", "cached", "trimmed", "static"} {
			want(p+"_aslr", "on")
			want(p+"_noaslr_aslr", "off")
			atLeast(p+"_noaslr_n", float64(runs))
		}
		atLeast("static_n", float64(runs))
		want("static_cache_state", "none")
		want("stock_noaslr_cache_state", "none")
		want("cached_noaslr_cache_state", "valid")
		var np [4]verbs.Profile
		for i, p := range []string{"stock", "cached", "trimmed", "static"} {
			if np[i], err = readProfile(filepath.Join(dir, "verbs-bench-"+p+"-noaslr.prof")); err != nil {
				t.Errorf("%s: %s profile without ASLR: %v", name, p, err)
			}
		}
		if err := VerbsNoASLRKeys(kv, np[0], np[1], np[2], np[3]); err != nil {
			t.Errorf("%s: %v", name, err)
		} else {
			report("verbs.noaslr.", " without ASLR")
		}
		// Toward the bound: the trimmed list with eager binding
		// (LD_BIND_NOW=1), against trimmed and static.
		for _, a := range []string{"", "_noaslr"} {
			atLeast("bindnow"+a+"_n", float64(runs))
			want("bindnow"+a+"_cache_state", "none")
		}
		bn, err1 := readProfile(filepath.Join(dir, "verbs-bench-bindnow.prof"))
		bnn, err2 := readProfile(filepath.Join(dir, "verbs-bench-bindnow-noaslr.prof"))
		if err1 != nil || err2 != nil {
			t.Errorf("%s: bindnow profiles: %v, %v", name, err1, err2)
		} else if err := VerbsBindNowKeys(kv, bn, bnn); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		for _, p := range []string{"verbs.", "verbs.noaslr."} {
			sp, _ := kv[p+"speedup"].(float64)
			st, _ := kv[p+"static_speedup"].(float64)
			t.Logf("%s: %sspeedup %.2f, trimmed %v, bindnow %v, static %.2f (0.8 x static = %.2f: cached met %v)", name, p, sp,
				kv[p+"trimmed_speedup"], kv[p+"bindnow_speedup"], st, 0.8*st, sp >= 0.8*st)
		}
		// What the cache costs a program that never uses RDMA: as the
		// cached container runs it (nothing preloaded), and with the
		// library preloaded as it was before it became a provider entry.
		want("spawn_aslr", "on")
		want("spawn_noaslr_aslr", "off")
		want("spawn_preload", "none")
		want("spawn_preload_preload", "/.swift/verbs/libswiftverbs.so")
		if err := VerbsSpawnKeys(kv, f); err != nil {
			t.Errorf("%s: %v", name, err)
		} else {
			for _, p := range []string{"verbs.", "verbs.noaslr."} {
				t.Logf("%s: a program without RDMA (true, dynamically linked)%s: %.0f us plain, %.0f us in the cached container (%+.0f us); %+.0f us with the library preloaded; ratio %.3f",
					name, map[string]string{"verbs.": "", "verbs.noaslr.": " without ASLR"}[p], kv[p+"spawn.plain_us"], kv[p+"spawn.with_us"], kv[p+"spawn.overhead_us"],
					kv[p+"spawn.preload_overhead_us"], kv[p+"spawn.overhead_ratio"])
			}
		}
		if out := os.Getenv("SWIFT_BENCH_OUT"); out != "" && !t.Failed() {
			kv["verbs.chart"] = filepath.Join(filepath.Dir(out), "verbs.svg")
			kv["verbs.noaslr.chart"] = filepath.Join(filepath.Dir(out), "verbs-noaslr.svg")
			kv["verbs.target_speedup"] = VerbsTargetSpeedup
			if err := mergeJSON(out, kv); err != nil {
				t.Errorf("write %s: %v", out, err)
			}
			writeChart(t, kv["verbs.chart"].(string), "", stock, cached, trimmed, static)
			writeChart(t, kv["verbs.noaslr.chart"].(string), "without ASLR", np[0], np[1], np[2], np[3])
			t.Logf("verbs bench -> %s, charts %s, %s", out, kv["verbs.chart"], kv["verbs.noaslr.chart"])
		}
	}
	if t.Failed() {
		t.Logf("%s facts: %v", name, f)
	}
}

// writeChart writes WriteVerbsChart's SVG to path.
func writeChart(t *testing.T, path, label string, stock, cached, trimmed, static verbs.Profile) {
	t.Helper()
	cf, err := os.Create(path)
	if err == nil {
		err = WriteVerbsChart(cf, label, stock, cached, trimmed, static)
		if cerr := cf.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Errorf("write %s: %v", path, err)
	}
}

func atoiOr(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

func readProfile(path string) (verbs.Profile, error) {
	fh, err := os.Open(path)
	if err != nil {
		return verbs.Profile{}, err
	}
	defer fh.Close()
	return verbs.ParseProfile(fh)
}

// TestVerbsBenchKeys checks the bench keys and chart from canned profiles
// (no VM needed).
func TestVerbsBenchKeys(t *testing.T) {
	line := func(crit, gdl string, cache string) string {
		s := "run=0 exit=0 process_us=100000.0 cache=" + cache + " served=1 init_us=100.0"
		for _, c := range verbs.Calls {
			v := "1000.0"
			if c == "ibv_get_device_list" {
				v = gdl
			}
			s += " " + c + "_us=" + v
		}
		return s + " critical_us=" + crit + " pingpong=ok device=rxe0 ndev=1\n"
	}
	stock, _ := verbs.ParseProfile(strings.NewReader(line("300000.0", "289000.0", "none") + line("200000.0", "189000.0", "none") + line("250000.0", "239000.0", "none")))
	cached, _ := verbs.ParseProfile(strings.NewReader(line("50000.0", "39000.0", "valid") + line("40000.0", "29000.0", "valid") + line("60000.0", "49000.0", "valid")))
	kv, err := VerbsBenchKeys(stock, cached)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{
		"verbs.stock_ms": 250, "verbs.cached_ms": 50, "verbs.speedup": 5,
		"verbs.calls.stock.ibv_get_device_list_ms": 239, "verbs.calls.cached.ibv_get_device_list_ms": 39,
		"verbs.calls.cached.preload_init_ms": 0.1, "verbs.calls.stock.ibv_modify_qp_rts_ms": 1,
		"verbs.never_cached.stock_ms": 8, "verbs.never_cached.cached_ms": 8, "verbs.speedup_ceiling": 31.25,
	} {
		if got, ok := kv[k].(float64); !ok || got != want {
			t.Errorf("%s = %v, want %v", k, kv[k], want)
		}
	}
	for _, c := range verbs.Calls {
		for _, p := range []string{"stock", "cached"} {
			if _, ok := kv["verbs.calls."+p+"."+c+"_ms"]; !ok {
				t.Errorf("no verbs.calls.%s.%s_ms", p, c)
			}
		}
	}
	if _, err := VerbsBenchKeys(verbs.Profile{}, cached); err == nil {
		t.Error("VerbsBenchKeys(no stock runs): want error")
	}
	var b strings.Builder
	if err := WriteVerbsChart(&b, "", stock, cached, verbs.Profile{}, verbs.Profile{}); err != nil || !strings.Contains(b.String(), "5.0x") ||
		strings.Contains(b.String(), "trimmed") || strings.Contains(b.String(), "static") {
		t.Errorf("chart: %v %.200s", err, b.String())
	}
	VerbsModeKeys(kv, "trimmed", cached)
	VerbsModeKeys(kv, "static", stock)
	VerbsModeKeys(kv, "none", verbs.Profile{})
	if kv["verbs.trimmed_ms"] != 50.0 || kv["verbs.calls.trimmed.ibv_get_device_list_ms"] != 39.0 ||
		kv["verbs.static_ms"] != 250.0 || kv["verbs.process.static_ms"] != 100.0 ||
		kv["verbs.static_speedup"] != 1.0 || kv["verbs.trimmed_speedup"] != 5.0 {
		t.Errorf("mode keys: %v %v %v %v", kv["verbs.trimmed_ms"], kv["verbs.calls.trimmed.ibv_get_device_list_ms"],
			kv["verbs.static_ms"], kv["verbs.process.static_ms"])
	}
	if _, ok := kv["verbs.none_ms"]; ok {
		t.Error("a mode without runs got keys")
	}
	b.Reset()
	if err := WriteVerbsChart(&b, "without ASLR", stock, cached, cached, stock); err != nil || !strings.Contains(b.String(), "trimmed") ||
		!strings.Contains(b.String(), "qemu, without ASLR)") || !strings.Contains(b.String(), "static (every provider") {
		t.Errorf("chart with trimmed: %v", err)
	}
	if err := VerbsNoASLRKeys(kv, cached, stock, cached, stock); err != nil {
		t.Fatal(err)
	}
	if kv["verbs.noaslr.stock_ms"] != 50.0 || kv["verbs.noaslr.cached_ms"] != 250.0 || kv["verbs.noaslr.speedup"] != 0.2 ||
		kv["verbs.noaslr.trimmed_ms"] != 50.0 || kv["verbs.noaslr.calls.cached.ibv_get_device_list_ms"] != 239.0 ||
		kv["verbs.noaslr.static_ms"] != 250.0 || kv["verbs.stock_ms"] != 250.0 {
		t.Errorf("noaslr keys: %v %v %v %v %v", kv["verbs.noaslr.stock_ms"], kv["verbs.noaslr.cached_ms"], kv["verbs.noaslr.speedup"],
			kv["verbs.noaslr.trimmed_ms"], kv["verbs.noaslr.calls.cached.ibv_get_device_list_ms"])
	}
	facts := map[string]string{"spawn_plain_us": "1000.5", "spawn_with_us": "1010.5", "spawn_overhead_us": "10",
		"spawn_noaslr_plain_us": "900", "spawn_noaslr_with_us": "890", "spawn_noaslr_overhead_us": "-10",
		"spawn_preload_overhead_us": "200", "spawn_preload_noaslr_overhead_us": "50"}
	if err := VerbsSpawnKeys(kv, facts); err != nil || kv["verbs.spawn.overhead_us"] != 10.0 || kv["verbs.spawn.plain_us"] != 1000.5 ||
		kv["verbs.noaslr.spawn.with_us"] != 890.0 || kv["verbs.spawn.preload_overhead_us"] != 200.0 ||
		kv["verbs.spawn.overhead_ratio"] != 0.05 || kv["verbs.noaslr.spawn.overhead_ratio"] != -0.2 {
		t.Errorf("spawn keys: %v %v %v %v %v %v %v", err, kv["verbs.spawn.overhead_us"], kv["verbs.spawn.plain_us"], kv["verbs.noaslr.spawn.with_us"],
			kv["verbs.spawn.preload_overhead_us"], kv["verbs.spawn.overhead_ratio"], kv["verbs.noaslr.spawn.overhead_ratio"])
	}
	if err := VerbsBindNowKeys(kv, stock, cached); err != nil || kv["verbs.bindnow_ms"] != 250.0 || kv["verbs.noaslr.bindnow_ms"] != 50.0 ||
		kv["verbs.noaslr.bindnow_speedup"] != 1.0 || kv["verbs.stock_ms"] != 250.0 {
		t.Errorf("bindnow keys: %v %v %v %v", err, kv["verbs.bindnow_ms"], kv["verbs.noaslr.bindnow_ms"], kv["verbs.noaslr.bindnow_speedup"])
	}
	if err := VerbsBindNowKeys(map[string]any{}, stock, cached); err == nil {
		t.Error("VerbsBindNowKeys without verbs.noaslr.stock_ms: no error")
	}
	facts["spawn_noaslr_overhead_us"] = ""
	if err := VerbsSpawnKeys(kv, facts); err == nil || !strings.Contains(err.Error(), "spawn_noaslr_overhead_us") {
		t.Errorf("VerbsSpawnKeys(missing fact) = %v, want an error naming it", err)
	}
	if err := VerbsNoASLRKeys(kv, verbs.Profile{}, cached, cached, cached); err == nil || !strings.Contains(err.Error(), "without address space randomization") {
		t.Errorf("VerbsNoASLRKeys(no stock runs) = %v, want an error naming the mode", err)
	}
}

// TestInvokeChart draws the invoke chart from literal figures, and refuses
// figures that are missing.
func TestInvokeChart(t *testing.T) {
	kv := map[string]any{
		"invoke.http_us": 43603.0, "invoke.http_p99_us": 48995.0, "invoke.inpod_us": 42246.0, "invoke.inpod_p99_us": 45028.0,
		"invoke.warm_us": 20426.0, "invoke.warm_p99_us": 38924.0, "invoke.exec_us": 759935.0, "invoke.exec_p99_us": 1249666.0,
		"invoke.ratio": 1.0321, "invoke.exec_over_http": 17.43,
	}
	var b strings.Builder
	if err := WriteInvokeChart(&b, kv); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"HTTP / swift-run 1.03, exec / HTTP 17.4", "HTTP /run (swift-gateway)", "ctr task exec ... swift-run", "<svg"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	delete(kv, "invoke.warm_p99_us")
	if err := WriteInvokeChart(&b, kv); err == nil || !strings.Contains(err.Error(), "invoke.warm_p99_us") {
		t.Errorf("a missing figure: %v", err)
	}
}
