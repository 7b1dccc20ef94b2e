package inject

import (
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/rdma"
)

func inventory(withCM bool) rdma.Inventory {
	inv := rdma.Inventory{Devices: []rdma.Device{
		{Name: "rxe0", NodeGUID: "0200:00ff:fe00:0001", FWVersion: "1.0.0", Uverbs: uv0},
		{Name: "rxe1", NodeGUID: "0200:00ff:fe00:0002", FWVersion: "1.0.0", Uverbs: uv1},
	}}
	if withCM {
		n := cm
		inv.RDMACM = &n
	}
	return inv
}

// roomyNode has devices, the rdma controller and memlock headroom.
func roomyNode() Node {
	return Node{Inventory: inventory(true), RDMACgroup: true, MemlockHard: config.MemlockUnlimited}
}

func cfgWith(f func(*config.Config)) config.Config {
	c := config.Default()
	if f != nil {
		f(&c)
	}
	return c
}

func names(mods []Modifier) []string {
	var out []string
	for _, m := range mods {
		out = append(out, m.Name())
	}
	return out
}

func TestPlan(t *testing.T) {
	const unlimited = config.MemlockUnlimited
	tests := []struct {
		name     string
		cfg      config.Config
		opts     annotations.Options
		node     Node
		want     []Modifier
		warnings []string
	}{
		{
			name: "all devices and rdma_cm by default",
			cfg:  config.Default(),
			node: roomyNode(),
			want: []Modifier{
				Devices{Nodes: []rdma.Node{uv0, uv1, cm}},
				Memlock{Bytes: unlimited},
				Env{Vars: map[string]string{EnvDevices: "rxe0,rxe1"}},
			},
		},
		{
			name: "no rdma_cm on the node",
			cfg:  config.Default(),
			node: Node{Inventory: inventory(false), MemlockHard: unlimited},
			want: []Modifier{
				Devices{Nodes: []rdma.Node{uv0, uv1}},
				Memlock{Bytes: unlimited},
				Env{Vars: map[string]string{EnvDevices: "rxe0,rxe1"}},
			},
		},
		{
			name: "swift.io/devices selects one",
			cfg:  config.Default(),
			opts: annotations.Options{Devices: []string{"rxe1"}},
			node: roomyNode(),
			want: []Modifier{
				Devices{Nodes: []rdma.Node{uv1, cm}},
				Memlock{Bytes: unlimited},
				Env{Vars: map[string]string{EnvDevices: "rxe1"}},
			},
		},
		{
			name: "swift.io/devices order is kept",
			cfg:  cfgWith(func(c *config.Config) { c.RDMA.HCAHandle = 4 }),
			opts: annotations.Options{Devices: []string{"rxe1", "rxe0"}},
			node: roomyNode(),
			want: []Modifier{
				Devices{Nodes: []rdma.Node{uv1, uv0, cm}},
				RDMALimits{Devices: []string{"rxe1", "rxe0"}, HCAHandle: 4},
				Memlock{Bytes: unlimited},
				Env{Vars: map[string]string{EnvDevices: "rxe1,rxe0"}},
			},
		},
		{
			name: "limits with the rdma controller, fixed order, config env",
			cfg: cfgWith(func(c *config.Config) {
				c.RDMA.HCAHandle, c.RDMA.HCAObject = 16, 4096
				c.RDMA.Memlock = "4MiB"
				c.RDMA.Env = map[string]string{"UCX_TLS": "rc", "NCCL_IB_HCA": "rxe"}
			}),
			node: Node{Inventory: inventory(true), RDMACgroup: true, MemlockHard: 8 << 20},
			want: []Modifier{
				Devices{Nodes: []rdma.Node{uv0, uv1, cm}},
				RDMALimits{Devices: []string{"rxe0", "rxe1"}, HCAHandle: 16, HCAObject: 4096},
				Memlock{Bytes: 4 << 20},
				Env{Vars: map[string]string{EnvDevices: "rxe0,rxe1", "UCX_TLS": "rc", "NCCL_IB_HCA": "rxe"}},
			},
		},
		{
			name: "objects limit alone",
			cfg:  cfgWith(func(c *config.Config) { c.RDMA.HCAObject = 1 }),
			node: roomyNode(),
			want: []Modifier{
				Devices{Nodes: []rdma.Node{uv0, uv1, cm}},
				RDMALimits{Devices: []string{"rxe0", "rxe1"}, HCAObject: 1},
				Memlock{Bytes: unlimited},
				Env{Vars: map[string]string{EnvDevices: "rxe0,rxe1"}},
			},
		},
		{
			name: "limits without the rdma controller: warning, no limits",
			cfg:  cfgWith(func(c *config.Config) { c.RDMA.HCAHandle = 16 }),
			node: Node{Inventory: inventory(true), RDMACgroup: false, MemlockHard: unlimited},
			want: []Modifier{
				Devices{Nodes: []rdma.Node{uv0, uv1, cm}},
				Memlock{Bytes: unlimited},
				Env{Vars: map[string]string{EnvDevices: "rxe0,rxe1"}},
			},
			warnings: []string{"rdma cgroup controller not available on this node: rdma.hca_handle/hca_object limits not applied"},
		},
		{
			name: "no limits and no controller: no warning",
			cfg:  config.Default(),
			node: Node{Inventory: inventory(true), MemlockHard: unlimited},
			want: []Modifier{
				Devices{Nodes: []rdma.Node{uv0, uv1, cm}},
				Memlock{Bytes: unlimited},
				Env{Vars: map[string]string{EnvDevices: "rxe0,rxe1"}},
			},
		},
		{
			name: "an allocation of two, swift.io/devices names one: limits cover both",
			cfg:  cfgWith(func(c *config.Config) { c.RDMA.HCAHandle = 2 }),
			opts: annotations.Options{Devices: []string{"rxe1"}},
			node: Node{Inventory: inventory(true), Allocated: true, RDMACgroup: true, MemlockHard: unlimited},
			want: []Modifier{
				Devices{Nodes: []rdma.Node{uv1, cm}},
				RDMALimits{Devices: []string{"rxe0", "rxe1"}, HCAHandle: 2},
				Memlock{Bytes: unlimited},
				Env{Vars: map[string]string{EnvDevices: "rxe1"}},
			},
		},
		{
			name: "an allocation of one",
			cfg:  cfgWith(func(c *config.Config) { c.RDMA.HCAObject = 8 }),
			node: Node{Inventory: inventory(true).Only([]string{"rxe1"}), Allocated: true, RDMACgroup: true, MemlockHard: unlimited},
			want: []Modifier{
				Devices{Nodes: []rdma.Node{uv1, cm}},
				RDMALimits{Devices: []string{"rxe1"}, HCAObject: 8},
				Memlock{Bytes: unlimited},
				Env{Vars: map[string]string{EnvDevices: "rxe1"}},
			},
		},
		{
			name: "hooks check the devices Swift sets up",
			cfg:  config.Default(),
			opts: annotations.Options{Devices: []string{"rxe1"}},
			node: Node{Inventory: inventory(true), MemlockHard: unlimited,
				Hooks: &Hooks{Path: "/bin/swift-hook", SysRoot: "/", ConfigPath: "/c.toml", NetCheck: true}},
			want: []Modifier{
				Devices{Nodes: []rdma.Node{uv1, cm}},
				Memlock{Bytes: unlimited},
				Env{Vars: map[string]string{EnvDevices: "rxe1"}},
				Hooks{Path: "/bin/swift-hook", Devices: []string{"rxe1"}, SysRoot: "/", ConfigPath: "/c.toml", NetCheck: true},
			},
		},
		{
			name: "memlock above the hard limit with CAP_SYS_RESOURCE",
			cfg:  cfgWith(func(c *config.Config) { c.RDMA.Memlock = "1GiB" }),
			node: Node{Inventory: inventory(true), MemlockHard: 8 << 20, CanRaiseMemlock: true},
			want: []Modifier{
				Devices{Nodes: []rdma.Node{uv0, uv1, cm}},
				Memlock{Bytes: 1 << 30},
				Env{Vars: map[string]string{EnvDevices: "rxe0,rxe1"}},
			},
		},
		{
			name: "memlock equal to the hard limit",
			cfg:  cfgWith(func(c *config.Config) { c.RDMA.Memlock = "8Mi" }),
			node: Node{Inventory: inventory(true), MemlockHard: 8 << 20},
			want: []Modifier{
				Devices{Nodes: []rdma.Node{uv0, uv1, cm}},
				Memlock{Bytes: 8 << 20},
				Env{Vars: map[string]string{EnvDevices: "rxe0,rxe1"}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Plan(tc.cfg, tc.opts, tc.node)
			mods, warnings := c.Mods, c.Warnings
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			if !reflect.DeepEqual(mods, tc.want) {
				t.Errorf("Plan modifiers\n got %#v\nwant %#v", mods, tc.want)
			}
			if !reflect.DeepEqual(warnings, tc.warnings) {
				t.Errorf("Plan warnings = %q, want %q", warnings, tc.warnings)
			}
			// The chain is idempotent on a realistic spec.
			once := baseSpec()
			if err := Apply(once, mods); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			twice := baseSpec()
			if err := Apply(twice, mods); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if err := Apply(twice, mods); err != nil {
				t.Fatalf("second Apply: %v", err)
			}
			if !reflect.DeepEqual(once, twice) {
				t.Fatalf("Apply twice differs from once:\n once %s\ntwice %s", js(once), js(twice))
			}
		})
	}
}

func TestPlanOrder(t *testing.T) {
	cfg := cfgWith(func(c *config.Config) { c.RDMA.HCAHandle = 1; c.RDMA.Env = map[string]string{"A": "1"} })
	c, err := Plan(cfg, annotations.Options{}, roomyNode())
	mods := c.Mods
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(mods), []string{"devices", "rdma-limits", "memlock", "env"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("modifier order %q, want %q", got, want)
	}

	// The zygote, when asked for, comes last (no verbs cache in the node's
	// description here); the whole chain stays idempotent.
	node := roomyNode()
	node.Zygote = &Zygote{BinDir: "/usr/local/lib/swift", ConfPath: "/run/b/swift-pool.conf"}
	c, err = Plan(cfg, annotations.Options{}, node)
	mods = c.Mods
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(mods), []string{"devices", "rdma-limits", "memlock", "env", "zygote"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("modifier order %q, want %q", got, want)
	}
	once, twice := baseSpec(), baseSpec()
	if err := Apply(once, mods); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := Apply(twice, mods); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(once, twice) {
		t.Fatalf("chain with zygote applied twice differs from once:\n once %s\ntwice %s", js(once), js(twice))
	}
}

func TestPlanErrors(t *testing.T) {
	tests := []struct {
		name  string
		cfg   config.Config
		opts  annotations.Options
		node  Node
		class func(error) bool
		msg   []string
	}{
		{
			name:  "no devices",
			cfg:   config.Default(),
			node:  Node{MemlockHard: config.MemlockUnlimited, RDMACgroup: true},
			class: errdefs.IsFailedPrecondition,
			msg:   []string{"no RDMA devices", " /sys/class/infiniband_verbs"},
		},
		{
			name:  "no devices, names the sys root",
			cfg:   cfgWith(func(c *config.Config) { c.RDMA.SysRoot = "/host/" }),
			node:  Node{Inventory: rdma.Inventory{RDMACM: &cm}, MemlockHard: config.MemlockUnlimited},
			class: errdefs.IsFailedPrecondition,
			msg:   []string{"/host/sys/class/infiniband_verbs"},
		},
		{
			name:  "unknown device",
			cfg:   config.Default(),
			opts:  annotations.Options{Devices: []string{"rxe0", "mlx5_0"}},
			node:  roomyNode(),
			class: errdefs.IsInvalidArgument,
			msg:   []string{annotations.Devices, `"mlx5_0"`, "rxe0, rxe1"},
		},
		{
			name:  "swift.io/devices outside the allocation",
			cfg:   config.Default(),
			opts:  annotations.Options{Devices: []string{"rxe0"}},
			node:  Node{Inventory: inventory(true).Only([]string{"rxe1"}), Allocated: true, MemlockHard: config.MemlockUnlimited},
			class: errdefs.IsInvalidArgument,
			msg:   []string{annotations.Devices, `"rxe0"`, "not among the devices allocated to the container (allocated: rxe1)"},
		},
		{
			name:  "memlock above the hard limit without CAP_SYS_RESOURCE",
			cfg:   cfgWith(func(c *config.Config) { c.RDMA.Memlock = "1GiB" }),
			node:  Node{Inventory: inventory(true), MemlockHard: 8 << 20},
			class: errdefs.IsFailedPrecondition,
			msg:   []string{"rdma.memlock", `"1GiB"`, "8MiB", "CAP_SYS_RESOURCE"},
		},
		{
			name:  "unlimited memlock above a finite hard limit",
			cfg:   config.Default(),
			node:  Node{Inventory: inventory(true), MemlockHard: 64 << 10},
			class: errdefs.IsFailedPrecondition,
			msg:   []string{"rdma.memlock", `"unlimited"`, "64KiB"},
		},
		{
			name:  "hard limit that is not a whole unit",
			cfg:   cfgWith(func(c *config.Config) { c.RDMA.Memlock = "1M" }),
			node:  Node{Inventory: inventory(true), MemlockHard: 100000},
			class: errdefs.IsFailedPrecondition,
			msg:   []string{"rdma.memlock", "(100000)"},
		},
		{
			name:  "hard limit in GiB",
			cfg:   cfgWith(func(c *config.Config) { c.RDMA.Memlock = "2G" }),
			node:  Node{Inventory: inventory(true), MemlockHard: 1 << 30},
			class: errdefs.IsFailedPrecondition,
			msg:   []string{"rdma.memlock", "1GiB"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Plan(tc.cfg, tc.opts, tc.node)
			mods, warnings := c.Mods, c.Warnings
			if err == nil {
				t.Fatalf("Plan = %#v, want error", mods)
			}
			if !tc.class(err) {
				t.Errorf("error %q has the wrong class", err)
			}
			for _, m := range tc.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
			if mods != nil || warnings != nil {
				t.Errorf("Plan returned modifiers %#v / warnings %q with an error", mods, warnings)
			}
		})
	}
}

func TestPlanEnvInSpec(t *testing.T) {
	cfg := cfgWith(func(c *config.Config) { c.RDMA.Env = map[string]string{"UCX_TLS": "rc"} })
	c, err := Plan(cfg, annotations.Options{Devices: []string{"rxe1"}}, roomyNode())
	mods := c.Mods
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Devices, []string{"rxe1"}) {
		t.Errorf("chain devices %q, want [rxe1] (what a netcheck checks)", c.Devices)
	}
	s := baseSpec()
	s.Process.Env = append(s.Process.Env, EnvDevices+"=stale")
	if err := Apply(s, mods); err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=/usr/bin:/bin", "TERM=xterm", EnvDevices + "=rxe1", "UCX_TLS=rc"}
	if !reflect.DeepEqual(s.Process.Env, want) {
		t.Fatalf("env = %q, want %q", s.Process.Env, want)
	}
}

// baseSpec is a spec as containerd's CRI plugin writes it, trimmed.
func baseSpec() *specs.Spec {
	return &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			Args:    []string{"/bin/sh"},
			Env:     []string{"PATH=/usr/bin:/bin", "TERM=xterm"},
			Cwd:     "/",
			Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024}},
		},
		Root:     &specs.Root{Path: "rootfs"},
		Hostname: "c1",
		Linux: &specs.Linux{
			Resources: &specs.LinuxResources{
				Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
			},
			Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.MountNamespace}},
		},
	}
}

func TestPlanChainOnBaseSpec(t *testing.T) {
	cfg := cfgWith(func(c *config.Config) {
		c.RDMA.HCAHandle = 8
		c.RDMA.Memlock = "4MiB"
	})
	c, err := Plan(cfg, annotations.Options{Devices: []string{"rxe0"}}, roomyNode())
	mods := c.Mods
	if err != nil {
		t.Fatal(err)
	}
	s := baseSpec()
	if err := Apply(s, mods); err != nil {
		t.Fatal(err)
	}
	want := baseSpec()
	want.Process.Env = append(want.Process.Env, EnvDevices+"=rxe0")
	want.Process.Rlimits = append(want.Process.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_MEMLOCK", Hard: 4 << 20, Soft: 4 << 20})
	want.Linux.Devices = []specs.LinuxDevice{dev(uv0.Path, 231, 192), dev(cm.Path, 10, 58)}
	want.Linux.Resources.Devices = append(want.Linux.Resources.Devices, allow(231, 192), allow(10, 58))
	want.Linux.Resources.Rdma = map[string]specs.LinuxRdma{"rxe0": {HcaHandles: u32(8)}}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("chain result:\n got %s\nwant %s", js(s), js(want))
	}
	if err := Apply(s, mods); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("chain applied twice:\n got %s\nwant %s", js(s), js(want))
	}
}
