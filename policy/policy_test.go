package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/config/tomlfile"
	"github.com/swift-rdma/swift-containerd/ledger"
)

// TestBadPolicies: every file under testdata/bad is refused with an
// InvalidArgument error naming the file and carrying each "# want:" line.
func TestBadPolicies(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 40 {
		t.Fatalf("only %d bad policies in testdata/bad; the corpus needs at least 40", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var wants []string
			for _, l := range strings.Split(string(data), "\n") {
				if w, ok := strings.CutPrefix(l, "# want: "); ok {
					wants = append(wants, w)
				}
			}
			if len(wants) == 0 {
				t.Fatal("no \"# want:\" line")
			}
			p, err := Load(f)
			if err == nil {
				t.Fatalf("Load accepted it: %+v", p)
			}
			if !errdefs.IsInvalidArgument(err) {
				t.Errorf("error %q is not InvalidArgument", err)
			}
			if !strings.Contains(err.Error(), f) {
				t.Errorf("error %q does not name the file", err)
			}
			for _, w := range wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%s", w, err)
				}
			}
			var pe *Error
			if !errors.As(err, &pe) || len(pe.Problems) == 0 {
				t.Fatalf("error %T is not a *policy.Error with problems", err)
			}
			for _, pr := range pe.Problems {
				if pr.Line == 0 && !strings.Contains(pr.Msg, "defines no tenant") {
					t.Errorf("problem %q has no line", pr)
				}
			}
		})
	}
}

func TestGoodPolicies(t *testing.T) {
	files, _ := filepath.Glob("testdata/good/*.toml")
	files = append(files, filepath.Join("..", "examples", "policy.toml"))
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			p, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			if p.IsOpen() || p.Path != f || len(p.Tenants) == 0 {
				t.Fatalf("Load = %+v", p)
			}
		})
	}
}

func TestParseFull(t *testing.T) {
	p, err := Load("testdata/good/full.toml")
	if err != nil {
		t.Fatal(err)
	}
	mustRule := func(s string) PeerRule {
		r, err := ParsePeerRule(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	want := &Tenant{
		Name: "a", Namespaces: []string{"a", "a-*"}, ClaimableFrom: []string{"shared", "ci-*"}, Local: true,
		Devices: []string{},
		Peers: []PeerRule{mustRule("10.0.0.0/8"), mustRule("192.168.1.0/24:18515"), mustRule("172.16.0.0/12:18000-18999"),
			mustRule("[fd00::/8]:18515"), mustRule("::/0")},
		ForkSharing: true, Seccomp: SeccompNone, NetCapabilities: []string{"CAP_NET_RAW"},
		Container: Limits{QPs: 8, HCAHandle: 2, HCAObject: 64, Memlock: 64 << 20},
		Node:      Quota{Containers: 10, QPs: 80, HCAHandle: 20, HCAObject: 640},
	}
	if got := p.Tenants["a"]; !reflect.DeepEqual(got, want) {
		t.Errorf("tenant a\n got %+v\nwant %+v", got, want)
	}
	b := &Tenant{Name: "b", Namespaces: []string{"*"}, Seccomp: SeccompBaseline}
	if got := p.Tenants["b"]; !reflect.DeepEqual(got, b) {
		t.Errorf("tenant b (defaults)\n got %+v\nwant %+v", got, b)
	}
	if p.LocalTenant != "b" {
		t.Errorf("local_tenant = %q", p.LocalTenant)
	}
}

func TestLoadMissingIsOpen(t *testing.T) {
	p, err := Load(filepath.Join(t.TempDir(), "absent.toml"))
	if err != nil || !p.IsOpen() {
		t.Fatalf("Load(missing) = %+v, %v; want the open policy", p, err)
	}
}

func TestLoadNode(t *testing.T) {
	t.Setenv(config.EnvPolicy, "")
	dir := t.TempDir()
	def := filepath.Join(dir, "etc", "policy.toml") // stands for DefaultPath
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.StateDir = state
	load := func(path string) (*Policy, error) {
		c := cfg
		c.PolicyPath = path
		return loadNode(c, def)
	}
	// policy_path = "": open, explicitly
	if p, err := load(""); err != nil || !p.IsOpen() {
		t.Errorf(`policy_path = "": %+v, %v; want the open policy`, p, err)
	}
	// the default path on a node that never enforced a policy: open
	if p, err := load(def); err != nil || !p.IsOpen() {
		t.Errorf("missing default policy, no ledger: %+v, %v; want the open policy", p, err)
	}
	// the default path named by the config file itself: required
	named := cfg
	named.PolicyPath, named.PolicyPathSet = def, true
	if _, err := loadNode(named, def); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), def+" (policy_path or $SWIFT_POLICY) does not exist") {
		t.Errorf("missing default policy named by policy_path: %v; want FailedPrecondition naming %s", err, def)
	}
	// a configured path that does not exist (a typo): fail closed
	typo := filepath.Join(dir, "polcy.toml")
	if _, err := load(typo); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), typo+" (policy_path or $SWIFT_POLICY) does not exist") {
		t.Errorf("missing configured policy: %v; want FailedPrecondition naming %s", err, typo)
	}
	// $SWIFT_POLICY naming a missing file: the same
	t.Setenv(config.EnvPolicy, typo)
	if _, err := load(def); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), typo) {
		t.Errorf("missing $SWIFT_POLICY: %v; want FailedPrecondition naming %s", err, typo)
	}
	t.Setenv(config.EnvPolicy, "")
	// the default path deleted after the node enforced it (a ledger exists)
	if err := os.WriteFile(filepath.Join(state, "ledger.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := load(def); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), def+" does not exist, but this node enforced one") {
		t.Errorf("deleted default policy: %v; want FailedPrecondition naming %s", err, def)
	}
	// present: loaded
	if err := os.MkdirAll(filepath.Dir(def), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(def, []byte("[tenants.a]\nnamespaces = [\"a\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := load(def); err != nil || p.IsOpen() || p.Tenants["a"] == nil {
		t.Errorf("present policy: %+v, %v", p, err)
	}
	// unreadable: InvalidArgument (a directory cannot be read as a file)
	if _, err := load(dir); !errdefs.IsInvalidArgument(err) {
		t.Errorf("unreadable policy: %v; want InvalidArgument", err)
	}
}

func TestLoadUnreadable(t *testing.T) {
	dir := t.TempDir() // a directory cannot be read as a file
	if _, err := Load(dir); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Load(dir) = %v, want InvalidArgument naming it", err)
	}
}

func TestParsePeerRule(t *testing.T) {
	tests := []struct {
		in     string
		prefix string
		lo, hi uint16
	}{
		{"10.0.0.0/8", "10.0.0.0/8", 1, 65535},
		{"10.1.2.3/32:18515", "10.1.2.3/32", 18515, 18515},
		{"0.0.0.0/0:1-1024", "0.0.0.0/0", 1, 1024},
		{"[fd00::/8]:18515", "fd00::/8", 18515, 18515},
		{"[::/0]", "::/0", 1, 65535},
		{"fd00::/8", "fd00::/8", 1, 65535},
	}
	for _, tc := range tests {
		r, err := ParsePeerRule(tc.in)
		if err != nil {
			t.Errorf("ParsePeerRule(%q): %v", tc.in, err)
			continue
		}
		if r.Prefix.String() != tc.prefix || r.MinPort != tc.lo || r.MaxPort != tc.hi || r.Text != tc.in {
			t.Errorf("ParsePeerRule(%q) = %+v", tc.in, r)
		}
	}
	r, _ := ParsePeerRule("10.0.0.0/8:18515-18600")
	for _, c := range []struct {
		addr string
		port uint16
		ok   bool
	}{
		{"10.1.2.3", 18515, true}, {"10.1.2.3", 18600, true}, {"10.1.2.3", 18601, false},
		{"11.0.0.1", 18515, false}, {"::ffff:10.0.0.1", 18515, true}, {"fd00::1", 18515, false},
	} {
		if got := r.Allows(netip.MustParseAddr(c.addr), c.port); got != c.ok {
			t.Errorf("Allows(%s:%d) = %v, want %v", c.addr, c.port, got, c.ok)
		}
	}
}

const resolvePolicy = `
local_tenant = "ops"
[tenants.a]
namespaces = ["team-a", "team-a-*"]
claimable_from = ["ci"]
local = true
[tenants.b]
namespaces = ["team-b"]
claimable_from = ["ci-*"]
[tenants.ops]
namespaces = ["*"]
[tenants.wide]
namespaces = ["team-*"]
`

func TestResolve(t *testing.T) {
	p, err := Parse("p.toml", []byte(resolvePolicy))
	if err != nil {
		t.Fatal(err)
	}
	cri := func(ns string) Caller { return Caller{CRI: true, Namespace: ns} }
	local := Caller{}
	tests := []struct {
		name   string
		caller Caller
		claim  string
		want   string // tenant, or "" for an error
		msg    []string
	}{
		{"exact namespace", cri("team-a"), "", "a", nil},
		{"longest pattern wins", cri("team-a-dev"), "", "a", nil},
		{"shorter pattern", cri("team-c"), "", "wide", nil},
		{"catch-all", cri("default"), "", "ops", nil},
		{"claim own tenant", cri("team-b"), "b", "b", nil},
		{"claim through claimable_from", cri("ci"), "a", "a", nil},
		{"claim through pattern", cri("team-a-x"), "a", "a", nil},
		{"claim through claimable_from pattern", cri("ci-7"), "b", "b", nil},
		{"forged claim", cri("team-b"), "a", "", []string{`swift.io/tenant="a"`, `pod namespace "team-b" belongs to tenant "b"`, "tenants.a.claimable_from"}},
		// a namespace belongs to one tenant: "*" or a shorter pattern of
		// another tenant does not make that tenant claimable
		{"exact name not overridden by *", cri("team-b"), "ops", "", []string{`swift.io/tenant="ops"`, `belongs to tenant "b"`, "tenants.ops.claimable_from"}},
		{"exact name not overridden by a pattern", cri("team-b"), "wide", "", []string{`belongs to tenant "b"`}},
		{"longer pattern not overridden by a shorter", cri("team-a-x"), "wide", "", []string{`belongs to tenant "a"`}},
		{"pattern not overridden by *", cri("team-c"), "ops", "", []string{`belongs to tenant "wide"`}},
		{"forged claim from catch-all", cri("default"), "b", "", []string{`swift.io/tenant="b"`, "may not claim"}},
		{"claim of unknown tenant", cri("team-a"), "zz", "", []string{`swift.io/tenant="zz"`, "no such tenant"}},
		{"empty CRI namespace", cri(""), "", "ops", nil}, // "*" matches
		{"local default", local, "", "ops", nil},
		{"local claim allowed", local, "a", "a", nil},
		{"local claim of local_tenant", local, "ops", "ops", nil},
		{"local claim refused", local, "b", "", []string{`swift.io/tenant="b"`, "local caller", "tenants.b.local = true"}},
		{"local claim unknown", local, "zz", "", []string{"no such tenant"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.Resolve(tc.caller, tc.claim)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("Resolve = %s, want error", got.Name)
				}
				if !errdefs.IsPermissionDenied(err) {
					t.Errorf("error %q is not PermissionDenied", err)
				}
				for _, m := range tc.msg {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("error %q does not contain %q", err, m)
					}
				}
				return
			}
			if err != nil || got.Name != tc.want {
				t.Fatalf("Resolve = %v, %v; want %s", got, err, tc.want)
			}
		})
	}

	// No catch-all and no local_tenant: unmapped pods and anonymous local callers are refused.
	strict, err := Parse("s.toml", []byte("[tenants.a]\nnamespaces = [\"a\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := strict.Resolve(cri("other"), ""); !errdefs.IsPermissionDenied(err) || !strings.Contains(err.Error(), "not mapped") {
		t.Errorf("unmapped namespace: %v", err)
	}
	if _, err := strict.Resolve(cri("other"), "a"); !errdefs.IsPermissionDenied(err) ||
		!strings.Contains(err.Error(), `pod namespace "other" is not mapped to any tenant and may not claim tenant "a"`) {
		t.Errorf("unmapped namespace claiming: %v", err)
	}
	if _, err := strict.Resolve(local, ""); !errdefs.IsPermissionDenied(err) || !strings.Contains(err.Error(), "local_tenant") {
		t.Errorf("anonymous local caller: %v", err)
	}
}

func TestResolveOpen(t *testing.T) {
	p := Open()
	for _, tc := range []struct {
		c     Caller
		claim string
		want  string
	}{{Caller{}, "", "default"}, {Caller{}, "t1", "t1"}, {Caller{CRI: true, Namespace: "x"}, "t2", "t2"}} {
		got, err := p.Resolve(tc.c, tc.claim)
		if err != nil || got.Name != tc.want || !got.Unlimited || !got.ForkSharing || got.Seccomp != SeccompNone {
			t.Errorf("Open().Resolve(%v, %q) = %+v, %v", tc.c, tc.claim, got, err)
		}
	}
}

func TestHomeAndClaimers(t *testing.T) {
	p, err := Parse("p.toml", []byte(resolvePolicy))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ns, home string
		claims   []string
	}{
		{"team-a", "a", nil},
		{"team-b", "b", nil},
		{"ci", "ops", []string{"a"}},
		{"ci-1", "ops", []string{"b"}},
		{"team-zz", "wide", nil},
		{"kube-system", "ops", nil},
	} {
		h := p.HomeOf(tc.ns)
		if h == nil || h.Name != tc.home {
			t.Errorf("HomeOf(%q) = %v, want %s", tc.ns, h, tc.home)
		}
		if got := p.ClaimersOf(tc.ns); !slices.Equal(got, tc.claims) {
			t.Errorf("ClaimersOf(%q) = %v, want %v", tc.ns, got, tc.claims)
		}
	}
}

func TestCallerOf(t *testing.T) {
	cri := map[string]string{CRISandboxNamespace: "ns1"}
	for _, tc := range []struct {
		name, ctrNS string
		ann         map[string]string
		want        Caller
		text        string
	}{
		{"pod in the CRI namespace", "k8s.io", cri, Caller{CRI: true, Namespace: "ns1"}, `pod namespace "ns1"`},
		{"CRI annotation from another namespace", "default", cri, Caller{Containerd: "default"},
			`local caller (containerd namespace "default" is not the CRI's: its io.kubernetes.cri.sandbox-namespace annotation does not count)`},
		{"no CRI annotation in the CRI namespace", "k8s.io", map[string]string{"swift.io/tenant": "a"}, Caller{},
			"local caller (no io.kubernetes.cri.sandbox-namespace annotation)"},
		{"no annotations", "default", nil, Caller{}, "local caller (no io.kubernetes.cri.sandbox-namespace annotation)"},
	} {
		got := CallerOf(tc.ctrNS, "k8s.io", tc.ann)
		if got != tc.want || got.String() != tc.text {
			t.Errorf("%s: CallerOf = %+v %q, want %+v %q", tc.name, got, got, tc.want, tc.text)
		}
	}
	// a configured CRI namespace
	if got := CallerOf("k8s.io", "cri", cri); got.CRI {
		t.Errorf("CallerOf(k8s.io) with cri_namespace cri = %+v, want a local caller", got)
	}
}

func ann(t *testing.T, kv ...string) annotations.Options {
	t.Helper()
	m := map[string]string{annotations.RDMA: "true"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	o, err := annotations.Parse(m)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestAdmit(t *testing.T) {
	p, err := Parse("p.toml", []byte(`
[tenants.a]
devices = ["rxe1", "mlx5_0"]
peers = ["10.0.0.0/8:18515-18600", "[fd00::/8]:18515"]
fork_sharing = true
[tenants.a.container]
qps = 8
[tenants.nofork]
[tenants.any]
fork_sharing = true
`))
	if err != nil {
		t.Fatal(err)
	}
	a, nofork, any := p.Tenants["a"], p.Tenants["nofork"], p.Tenants["any"]
	present := []string{"rxe0", "rxe1"}
	tests := []struct {
		name  string
		t     *Tenant
		o     annotations.Options
		want  Decision
		class func(error) bool
		msg   []string
	}{
		{"devices default to the allowed ones present", a, ann(t), Decision{Devices: []string{"rxe1"}, QPs: 8}, nil, nil},
		{"device named and allowed", a, ann(t, annotations.Devices, "rxe1"), Decision{QPs: 8}, nil, nil},
		{"device outside the tenant's", a, ann(t, annotations.Devices, "rxe0"), Decision{}, errdefs.IsInvalidArgument,
			[]string{annotations.Devices, `device "rxe0"`, `tenant "a"`, "rxe1, mlx5_0"}},
		{"no allowed device present", a, ann(t), Decision{}, nil, nil}, // replaced below
		{"unrestricted tenant keeps every device", any, ann(t), Decision{}, nil, nil},
		// with container.qps the charge is the limit the zygote enforces
		{"zygote with peers under a QP limit: charged the limit", a, ann(t, annotations.Zygote, "true", annotations.Pool, "3",
			annotations.Peers, "b=10.1.1.1:18515,c=[fd00::1]:18515"), Decision{Devices: []string{"rxe1"}, QPs: 8, QPLimit: 8}, nil, nil},
		{"zygote without pool under a QP limit", a, ann(t, annotations.Zygote, "true", annotations.Peers, "b=10.1.1.1:18600"),
			Decision{Devices: []string{"rxe1"}, QPs: 8, QPLimit: 8}, nil, nil},
		{"zygote with peers, no QP limit: pool × peers", any, ann(t, annotations.Zygote, "true", annotations.Pool, "3",
			annotations.Peers, "b=10.1.1.1:18515,c=[fd00::1]:18515"), Decision{QPs: 6}, nil, nil},
		{"zygote without pool, no QP limit: 1 per peer", any, ann(t, annotations.Zygote, "true", annotations.Peers, "b=10.1.1.1:18600"),
			Decision{QPs: 1}, nil, nil},
		{"pool × peers above qps", a, ann(t, annotations.Zygote, "true", annotations.Pool, "5",
			annotations.Peers, "b=10.1.1.1:18515,c=10.1.1.2:18515"), Decision{}, errdefs.IsInvalidArgument,
			[]string{annotations.Pool, annotations.Peers, "5 × 2 peers = 10 QPs", "tenants.a.container.qps = 8"}},
		{"peer outside the networks", a, ann(t, annotations.Zygote, "true", annotations.Peers, "b=192.168.1.1:18515"),
			Decision{}, errdefs.IsInvalidArgument, []string{annotations.Peers, "b=192.168.1.1:18515", "10.0.0.0/8:18515-18600"}},
		{"peer port outside", a, ann(t, annotations.Zygote, "true", annotations.Peers, "b=10.0.0.1:22"),
			Decision{}, errdefs.IsInvalidArgument, []string{annotations.Peers, "b=10.0.0.1:22"}},
		{"peer host name under restriction: its port is checked here", a, ann(t, annotations.Zygote, "true", annotations.Peers, "b=db.local:18515"),
			Decision{Devices: []string{"rxe1"}, QPs: 8, QPLimit: 8}, nil, nil},
		{"peer host name at a port no rule allows", a, ann(t, annotations.Zygote, "true", annotations.Peers, "b=db.local:22"),
			Decision{}, errdefs.IsInvalidArgument, []string{annotations.Peers, "b=db.local:22", `no peer rule of tenant "a" allows port 22`, "10.0.0.0/8:18515-18600"}},
		{"zygote refused", nofork, ann(t, annotations.Zygote, "true"), Decision{}, errdefs.IsInvalidArgument,
			[]string{annotations.Zygote, `tenant "nofork"`, "tenants.nofork.fork_sharing"}},
		{"zygote=false fine without fork sharing", nofork, ann(t, annotations.Zygote, "false"), Decision{}, nil, nil},
		{"any peers for an unrestricted tenant", any, ann(t, annotations.Zygote, "true", annotations.Pool, "4",
			annotations.Peers, "b=db.local:1"), Decision{QPs: 4}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pres := present
			if tc.name == "no allowed device present" {
				pres = []string{"rxe0"}
				tc.class = errdefs.IsFailedPrecondition
				tc.msg = []string{`tenant "a"`, "rxe1, mlx5_0", "present: rxe0"}
			}
			got, err := tc.t.Admit(tc.o, pres)
			if tc.class != nil {
				if err == nil || !tc.class(err) {
					t.Fatalf("Admit = %+v, %v; want an error of the right class", got, err)
				}
				for _, m := range tc.msg {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("error %q does not contain %q", err, m)
					}
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Admit = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestKeyLines(t *testing.T) {
	data := []byte(`local_tenant = "a"
[tenants.a]
namespaces = [
  "x",
  "y",
]
container = { qps = 1 }
[tenants.a.node]
qps = 2
`)
	pos, problems, parsed := tomlfile.Decode(data, &rawPolicy{})
	if !parsed || len(problems) > 0 {
		t.Fatal(problems)
	}
	for key, line := range map[string]int{
		"local_tenant": 1, "tenants.a": 2, "tenants.a.namespaces": 3, "tenants.a.namespaces[1]": 5,
		"tenants.a.container.qps": 7, "tenants.a.node": 8, "tenants.a.node.qps": 9, "tenants.a.node.memlock": 8,
		"tenants.b.x": 2, "other.x": 0,
	} {
		if got := pos.Line(key); got != line {
			t.Errorf("line(%s) = %d, want %d", key, got, line)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[uint64]string{
		config.MemlockUnlimited: "unlimited", 0: "0", 4 << 20: "4MiB", 1 << 30: "1GiB", 3 << 40: "3TiB", 65536: "64KiB", 1000: "1000",
	} {
		if got := HumanBytes(n); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestProblemsSortedByLine(t *testing.T) {
	_, err := Parse("x.toml", []byte("[tenants.b]\nseccomp = \"x\"\n[tenants.a]\nseccomp = \"y\"\n"))
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("Parse = %v", err)
	}
	lines := make([]int, len(pe.Problems))
	for i, p := range pe.Problems {
		lines[i] = p.Line
	}
	if !sort.IntsAreSorted(lines) || len(lines) != 2 {
		t.Errorf("problem lines %v, want 2 sorted", lines)
	}
}

func TestPeerNetworks(t *testing.T) {
	tests := []struct {
		name       string
		rules      []string
		nilRules   bool
		want       []string
		restricted bool
	}{
		{"no peers key: any peer", nil, true, nil, false},
		{"empty list: no peer", []string{}, false, []string{}, true},
		{"networks once", []string{"10.0.0.0/8:18515", "10.0.0.0/8:18600-18700", "192.168.1.0/24", "[fd00::/8]:1"}, false,
			[]string{"10.0.0.0/8", "192.168.1.0/24", "fd00::/8"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ten := &Tenant{Name: "t"}
			if !tc.nilRules {
				ten.Peers = []PeerRule{}
				for _, s := range tc.rules {
					r, err := ParsePeerRule(s)
					if err != nil {
						t.Fatalf("ParsePeerRule(%q): %v", s, err)
					}
					ten.Peers = append(ten.Peers, r)
				}
			}
			nets, restricted := ten.PeerNetworks()
			if restricted != tc.restricted {
				t.Errorf("restricted = %v, want %v", restricted, tc.restricted)
			}
			var got []string
			for _, n := range nets {
				got = append(got, n.String())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("networks %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("networks %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestDialRules: the IPv4 rules, as written, and whether peers are
// restricted; a policy with more than a zygote checks is refused.
func TestDialRules(t *testing.T) {
	p, err := Parse("x.toml", []byte(`[tenants.a]
peers = ["10.0.0.0/8:18515", "10.0.0.0/8:18600-18700", "[fd00::/8]:1", "192.168.1.7/32", "[::ffff:10.0.0.0/104]:18515"]
[tenants.none]
peers = []
[tenants.any]
`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var got []string
	rules, restricted := p.Tenants["a"].DialRules()
	for _, r := range rules {
		got = append(got, fmt.Sprintf("%s %d-%d", r.Prefix, r.MinPort, r.MaxPort))
	}
	if want := []string{"10.0.0.0/8 18515-18515", "10.0.0.0/8 18600-18700", "192.168.1.7/32 1-65535"}; !restricted || !slices.Equal(got, want) {
		t.Errorf("a: DialRules = %q, %v; want %q, true", got, restricted, want)
	}
	if rules, restricted := p.Tenants["none"].DialRules(); !restricted || len(rules) != 0 {
		t.Errorf("none: DialRules = %v, %v; want none, true", rules, restricted)
	}
	if rules, restricted := p.Tenants["any"].DialRules(); restricted || rules != nil {
		t.Errorf("any: DialRules = %v, %v; want nil, false", rules, restricted)
	}
	var many []string
	for i := 0; i < 33; i++ {
		many = append(many, fmt.Sprintf(`"10.0.0.0/8:%d"`, 1000+i))
	}
	_, err = Parse("x.toml", []byte("[tenants.a]\npeers = ["+strings.Join(many, ", ")+"]\n"))
	if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "tenants.a.peers: 33 IPv4 rules; a zygote checks the peers it dials against at most 32") {
		t.Errorf("33 IPv4 rules: %v", err)
	}
}

// TestKeyFile: a tenant names its keyring by an absolute, clean path.
func TestKeyFile(t *testing.T) {
	p, err := Parse("x.toml", []byte("[tenants.a]\nkey_file = \"/etc/swift/keys/a.keys\"\n[tenants.b]\n"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if p.Tenants["a"].KeyFile != "/etc/swift/keys/a.keys" || p.Tenants["b"].KeyFile != "" {
		t.Fatalf("KeyFile = %q, %q", p.Tenants["a"].KeyFile, p.Tenants["b"].KeyFile)
	}
	for _, bad := range []string{"keys/a.keys", "/etc/swift/../a.keys", "/etc//a.keys", ""} {
		_, err := Parse("x.toml", []byte("[tenants.a]\nkey_file = \""+bad+"\"\n"))
		if err == nil || !strings.Contains(err.Error(), "x.toml: line 2: tenants.a.key_file") ||
			!strings.Contains(err.Error(), "absolute, clean path") {
			t.Errorf("key_file %q: Parse = %v, want the line and the key named", bad, err)
		}
	}
}

func TestAdmitAllocated(t *testing.T) {
	p, err := Parse("p.toml", []byte("[tenants.a]\ndevices = [\"rxe1\", \"mlx5_0\"]\n[tenants.any]\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, any := p.Tenants["a"], p.Tenants["any"]
	for _, tc := range []struct {
		t         *Tenant
		allocated []string
		refused   string // "": admitted
	}{
		{a, []string{"rxe1"}, ""},
		{a, []string{"mlx5_0", "rxe1"}, ""},
		{a, []string{"rxe1", "rxe0"}, `device "rxe0" is allocated to the container, but tenant "a" may not use it (allowed: rxe1, mlx5_0)`},
		{any, []string{"rxe0", "rxe1"}, ""},
	} {
		err := tc.t.AdmitAllocated(tc.allocated)
		if tc.refused == "" {
			if err != nil {
				t.Errorf("%s with %q: %v", tc.t.Name, tc.allocated, err)
			}
			continue
		}
		if !errdefs.IsPermissionDenied(err) || !strings.Contains(err.Error(), tc.refused) {
			t.Errorf("%s with %q: error %v, want PermissionDenied saying %q", tc.t.Name, tc.allocated, err, tc.refused)
		}
	}
}

// TestParseReportsEveryProblem: one pass reports every problem of a file
// (a value of the wrong type, an unknown key, invalid values), each once,
// with its line and key, and nothing that follows from another.
func TestParseReportsEveryProblem(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Problem
	}{
		{"three kinds", "[tenants.a]\nnamespaces = [\"a\", 7]\nseccomp = \"strict\"\nfork_share = true\n[tenants.a.node]\nqps = 10\n",
			[]Problem{
				{Line: 2, Key: "tenants.a.namespaces[1]", Msg: "want a string, got a TOML integer"},
				{Line: 3, Key: "tenants.a.seccomp", Msg: `"strict": want "none" or "baseline"`},
				{Line: 4, Key: "tenants.a.fork_share", Msg: "unknown key (known here: namespaces, claimable_from, local, devices, peers, fork_sharing, seccomp, net_capabilities, key_file, [tenants.a.container], [tenants.a.node])"},
				{Line: 6, Key: "tenants.a.node.qps", Msg: "a node-wide quota needs a finite per-container limit to charge each container: set tenants.a.container.qps"},
			}},
		{"a tenant with a mistyped key is still validated", "local_tenant = \"a\"\n[tenants.a]\nlocal = 1\ndevices = [\"rxe 0\"]\n",
			[]Problem{
				{Line: 3, Key: "tenants.a.local", Msg: "want true or false, got a TOML integer"},
				{Line: 4, Key: "tenants.a.devices[0]", Msg: `"rxe 0" is not an RDMA device name`},
			}},
		{"tenants of the wrong type is one problem", "tenants = 5\nlocal_tenants = \"a\"\n",
			[]Problem{
				{Line: 1, Key: "tenants", Msg: "want a table, got a TOML integer"},
				{Line: 2, Key: "local_tenants", Msg: "unknown key (known here: local_tenant, [tenants.NAME])"},
			}},
		{"a tenant name that needs quotes", "[tenants.\"Team A\"]\nseccomp = 1\n",
			[]Problem{
				{Line: 1, Key: `tenants."Team A"`, Msg: `tenant name "Team A" is not a lowercase DNS label (a-z, 0-9, '-', at most 63 characters)`},
				{Line: 2, Key: `tenants."Team A".seccomp`, Msg: "want a string, got a TOML integer"},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.toml", []byte(tc.in))
			var pe *Error
			if !errors.As(err, &pe) || !errdefs.IsInvalidArgument(err) {
				t.Fatalf("Parse = %v, want an InvalidArgument *Error", err)
			}
			if !reflect.DeepEqual(pe.Problems, tc.want) {
				t.Errorf("problems\n got %q\nwant %q", pe.Problems, tc.want)
			}
		})
	}
}

// TestQuotaAmounts: each node-wide limit lands in the ledger field of the
// same resource (the shim's quota and swiftctl pools ls read it so).
func TestQuotaAmounts(t *testing.T) {
	got := Quota{Containers: 1, QPs: 2, HCAHandle: 3, HCAObject: 4, Memlock: 5}.Amounts()
	want := ledger.Amounts{Containers: 1, QPs: 2, HCAHandle: 3, HCAObject: 4, Memlock: 5}
	if got != want {
		t.Errorf("Amounts() = %+v, want %+v", got, want)
	}
}
