package annotations

import (
	"fmt"
	"net"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

func boolPtr(b bool) *bool { return &b }

func TestKnown(t *testing.T) {
	want := []string{
		"swift.io/rdma", "swift.io/tenant", "swift.io/devices", "swift.io/pool",
		"swift.io/peers", "swift.io/verbs", "swift.io/zygote", "swift.io/zygote-container", "swift.io/name",
		"swift.io/listen", "swift.io/remote-access",
	}
	if !reflect.DeepEqual(Known, want) {
		t.Fatalf("Known = %q, want %q", Known, want)
	}
}

func TestParseValid(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	dev64 := strings.Repeat("d", 64)
	tests := []struct {
		name string
		in   map[string]string
		want Options
	}{
		{"nil map", nil, Options{}},
		{"no swift keys", map[string]string{
			"io.kubernetes.cri.container-type": "container",
			"swift.iox/rdma":                   "junk",
			"example.com/swift.io/rdma":        "junk",
		}, Options{}},
		{"rdma true", map[string]string{RDMA: "true"}, Options{RDMA: boolPtr(true), Given: []string{RDMA}}},
		{"rdma false alone", map[string]string{RDMA: "false"}, Options{RDMA: boolPtr(false), Given: []string{RDMA}}},
		{"zygote true", map[string]string{Zygote: "true"}, Options{Zygote: boolPtr(true), Given: []string{Zygote}}},
		{"zygote false", map[string]string{Zygote: "false"}, Options{Zygote: boolPtr(false), Given: []string{Zygote}}},
		{"tenant one char", map[string]string{Tenant: "a"}, Options{Tenant: "a", Given: []string{Tenant}}},
		{"tenant digit", map[string]string{Tenant: "0"}, Options{Tenant: "0", Given: []string{Tenant}}},
		{"tenant dashes", map[string]string{Tenant: "team-a-1"}, Options{Tenant: "team-a-1", Given: []string{Tenant}}},
		{"tenant 63 chars", map[string]string{Tenant: label63}, Options{Tenant: label63, Given: []string{Tenant}}},
		{"devices one", map[string]string{Devices: "rxe0"}, Options{Devices: []string{"rxe0"}, Given: []string{Devices}}},
		{"devices keep order", map[string]string{Devices: "mlx5_1,mlx5_0"},
			Options{Devices: []string{"mlx5_1", "mlx5_0"}, Given: []string{Devices}}},
		{"devices trimmed", map[string]string{Devices: " mlx5_0 ,\tmlx5_1 "},
			Options{Devices: []string{"mlx5_0", "mlx5_1"}, Given: []string{Devices}}},
		{"devices charset and 64 chars", map[string]string{Devices: "A-b_c.9," + dev64},
			Options{Devices: []string{"A-b_c.9", dev64}, Given: []string{Devices}}},
		{"pool 1", map[string]string{Pool: "1"}, Options{Pool: 1, Given: []string{Pool}}},
		{"pool 16", map[string]string{Pool: "16"}, Options{Pool: 16, Given: []string{Pool}}},
		{"pool max", map[string]string{Pool: "256"}, Options{Pool: 256, Given: []string{Pool}}},
		{"peers ipv4", map[string]string{Peers: "a=10.0.0.1:4791"},
			Options{Peers: []Peer{{"a", "10.0.0.1", 4791}}, Given: []string{Peers}}},
		{"peers host, ipv6, spaces, max port", map[string]string{Peers: "db-0=db-0.svc.example:1, b=[fe80::1]:65535"},
			Options{Peers: []Peer{{"db-0", "db-0.svc.example", 1}, {"b", "fe80::1", 65535}}, Given: []string{Peers}}},
		{"name", map[string]string{Name: "trainer-0"}, Options{Name: "trainer-0", Given: []string{Name}}},
		{"name 63 chars", map[string]string{Name: label63}, Options{Name: label63, Given: []string{Name}}},
		{"name qualified, 127 chars", map[string]string{Name: label63 + "." + label63},
			Options{Name: label63 + "." + label63, Given: []string{Name}}},
		{"peers qualified", map[string]string{Peers: "a.team-b=10.0.0.1:4791,a=10.0.0.2:1"},
			Options{Peers: []Peer{{"a.team-b", "10.0.0.1", 4791}, {"a", "10.0.0.2", 1}}, Given: []string{Peers}}},
		{"listen port only", map[string]string{Listen: "18515"},
			Options{ListenHost: "0.0.0.0", ListenPort: 18515, Given: []string{Listen}}},
		{"listen ipv4 and port", map[string]string{Listen: "10.0.0.7:1"},
			Options{ListenHost: "10.0.0.7", ListenPort: 1, Given: []string{Listen}}},
		{"listen max port", map[string]string{Listen: "127.0.0.1:65535"},
			Options{ListenHost: "127.0.0.1", ListenPort: 65535, Given: []string{Listen}}},
		{"listen ipv4-mapped, as a dotted quad", map[string]string{Listen: "[::ffff:10.0.0.7]:18515"},
			Options{ListenHost: "10.0.0.7", ListenPort: 18515, Given: []string{Listen}}},
		{"verbs cached", map[string]string{Verbs: "cached"}, Options{Verbs: "cached", Given: []string{Verbs}}},
		{"verbs stock", map[string]string{Verbs: "stock"}, Options{Verbs: "stock", Given: []string{Verbs}}},
		{"verbs trimmed", map[string]string{Verbs: "trimmed"}, Options{Verbs: "trimmed", Given: []string{Verbs}}},
		{"every key, others ignored", map[string]string{
			RDMA: "true", Tenant: "t", Devices: "rxe0", Pool: "2", Peers: "p=h:1", Verbs: "stock", Zygote: "false",
			Name: "z", Listen: "7000",
			"io.kubernetes.cri.container-type": "container",
		}, Options{
			RDMA: boolPtr(true), Tenant: "t", Devices: []string{"rxe0"}, Pool: 2,
			Peers: []Peer{{"p", "h", 1}}, Verbs: "stock", Zygote: boolPtr(false),
			Name: "z", ListenHost: "0.0.0.0", ListenPort: 7000,
			Given: []string{Devices, Listen, Name, Peers, Pool, RDMA, Tenant, Verbs, Zygote},
		}},
		{"keys given without rdma", map[string]string{Tenant: "t", Pool: "3"},
			Options{Tenant: "t", Pool: 3, Given: []string{Pool, Tenant}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			if len(got.Given) == 0 {
				got.Given = nil // no keys given: nil and empty are the same
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Parse(%q)\n got %+v\nwant %+v", tc.in, got, tc.want)
			}
		})
	}
}

// TestParseZygoteLimits: what swift-init would refuse (swift-limits.h)
// is refused at Parse, naming the annotation; the largest table passes.
func TestParseZygoteLimits(t *testing.T) {
	peers := func(n int) string {
		var p []string
		for i := 0; i < n; i++ {
			p = append(p, fmt.Sprintf("p%d=10.0.0.%d:18515", i, i+1))
		}
		return strings.Join(p, ",")
	}
	if o, err := Parse(map[string]string{Pool: "8", Peers: peers(32)}); err != nil || o.Pool*len(o.Peers) != 256 {
		t.Errorf("8 × 32 peers = 256 QPs: %+v, %v", o, err)
	}
	for _, tc := range []struct {
		ann map[string]string
		msg string
	}{
		{map[string]string{Peers: peers(33)}, `swift.io/peers="p0=10.0.0.1:18515,`},
		{map[string]string{Pool: "9", Peers: peers(32)}, `annotation swift.io/pool="9": 9 QPs per peer × 32 peers = 288 QPs; a zygote's pool holds at most 256`},
		{map[string]string{Pool: "256", Peers: peers(2)}, "256 QPs per peer × 2 peers = 512 QPs"},
	} {
		_, err := Parse(tc.ann)
		if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Parse(%d peers, pool %s) = %v, want InvalidArgument containing %q", strings.Count(tc.ann[Peers], "=")-0, tc.ann[Pool], err, tc.msg)
		}
	}
	if _, err := Parse(map[string]string{Peers: peers(33)}); err == nil || !strings.Contains(err.Error(), "33 peers; a zygote takes at most 32") {
		t.Errorf("33 peers: %v", err)
	}
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		key, value string
	}{
		{RDMA, ""}, {RDMA, "True"}, {RDMA, "1"}, {RDMA, "yes"}, {RDMA, " true"},
		{Zygote, ""}, {Zygote, "on"}, {Zygote, "FALSE"},
		{Tenant, ""}, {Tenant, "Team"}, {Tenant, "-a"}, {Tenant, "a-"}, {Tenant, "a_b"},
		{Tenant, "a.b"}, {Tenant, strings.Repeat("a", 64)}, {Tenant, " a"},
		{Devices, ""}, {Devices, ","}, {Devices, "rxe0,"}, {Devices, "rxe0,,rxe1"},
		{Devices, "rxe0,rxe0"}, {Devices, "rxe0, rxe0 "}, {Devices, "rxe 0"}, {Devices, "a/b"},
		{Devices, strings.Repeat("d", 65)},
		{Pool, ""}, {Pool, "0"}, {Pool, "257"}, {Pool, "-1"}, {Pool, "x"}, {Pool, "1.5"},
		{Pool, " 1"}, {Pool, "99999999999999999999"},
		{Peers, ""}, {Peers, "a"}, {Peers, "=h:1"}, {Peers, "A=h:1"}, {Peers, "a=h"},
		{Peers, "a=h:0"}, {Peers, "a=h:65536"}, {Peers, "a=h:x"}, {Peers, "a=h:-1"},
		{Peers, "a=h:1,a=h:2"}, {Peers, "a=-bad:1"}, {Peers, "a=:1"}, {Peers, "a=h:1,"},
		{Peers, "a=fe80::1:80"}, {Peers, "a=h_x:1"}, {Peers, "a.=h:1"}, {Peers, "a.b.c=h:1"}, {Peers, ".b=h:1"},
		{Peers, "a.B=h:1"}, {Peers, "a." + strings.Repeat("n", 64) + "=h:1"},
		{Verbs, ""}, {Verbs, "Cached"}, {Verbs, "other"}, {Verbs, "Trimmed"}, {Verbs, "trimmed "},
		{Name, ""}, {Name, "Trainer"}, {Name, "-z"}, {Name, "a_b"}, {Name, strings.Repeat("n", 64)},
		{Name, "a."}, {Name, ".a"}, {Name, "a.b.c"}, {Name, "a.-b"}, {Name, "a." + strings.Repeat("n", 64)},
		{Listen, ""}, {Listen, "0"}, {Listen, "65536"}, {Listen, "-1"}, {Listen, "x"}, {Listen, ":80"},
		{Listen, "10.0.0.1"}, {Listen, "10.0.0.1:0"}, {Listen, "10.0.0.1:"}, {Listen, "localhost:80"},
		{Listen, "[::1]:80"}, {Listen, "[fe80::1]:80"}, {Listen, "::1"}, {Listen, "10.0.0.256:80"}, {Listen, " 80"},
		{"swift.io/foo", "x"}, {"swift.io/", ""}, {"swift.io/RDMA", "true"},
	}
	for _, tc := range tests {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			in := map[string]string{tc.key: tc.value, "other.example/key": "v"}
			got, err := Parse(in)
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want error", in, got)
			}
			if !errdefs.IsInvalidArgument(err) {
				t.Errorf("error %q is not InvalidArgument", err)
			}
			if !strings.Contains(err.Error(), tc.key) {
				t.Errorf("error %q does not name %s", err, tc.key)
			}
			if !reflect.DeepEqual(got, Options{}) {
				t.Errorf("Parse returned %+v with the error, want zero Options", got)
			}
		})
	}
}

func TestParseUnknownKeyListsKnown(t *testing.T) {
	_, err := Parse(map[string]string{"swift.io/pools": "4"})
	if err == nil {
		t.Fatal("want error")
	}
	for _, k := range Known {
		if !strings.Contains(err.Error(), k) {
			t.Errorf("error %q does not list known key %s", err, k)
		}
	}
}

func TestParseReportsFirstKeyInOrder(t *testing.T) {
	// Both values are bad; keys are checked in sorted order, so pool is reported.
	_, err := Parse(map[string]string{Zygote: "maybe", Pool: "0"})
	if err == nil || !strings.Contains(err.Error(), Pool) || strings.Contains(err.Error(), Zygote) {
		t.Fatalf("error %v: want it to name %s only", err, Pool)
	}
}

func TestParseGivenWhileDisabled(t *testing.T) {
	valid := map[string]string{
		Tenant: "t", Devices: "rxe0", Pool: "4", Peers: "a=h:1", Verbs: "cached", Zygote: "false",
		Name: "z", Listen: "10.0.0.1:7000", RemoteAccess: "true", ZygoteContainer: "worker",
	}
	for _, k := range Known {
		if k == RDMA {
			continue
		}
		t.Run(k, func(t *testing.T) {
			if _, ok := valid[k]; !ok {
				t.Fatalf("no valid value for %s in this test: add one", k)
			}
			in := map[string]string{RDMA: "false", k: valid[k]}
			got, err := Parse(in)
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want error", in, got)
			}
			if !errdefs.IsInvalidArgument(err) {
				t.Errorf("error %q is not InvalidArgument", err)
			}
			if !strings.Contains(err.Error(), "annotation "+k+"=") {
				t.Errorf("error %q does not name %s", err, k)
			}
			if !strings.Contains(err.Error(), RDMA+"=false") {
				t.Errorf("error %q does not say %s=false", err, RDMA)
			}
			// The same key is fine once the container opts in.
			in[RDMA] = "true"
			if _, err := Parse(in); err != nil {
				t.Errorf("Parse(%q): %v", in, err)
			}
		})
	}
}

func TestEnabled(t *testing.T) {
	tests := []struct {
		rdma        *bool
		nodeDefault bool
		want        bool
	}{
		{nil, false, false},
		{nil, true, true},
		{boolPtr(true), false, true},
		{boolPtr(true), true, true},
		{boolPtr(false), false, false},
		{boolPtr(false), true, false},
	}
	for _, tc := range tests {
		if got := (Options{RDMA: tc.rdma}).Enabled(tc.nodeDefault); got != tc.want {
			t.Errorf("Options{RDMA: %v}.Enabled(%v) = %v, want %v", fmtBool(tc.rdma), tc.nodeDefault, got, tc.want)
		}
	}
	// Through Parse.
	for in, want := range map[string]bool{"true": true, "false": false} {
		o, err := Parse(map[string]string{RDMA: in})
		if err != nil {
			t.Fatal(err)
		}
		if got := o.Enabled(!want); got != want {
			t.Errorf("swift.io/rdma=%s: Enabled(%v) = %v, want %v", in, !want, got, want)
		}
	}
}

func fmtBool(b *bool) string {
	if b == nil {
		return "nil"
	}
	if *b {
		return "&true"
	}
	return "&false"
}

// fuzzMap decodes a fuzz input into annotations: one "key=value" per line
// (a line without "=" is a key with an empty value).
func fuzzMap(raw string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(raw, "\n") {
		k, v, _ := strings.Cut(line, "=")
		m[k] = v
	}
	return m
}

func FuzzParse(f *testing.F) {
	seeds := []string{
		RDMA + "=true\n" + Devices + "=rxe0,rxe1\n" + Pool + "=8\n" + Peers + "=a=10.0.0.1:4791,b=host:1",
		RDMA + "=false\n" + Tenant + "=t",
		RDMA + "=false\nx/y=z",
		Tenant + "=team-a\n" + Verbs + "=cached\n" + Zygote + "=true\n" + CRIContainerType + "=sandbox",
		Pool + "=1024\n" + Pool + "s=1\n" + Devices + "=a,a\n" + Peers + "=a=h:0",
		Peers + "=a=[::1]:1, b=h:65535\n" + Devices + "= mlx5_0 , mlx5_1\n" + Verbs + "=stock\n" + Zygote + "=false",
		"swift.io/\n" + Tenant + "=-x\n" + Pool + "=+5\n" + Peers + "=a=h:1,a=h:2",
		RDMA + "=maybe\n" + Devices + "=\n" + Pool + "=0\n" + Verbs + "=x",
		RDMA + "=true\n" + Zygote + "=true\n" + Name + "=z-0\n" + Listen + "=10.0.0.1:18515",
		Name + "=Z\n" + Listen + "=[::ffff:10.0.0.1]:1",
		RDMA + "=false\n" + Listen + "=80",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		in := fuzzMap(raw)
		var swiftKeys []string
		for k := range in {
			if strings.HasPrefix(k, Prefix) {
				swiftKeys = append(swiftKeys, k)
			}
		}
		sort.Strings(swiftKeys)

		o, err := Parse(in)
		if err != nil {
			if !errdefs.IsInvalidArgument(err) {
				t.Fatalf("Parse(%q): error %q is not InvalidArgument", in, err)
			}
			named := false
			for _, k := range swiftKeys {
				if strings.Contains(err.Error(), "annotation "+k+"=") {
					named = true
				}
			}
			if !named {
				t.Fatalf("Parse(%q): error %q names no swift.io/ key of the input", in, err)
			}
			if !reflect.DeepEqual(o, Options{}) {
				t.Fatalf("Parse(%q): error with non-zero Options %+v", in, o)
			}
			return
		}
		if !slices.Equal(o.Given, swiftKeys) {
			t.Fatalf("Parse(%q): Given = %q, want %q", in, o.Given, swiftKeys)
		}
		given := map[string]bool{}
		for _, k := range o.Given {
			given[k] = true
			if !slices.Contains(Known, k) {
				t.Fatalf("Parse(%q): Given has unknown key %q", in, k)
			}
		}
		if (o.RDMA != nil) != given[RDMA] || (o.Zygote != nil) != given[Zygote] {
			t.Fatalf("Parse(%q): RDMA/Zygote set %v/%v, given %v/%v", in, o.RDMA != nil, o.Zygote != nil, given[RDMA], given[Zygote])
		}
		if o.RDMA != nil && !*o.RDMA && len(o.Given) != 1 {
			t.Fatalf("Parse(%q): accepted keys %q with %s=false", in, o.Given, RDMA)
		}
		if (o.Tenant != "") != given[Tenant] || (o.Verbs != "") != given[Verbs] {
			t.Fatalf("Parse(%q): Tenant %q / Verbs %q do not match the keys given", in, o.Tenant, o.Verbs)
		}
		if (o.Name != "") != given[Name] || strings.ToLower(o.Name) != o.Name || len(o.Name) > 63 {
			t.Fatalf("Parse(%q): Name = %q", in, o.Name)
		}
		if given[Listen] {
			if o.ListenPort == 0 || o.ListenHost == "" {
				t.Fatalf("Parse(%q): listen %q:%d", in, o.ListenHost, o.ListenPort)
			}
			if ip := net.ParseIP(o.ListenHost); ip == nil || ip.To4() == nil {
				t.Fatalf("Parse(%q): listen host %q is not IPv4", in, o.ListenHost)
			}
		} else if o.ListenPort != 0 || o.ListenHost != "" {
			t.Fatalf("Parse(%q): listen %q:%d without %s", in, o.ListenHost, o.ListenPort, Listen)
		}
		if o.Verbs != "" && o.Verbs != "cached" && o.Verbs != "stock" {
			t.Fatalf("Parse(%q): Verbs = %q", in, o.Verbs)
		}
		if given[Pool] {
			if o.Pool < 1 || o.Pool > MaxPool {
				t.Fatalf("Parse(%q): Pool = %d, want 1..%d", in, o.Pool, MaxPool)
			}
		} else if o.Pool != 0 {
			t.Fatalf("Parse(%q): Pool = %d without %s", in, o.Pool, Pool)
		}
		if given[Devices] != (len(o.Devices) > 0) {
			t.Fatalf("Parse(%q): Devices = %q", in, o.Devices)
		}
		seenDev := map[string]bool{}
		for _, d := range o.Devices {
			if d == "" || strings.TrimSpace(d) != d || strings.Contains(d, ",") || seenDev[d] {
				t.Fatalf("Parse(%q): bad or repeated device %q in %q", in, d, o.Devices)
			}
			seenDev[d] = true
		}
		if given[Peers] != (len(o.Peers) > 0) {
			t.Fatalf("Parse(%q): Peers = %+v", in, o.Peers)
		}
		seenPeer := map[string]bool{}
		for _, p := range o.Peers {
			if p.Port == 0 {
				t.Fatalf("Parse(%q): peer %+v has port 0", in, p)
			}
			if p.Name == "" || p.Host == "" {
				t.Fatalf("Parse(%q): peer %+v has an empty name or host", in, p)
			}
			if seenPeer[p.Name] {
				t.Fatalf("Parse(%q): peer name %q repeated", in, p.Name)
			}
			seenPeer[p.Name] = true
		}
	})
}
