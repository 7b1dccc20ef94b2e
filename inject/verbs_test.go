package inject

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/verbs"
)

const testCache = "/var/lib/swift/verbs/0123456789abcdef-x"

var verbsRO = []string{"rbind", "ro", "nosuid", "nodev"}

func verbsMounts() []specs.Mount {
	return verbsMountsOf("libibverbs-cached.d")
}

func verbsMountsOf(list string) []specs.Mount {
	return []specs.Mount{
		{Destination: VerbsDir, Type: "bind", Source: testCache, Options: verbsRO},
		{Destination: "/etc/libibverbs.d", Type: "bind", Source: testCache + "/" + list, Options: verbsRO},
	}
}

func verbsSpec(env []string, mounts ...specs.Mount) *specs.Spec {
	return &specs.Spec{Process: &specs.Process{Args: []string{"/bin/app"}, Env: env}, Mounts: mounts}
}

func specJSON(s *specs.Spec) string {
	b, _ := json.MarshalIndent(s, "", "  ")
	return string(b)
}

func TestVerbsModify(t *testing.T) {
	proc := specs.Mount{Destination: "/proc", Type: "proc", Source: "proc"}
	userConf := specs.Mount{Destination: "/etc/libibverbs.d", Type: "bind", Source: "/mine", Options: []string{"rbind", "ro"}}
	cases := []struct {
		name string
		mod  Verbs
		in   func() *specs.Spec
		want *specs.Spec
	}{
		{
			name: "plain image, cached: the list with the provider entry, nothing preloaded",
			mod:  Verbs{CacheDir: testCache, Mode: VerbsCached},
			in:   func() *specs.Spec { return verbsSpec([]string{"PATH=/bin"}, proc) },
			want: verbsSpec([]string{"PATH=/bin"}, append([]specs.Mount{proc}, verbsMounts()...)...),
		},
		{
			name: "plain image, trimmed: the list alone",
			mod:  Verbs{CacheDir: testCache, Mode: VerbsTrimmed},
			in:   func() *specs.Spec { return verbsSpec([]string{"PATH=/bin"}, proc) },
			want: verbsSpec([]string{"PATH=/bin"}, append([]specs.Mount{proc}, verbsMountsOf("libibverbs.d")...)...),
		},
		{
			name: "image preloads something: left as it is",
			mod:  Verbs{CacheDir: testCache, Mode: VerbsCached},
			in:   func() *specs.Spec { return verbsSpec([]string{"LD_PRELOAD=/usr/lib/libjemalloc.so"}) },
			want: verbsSpec([]string{"LD_PRELOAD=/usr/lib/libjemalloc.so"}, verbsMounts()...),
		},
		{
			name: "tuning env, the image's value wins",
			mod:  Verbs{CacheDir: testCache, Mode: VerbsCached, Env: map[string]string{"MLX5_STALL_CQ_POLL": "0", "MLX5_OTHER": "1"}},
			in:   func() *specs.Spec { return verbsSpec([]string{"MLX5_STALL_CQ_POLL=1"}) },
			want: verbsSpec([]string{"MLX5_STALL_CQ_POLL=1", "MLX5_OTHER=1"}, verbsMounts()...),
		},
		{
			name: "user's own libibverbs.d mount is kept",
			mod:  Verbs{CacheDir: testCache, Mode: VerbsTrimmed},
			in:   func() *specs.Spec { return verbsSpec(nil, userConf) },
			want: verbsSpec(nil, userConf, verbsMounts()[0]),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.in()
			if err := tc.mod.Modify(s); err != nil {
				t.Fatalf("Modify: %v", err)
			}
			if !reflect.DeepEqual(s, tc.want) {
				t.Fatalf("Modify:\n got %s\nwant %s", specJSON(s), specJSON(tc.want))
			}
			// idempotent: applying it again changes nothing
			if err := tc.mod.Modify(s); err != nil {
				t.Fatalf("second Modify: %v", err)
			}
			if !reflect.DeepEqual(s, tc.want) {
				t.Fatalf("second Modify changed the spec:\n got %s\nwant %s", specJSON(s), specJSON(tc.want))
			}
			// and through Apply, as the shim runs it
			s2 := tc.in()
			if err := Apply(s2, []Modifier{tc.mod, tc.mod}); err != nil || !reflect.DeepEqual(s2, tc.want) {
				t.Fatalf("Apply twice: %v\n%s", err, specJSON(s2))
			}
		})
	}
}

func TestVerbsModifyErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		mod Verbs
		in  *specs.Spec
	}{
		"no process":   {Verbs{CacheDir: testCache, Mode: VerbsCached}, &specs.Spec{}},
		"no cache dir": {Verbs{Mode: VerbsCached}, verbsSpec(nil)},
		"relative dir": {Verbs{CacheDir: "var/lib/swift", Mode: VerbsCached}, verbsSpec(nil)},
		"no mode":      {Verbs{CacheDir: testCache}, verbsSpec(nil)},
		"stock mode":   {Verbs{CacheDir: testCache, Mode: VerbsStock}, verbsSpec(nil)},
	} {
		err := tc.mod.Modify(tc.in)
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: Modify = %v, want InvalidArgument", name, err)
		}
	}
	if (Verbs{}).Name() != "verbs" {
		t.Error("Name")
	}
}

// TestVerbsModeSwitch: a Create retried with another mode (the node's
// default changed by a rebuild in between) ends with one driver list, the
// new one.
func TestVerbsModeSwitch(t *testing.T) {
	s := verbsSpec(nil)
	if err := (Verbs{CacheDir: testCache, Mode: VerbsCached}).Modify(s); err != nil {
		t.Fatal(err)
	}
	if err := (Verbs{CacheDir: testCache, Mode: VerbsTrimmed}).Modify(s); err != nil {
		t.Fatal(err)
	}
	if want := verbsSpec(nil, verbsMountsOf("libibverbs.d")...); !reflect.DeepEqual(s, want) {
		t.Fatalf("got %s\nwant %s", specJSON(s), specJSON(want))
	}
}

func TestDecideVerbs(t *testing.T) {
	m := &verbs.Manifest{Env: map[string]string{"MLX5_STALL_CQ_POLL": "0"},
		Profile: verbs.ProfileSummary{DefaultMode: "trimmed", DefaultWhy: "measured at build: cached 7.10 ms, trimmed 5.80 ms: trimmed is faster"}}
	mc := &verbs.Manifest{Env: map[string]string{"MLX5_STALL_CQ_POLL": "0"},
		Profile: verbs.ProfileSummary{DefaultMode: "cached", DefaultWhy: "measured at build: cached 5.00 ms, trimmed 5.80 ms: cached is faster"}}
	valid := verbs.Result{State: verbs.StateValid, Dir: testCache, Manifest: m}
	validCached := verbs.Result{State: verbs.StateValid, Dir: testCache, Manifest: mc}
	stale := verbs.Result{State: verbs.StateStale, Dir: testCache, Manifest: m, Reasons: []string{"device rxe1 (uverbs1) added"}}
	missing := verbs.Result{State: verbs.StateMissing, Reasons: []string{"no verbs cache built on this node (swiftctl cache build)"}}
	invalid := verbs.Result{State: verbs.StateInvalid, Dir: testCache, Reasons: []string{"snapshot.bin does not match the manifest"}}
	cached := &Verbs{CacheDir: testCache, Mode: "cached", Env: map[string]string{"MLX5_STALL_CQ_POLL": "0"}}
	trimmed := &Verbs{CacheDir: testCache, Mode: "trimmed", Env: map[string]string{"MLX5_STALL_CQ_POLL": "0"}}
	cases := []struct {
		name      string
		requested string
		cache     verbs.Result
		mode      string
		mod       *Verbs
		warn      []string // substrings; none means no warning
		note      string
	}{
		{"default, valid cache measured trimmed", "", valid, VerbsTrimmed, trimmed, nil,
			"verbs: trimmed, the node's default (measured at build: cached 7.10 ms, trimmed 5.80 ms: trimmed is faster)"},
		{"default, valid cache measured cached", "", validCached, VerbsCached, cached, nil,
			"verbs: cached, the node's default (measured at build: cached 5.00 ms, trimmed 5.80 ms: cached is faster)"},
		{"cached, valid cache", "cached", valid, VerbsCached, cached, nil, ""},
		{"trimmed, valid cache", "trimmed", validCached, VerbsTrimmed, trimmed, nil, ""},
		{"stock, valid cache", "stock", valid, VerbsStock, nil, nil, ""},
		{"stock, no cache", "stock", missing, VerbsStock, nil, nil, ""},
		{"stock, broken cache", "stock", invalid, VerbsStock, nil, nil, ""},
		{"default, no cache", "", missing, VerbsStock, nil, []string{"the default mode but", "is missing", "swiftctl cache build", "running stock"}, ""},
		{"cached, no cache", "cached", missing, VerbsStock, nil, []string{"cached mode requested", "is missing"}, ""},
		{"cached, stale cache", "cached", stale, VerbsStock, nil, []string{"is stale (device rxe1 (uverbs1) added)"}, ""},
		{"default, stale cache", "", stale, VerbsStock, nil, []string{"default", "is stale"}, ""},
		{"cached, corrupt cache", "cached", invalid, VerbsStock, nil, []string{"is invalid (snapshot.bin"}, ""},
		{"valid without manifest", "", verbs.Result{State: verbs.StateValid, Dir: testCache}, VerbsStock, nil, []string{"no usable cache"}, ""},
		{"never checked", "", verbs.Result{}, VerbsStock, nil, []string{"not checked"}, ""},
		{"unknown mode", "fast", valid, VerbsStock, nil, []string{`unknown mode "fast"`}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideVerbs(tc.requested, tc.cache)
			if d.Mode != tc.mode || !reflect.DeepEqual(d.Modifier, tc.mod) {
				t.Fatalf("DecideVerbs = %+v (modifier %+v), want mode %s modifier %+v", d, d.Modifier, tc.mode, tc.mod)
			}
			if d.Note != tc.note {
				t.Errorf("note %q, want %q", d.Note, tc.note)
			}
			if len(tc.warn) == 0 && d.Warning != "" {
				t.Fatalf("unexpected warning %q", d.Warning)
			}
			for _, w := range tc.warn {
				if !strings.Contains(d.Warning, w) {
					t.Errorf("warning %q lacks %q", d.Warning, w)
				}
			}
		})
	}
	// the decision's env is a copy: editing it leaves the manifest alone
	d := DecideVerbs("", valid)
	d.Modifier.Env["X"] = "1"
	if _, ok := m.Env["X"]; ok {
		t.Fatal("DecideVerbs shares the manifest's env map")
	}
}

// TestDecideVerbsEndToEnd: a real cache on disk, checked and applied.
func TestDecideVerbsEndToEnd(t *testing.T) {
	stateDir := t.TempDir()
	r := verbs.Check(verbs.Node{StateDir: stateDir})
	d := DecideVerbs("", r)
	if d.Mode != VerbsStock || d.Modifier != nil || !strings.Contains(d.Warning, "missing") {
		t.Fatalf("no cache: %+v", d)
	}
	s := verbsSpec([]string{"PATH=/bin"})
	before := specJSON(s)
	mods := []Modifier{}
	if d.Modifier != nil {
		mods = append(mods, *d.Modifier)
	}
	if err := Apply(s, mods); err != nil || specJSON(s) != before {
		t.Fatalf("stock changed the spec: %v\n%s", err, specJSON(s))
	}
}

// TestPlanVerbs: with the node's verbs cache in its description, Plan's
// chain ends with the verbs modifier when the cache is valid, and runs
// stock with a warning when it is stale; swift.io/verbs=stock asks for
// neither.
func TestPlanVerbs(t *testing.T) {
	m := &verbs.Manifest{Env: map[string]string{"MLX5_SINGLE_THREADED": "1"}, Profile: verbs.ProfileSummary{DefaultMode: "cached", DefaultWhy: "w"}}
	valid := verbs.Result{State: verbs.StateValid, Dir: testCache, Manifest: m}
	stale := verbs.Result{State: verbs.StateStale, Dir: testCache, Manifest: m, Reasons: []string{"device rxe1 (uverbs1) added"}}
	for _, tc := range []struct {
		name      string
		requested string
		cache     verbs.Result
		last      Modifier
		warnings  []string
	}{
		{"valid", "", valid, Verbs{CacheDir: testCache, Mode: "cached", Env: map[string]string{"MLX5_SINGLE_THREADED": "1"}}, nil},
		{"stale", "", stale, Zygote{BinDir: "/b", ConfPath: "/c"},
			[]string{"verbs: the default mode but the verbs cache is stale (device rxe1 (uverbs1) added): running stock libibverbs"}},
		{"stock asked", VerbsStock, valid, Zygote{BinDir: "/b", ConfPath: "/c"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := roomyNode()
			node.Zygote = &Zygote{BinDir: "/b", ConfPath: "/c"}
			node.VerbsCache = &tc.cache
			c, err := Plan(cfgWith(nil), annotations.Options{Verbs: tc.requested}, node)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Mods[len(c.Mods)-1]; !reflect.DeepEqual(got, tc.last) {
				t.Errorf("last modifier %#v, want %#v", got, tc.last)
			}
			if !reflect.DeepEqual(c.Warnings, tc.warnings) {
				t.Errorf("warnings %q, want %q", c.Warnings, tc.warnings)
			}
		})
	}
}
