package inject

import (
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/seccomp"
)

func TestSeccompModifier(t *testing.T) {
	eperm := seccomp.EPERM
	profile := func(rules ...specs.LinuxSyscall) *specs.Spec {
		return &specs.Spec{Process: &specs.Process{Args: []string{"sh"}}, Linux: &specs.Linux{Seccomp: &specs.LinuxSeccomp{
			DefaultAction: specs.ActErrno, Syscalls: rules}}}
	}
	runModCases(t, []modCase{
		{
			name: "none leaves the spec alone",
			mod:  Seccomp{Level: seccomp.None},
			in:   func() *specs.Spec { return &specs.Spec{Process: &specs.Process{}} },
			want: &specs.Spec{Process: &specs.Process{}},
		},
		{
			name: "baseline narrows an existing profile",
			mod:  Seccomp{Level: seccomp.Baseline},
			in: func() *specs.Spec {
				return profile(specs.LinuxSyscall{Names: []string{"read", "ptrace", "process_vm_readv"}, Action: specs.ActAllow})
			},
			want: profile(
				specs.LinuxSyscall{Names: []string{"read"}, Action: specs.ActAllow},
				specs.LinuxSyscall{Names: seccomp.Baseline.Syscalls(), Action: specs.ActErrno, ErrnoRet: &eperm},
			),
		},
		{
			name: "unknown level",
			mod:  Seccomp{Level: "strict"},
			in:   func() *specs.Spec { return &specs.Spec{} },
			err:  errdefs.IsInvalidArgument,
			msg:  []string{"strict"},
		},
	})
	if got := (Seccomp{}).Name(); got != "seccomp" {
		t.Errorf("Name() = %q", got)
	}
}

// TestPlanTenant: a tenant's limits replace the config's, its memlock
// errors name the policy key, and seccomp comes last in the chain.
func TestPlanTenant(t *testing.T) {
	cfg := cfgWith(func(c *config.Config) { c.RDMA.HCAHandle = 1; c.RDMA.HCAObject = 1; c.RDMA.Memlock = "1GiB" })
	node := roomyNode()
	node.Limits = &Limits{HCAHandle: 4, HCAObject: 100, Memlock: 4 << 20, MemlockKey: "tenants.a.container.memlock"}
	node.Zygote = &Zygote{BinDir: "/b", ConfPath: "/c"}
	node.Seccomp = &Seccomp{Level: seccomp.Baseline}
	c, err := Plan(cfg, annotations.Options{Devices: []string{"rxe0"}}, node)
	mods := c.Mods
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(mods), []string{"devices", "rdma-limits", "memlock", "env", "zygote", "seccomp"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("modifier order %q, want %q", got, want)
	}
	if got := mods[1].(RDMALimits); got.HCAHandle != 4 || got.HCAObject != 100 {
		t.Errorf("rdma limits %+v, want the tenant's", got)
	}
	if got := mods[2].(Memlock); got.Bytes != 4<<20 {
		t.Errorf("memlock %+v, want the tenant's", got)
	}

	// Tenant limits without the rdma controller: left out with the usual warning.
	node.RDMACgroup = false
	c, err = Plan(cfg, annotations.Options{}, node)
	mods, warnings := c.Mods, c.Warnings
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "rdma cgroup controller not available") {
		t.Fatalf("Plan = %v, %q", err, warnings)
	}
	for _, m := range mods {
		if m.Name() == "rdma-limits" {
			t.Error("rdma limits planned without the rdma controller")
		}
	}

	// A tenant memlock above the hard limit names the policy key.
	node.MemlockHard = 1 << 20
	_, err = Plan(cfg, annotations.Options{}, node)
	if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), `tenants.a.container.memlock = "4MiB"`) {
		t.Fatalf("Plan = %v, want FailedPrecondition naming tenants.a.container.memlock", err)
	}
}

func TestConfigLimits(t *testing.T) {
	cfg := cfgWith(func(c *config.Config) { c.RDMA.HCAHandle = 2; c.RDMA.HCAObject = 3; c.RDMA.Memlock = "8Mi" })
	want := Limits{HCAHandle: 2, HCAObject: 3, Memlock: 8 << 20, MemlockKey: "rdma.memlock", MemlockText: "8Mi"}
	if got := ConfigLimits(cfg); got != want {
		t.Errorf("ConfigLimits = %+v, want %+v", got, want)
	}
}
