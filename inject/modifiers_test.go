package inject

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/rdma"
)

var (
	uv0 = rdma.Node{Path: "/dev/infiniband/uverbs0", HostPath: "/node/dev/infiniband/uverbs0", Major: 231, Minor: 192}
	uv1 = rdma.Node{Path: "/dev/infiniband/uverbs1", HostPath: "/node/dev/infiniband/uverbs1", Major: 231, Minor: 193}
	cm  = rdma.Node{Path: "/dev/infiniband/rdma_cm", HostPath: "/node/dev/infiniband/rdma_cm", Major: 10, Minor: 58}
)

func u32(v uint32) *uint32 { return &v }
func i64(v int64) *int64   { return &v }
func mode(m os.FileMode) *os.FileMode {
	return &m
}

// dev is the device entry Devices adds for a node.
func dev(path string, major, minor int64) specs.LinuxDevice {
	return specs.LinuxDevice{Path: path, Type: "c", Major: major, Minor: minor, FileMode: mode(0o666), UID: u32(0), GID: u32(0)}
}

// allow is the cgroup rule Devices adds for a node.
func allow(major, minor int64) specs.LinuxDeviceCgroup {
	return specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: i64(major), Minor: i64(minor), Access: "rwm"}
}

func js(s *specs.Spec) string {
	b, _ := json.MarshalIndent(s, "", "  ")
	return string(b)
}

type modCase struct {
	name string
	mod  Modifier
	in   func() *specs.Spec // fresh input for every application
	want *specs.Spec        // nil when an error is expected
	err  func(error) bool   // error class expected when want is nil
	msg  []string           // substrings of the expected error
}

func runModCases(t *testing.T, cases []modCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.in()
			err := tc.mod.Modify(s)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("Modify: want error, got spec\n%s", js(s))
				}
				if !tc.err(err) {
					t.Errorf("error %q has the wrong class", err)
				}
				for _, m := range tc.msg {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("error %q does not contain %q", err, m)
					}
				}
				// Failing again on a fresh copy is deterministic.
				if err2 := tc.mod.Modify(tc.in()); err2 == nil || err2.Error() != err.Error() {
					t.Errorf("second Modify: %v, want %v", err2, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Modify: %v", err)
			}
			if !reflect.DeepEqual(s, tc.want) {
				t.Fatalf("Modify:\n got %s\nwant %s", js(s), js(tc.want))
			}
			// Idempotence: a second application changes nothing.
			if err := tc.mod.Modify(s); err != nil {
				t.Fatalf("second Modify: %v", err)
			}
			if !reflect.DeepEqual(s, tc.want) {
				t.Fatalf("second Modify changed the spec:\n got %s\nwant %s", js(s), js(tc.want))
			}
		})
	}
}

func TestDevices(t *testing.T) {
	cdiMode := mode(0o660)
	runModCases(t, []modCase{
		{
			name: "empty spec",
			mod:  Devices{Nodes: []rdma.Node{uv0}},
			in:   func() *specs.Spec { return &specs.Spec{} },
			want: &specs.Spec{Linux: &specs.Linux{
				Devices:   []specs.LinuxDevice{dev(uv0.Path, 231, 192)},
				Resources: &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{allow(231, 192)}},
			}},
		},
		{
			name: "linux without resources, nodes in order",
			mod:  Devices{Nodes: []rdma.Node{uv1, uv0, cm}},
			in:   func() *specs.Spec { return &specs.Spec{Linux: &specs.Linux{}} },
			want: &specs.Spec{Linux: &specs.Linux{
				Devices: []specs.LinuxDevice{dev(uv1.Path, 231, 193), dev(uv0.Path, 231, 192), dev(cm.Path, 10, 58)},
				Resources: &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{
					allow(231, 193), allow(231, 192), allow(10, 58),
				}},
			}},
		},
		{
			name: "other devices and rules kept, deny-all first",
			mod:  Devices{Nodes: []rdma.Node{uv0}},
			in: func() *specs.Spec {
				return &specs.Spec{Linux: &specs.Linux{
					Devices: []specs.LinuxDevice{{Path: "/dev/fuse", Type: "c", Major: 10, Minor: 229}},
					Resources: &specs.LinuxResources{
						Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}, allow(10, 229)},
						Memory:  &specs.LinuxMemory{Limit: i64(1 << 30)},
					},
				}}
			},
			want: &specs.Spec{Linux: &specs.Linux{
				Devices: []specs.LinuxDevice{{Path: "/dev/fuse", Type: "c", Major: 10, Minor: 229}, dev(uv0.Path, 231, 192)},
				Resources: &specs.LinuxResources{
					Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}, allow(10, 229), allow(231, 192)},
					Memory:  &specs.LinuxMemory{Limit: i64(1 << 30)},
				},
			}},
		},
		{
			name: "device from CDI with same numbers kept as is, not duplicated, its cgroup rule the platform's",
			mod:  Devices{Nodes: []rdma.Node{uv0, cm}},
			in: func() *specs.Spec {
				return &specs.Spec{Linux: &specs.Linux{
					Devices: []specs.LinuxDevice{{Path: uv0.Path, Type: "c", Major: 231, Minor: 192, FileMode: cdiMode, UID: u32(1000), GID: u32(1000)}},
				}}
			},
			want: &specs.Spec{Linux: &specs.Linux{
				Devices: []specs.LinuxDevice{
					{Path: uv0.Path, Type: "c", Major: 231, Minor: 192, FileMode: cdiMode, UID: u32(1000), GID: u32(1000)},
					dev(cm.Path, 10, 58),
				},
				Resources: &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{allow(10, 58)}},
			}},
		},
		{
			name: "existing allow rule not duplicated",
			mod:  Devices{Nodes: []rdma.Node{uv0}},
			in: func() *specs.Spec {
				return &specs.Spec{Linux: &specs.Linux{Resources: &specs.LinuxResources{
					Devices: []specs.LinuxDeviceCgroup{allow(231, 192)},
				}}}
			},
			want: &specs.Spec{Linux: &specs.Linux{
				Devices:   []specs.LinuxDevice{dev(uv0.Path, 231, 192)},
				Resources: &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{allow(231, 192)}},
			}},
		},
		{
			name: "narrower allow rule kept and rwm rule added",
			mod:  Devices{Nodes: []rdma.Node{uv0}},
			in: func() *specs.Spec {
				return &specs.Spec{Linux: &specs.Linux{Resources: &specs.LinuxResources{
					Devices: []specs.LinuxDeviceCgroup{{Allow: true, Type: "c", Major: i64(231), Minor: i64(192), Access: "rw"}},
				}}}
			},
			want: &specs.Spec{Linux: &specs.Linux{
				Devices: []specs.LinuxDevice{dev(uv0.Path, 231, 192)},
				Resources: &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{
					{Allow: true, Type: "c", Major: i64(231), Minor: i64(192), Access: "rw"}, allow(231, 192),
				}},
			}},
		},
		{
			name: "same path different numbers",
			mod:  Devices{Nodes: []rdma.Node{uv0}},
			in: func() *specs.Spec {
				return &specs.Spec{Linux: &specs.Linux{
					Devices: []specs.LinuxDevice{{Path: uv0.Path, Type: "c", Major: 231, Minor: 200}},
				}}
			},
			err: errdefs.IsFailedPrecondition,
			msg: []string{uv0.Path, "231:200", "231:192"},
		},
		{
			name: "same path block device",
			mod:  Devices{Nodes: []rdma.Node{cm}},
			in: func() *specs.Spec {
				return &specs.Spec{Linux: &specs.Linux{
					Devices: []specs.LinuxDevice{{Path: cm.Path, Type: "b", Major: 10, Minor: 58}},
				}}
			},
			err: errdefs.IsFailedPrecondition,
			msg: []string{cm.Path, "b 10:58"},
		},
	})
}

func TestRDMALimits(t *testing.T) {
	runModCases(t, []modCase{
		{
			name: "limits 0 leave a nil linux alone",
			mod:  RDMALimits{Devices: []string{"rxe0"}},
			in:   func() *specs.Spec { return &specs.Spec{Hostname: "h"} },
			want: &specs.Spec{Hostname: "h"},
		},
		{
			name: "limits 0 leave existing limits alone",
			mod:  RDMALimits{Devices: []string{"rxe0"}},
			in: func() *specs.Spec {
				return &specs.Spec{Linux: &specs.Linux{Resources: &specs.LinuxResources{
					Rdma: map[string]specs.LinuxRdma{"rxe0": {HcaHandles: u32(1)}},
				}}}
			},
			want: &specs.Spec{Linux: &specs.Linux{Resources: &specs.LinuxResources{
				Rdma: map[string]specs.LinuxRdma{"rxe0": {HcaHandles: u32(1)}},
			}}},
		},
		{
			name: "handles only on empty spec",
			mod:  RDMALimits{Devices: []string{"rxe0"}, HCAHandle: 16},
			in:   func() *specs.Spec { return &specs.Spec{} },
			want: &specs.Spec{Linux: &specs.Linux{Resources: &specs.LinuxResources{
				Rdma: map[string]specs.LinuxRdma{"rxe0": {HcaHandles: u32(16)}},
			}}},
		},
		{
			name: "objects only",
			mod:  RDMALimits{Devices: []string{"rxe0"}, HCAObject: 4096},
			in:   func() *specs.Spec { return &specs.Spec{Linux: &specs.Linux{}} },
			want: &specs.Spec{Linux: &specs.Linux{Resources: &specs.LinuxResources{
				Rdma: map[string]specs.LinuxRdma{"rxe0": {HcaObjects: u32(4096)}},
			}}},
		},
		{
			name: "both, two devices",
			mod:  RDMALimits{Devices: []string{"mlx5_0", "mlx5_1"}, HCAHandle: 8, HCAObject: 100},
			in:   func() *specs.Spec { return &specs.Spec{} },
			want: &specs.Spec{Linux: &specs.Linux{Resources: &specs.LinuxResources{
				Rdma: map[string]specs.LinuxRdma{
					"mlx5_0": {HcaHandles: u32(8), HcaObjects: u32(100)},
					"mlx5_1": {HcaHandles: u32(8), HcaObjects: u32(100)},
				},
			}}},
		},
		{
			name: "existing entries: unset field kept, set field replaced, other device kept",
			mod:  RDMALimits{Devices: []string{"rxe0"}, HCAHandle: 16},
			in: func() *specs.Spec {
				return &specs.Spec{Linux: &specs.Linux{Resources: &specs.LinuxResources{
					Rdma: map[string]specs.LinuxRdma{
						"rxe0": {HcaHandles: u32(2), HcaObjects: u32(50)},
						"rxe1": {HcaHandles: u32(3)},
					},
					Pids: &specs.LinuxPids{Limit: i64(100)},
				}}}
			},
			want: &specs.Spec{Linux: &specs.Linux{Resources: &specs.LinuxResources{
				Rdma: map[string]specs.LinuxRdma{
					"rxe0": {HcaHandles: u32(16), HcaObjects: u32(50)},
					"rxe1": {HcaHandles: u32(3)},
				},
				Pids: &specs.LinuxPids{Limit: i64(100)},
			}}},
		},
	})
}

func TestRDMALimitsDoesNotAlias(t *testing.T) {
	s := &specs.Spec{}
	if err := (RDMALimits{Devices: []string{"a", "b"}, HCAHandle: 1, HCAObject: 2}).Modify(s); err != nil {
		t.Fatal(err)
	}
	r := s.Linux.Resources.Rdma
	*r["a"].HcaHandles = 99
	*r["a"].HcaObjects = 99
	if *r["b"].HcaHandles != 1 || *r["b"].HcaObjects != 2 {
		t.Fatalf("limits of devices a and b share pointers: b = %d/%d", *r["b"].HcaHandles, *r["b"].HcaObjects)
	}
}

func TestMemlock(t *testing.T) {
	const unlimited = ^uint64(0)
	runModCases(t, []modCase{
		{
			name: "no process",
			mod:  Memlock{Bytes: 1 << 20},
			in:   func() *specs.Spec { return &specs.Spec{} },
			err:  errdefs.IsInvalidArgument,
			msg:  []string{"process"},
		},
		{
			name: "no rlimits",
			mod:  Memlock{Bytes: 4 << 20},
			in:   func() *specs.Spec { return &specs.Spec{Process: &specs.Process{Args: []string{"sh"}}} },
			want: &specs.Spec{Process: &specs.Process{Args: []string{"sh"}, Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_MEMLOCK", Hard: 4 << 20, Soft: 4 << 20},
			}}},
		},
		{
			name: "unlimited appended after other rlimits",
			mod:  Memlock{Bytes: unlimited},
			in: func() *specs.Spec {
				return &specs.Spec{Process: &specs.Process{Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024}}}}
			},
			want: &specs.Spec{Process: &specs.Process{Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024},
				{Type: "RLIMIT_MEMLOCK", Hard: unlimited, Soft: unlimited},
			}}},
		},
		{
			name: "existing memlock replaced in place, others kept",
			mod:  Memlock{Bytes: 1 << 30},
			in: func() *specs.Spec {
				return &specs.Spec{Process: &specs.Process{Rlimits: []specs.POSIXRlimit{
					{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 512},
					{Type: "RLIMIT_MEMLOCK", Hard: 65536, Soft: 8192},
					{Type: "RLIMIT_NPROC", Hard: 100, Soft: 100},
				}}}
			},
			want: &specs.Spec{Process: &specs.Process{Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 512},
				{Type: "RLIMIT_MEMLOCK", Hard: 1 << 30, Soft: 1 << 30},
				{Type: "RLIMIT_NPROC", Hard: 100, Soft: 100},
			}}},
		},
	})
}

func TestEnv(t *testing.T) {
	runModCases(t, []modCase{
		{
			name: "no process",
			mod:  Env{Vars: map[string]string{"A": "1"}},
			in:   func() *specs.Spec { return &specs.Spec{} },
			err:  errdefs.IsInvalidArgument,
			msg:  []string{"process"},
		},
		{
			name: "no vars, nil env stays nil",
			mod:  Env{},
			in:   func() *specs.Spec { return &specs.Spec{Process: &specs.Process{}} },
			want: &specs.Spec{Process: &specs.Process{}},
		},
		{
			name: "appended in name order",
			mod:  Env{Vars: map[string]string{"ZED": "z", "ALPHA": "a", "MID": "m=n"}},
			in:   func() *specs.Spec { return &specs.Spec{Process: &specs.Process{Env: []string{"PATH=/bin"}}} },
			want: &specs.Spec{Process: &specs.Process{Env: []string{"PATH=/bin", "ALPHA=a", "MID=m=n", "ZED=z"}}},
		},
		{
			// Enough names that map order would show through.
			name: "many names in order",
			mod: Env{Vars: map[string]string{
				"V00": "0", "V01": "1", "V02": "2", "V03": "3", "V04": "4", "V05": "5", "V06": "6", "V07": "7",
				"V08": "8", "V09": "9", "V10": "10", "V11": "11", "V12": "12", "V13": "13", "V14": "14", "V15": "15",
			}},
			in: func() *specs.Spec { return &specs.Spec{Process: &specs.Process{}} },
			want: &specs.Spec{Process: &specs.Process{Env: []string{
				"V00=0", "V01=1", "V02=2", "V03=3", "V04=4", "V05=5", "V06=6", "V07=7",
				"V08=8", "V09=9", "V10=10", "V11=11", "V12=12", "V13=13", "V14=14", "V15=15",
			}}},
		},
		{
			name: "replaced in place",
			mod:  Env{Vars: map[string]string{"SWIFT_RDMA_DEVICES": "rxe0", "NEW": "1"}},
			in: func() *specs.Spec {
				return &specs.Spec{Process: &specs.Process{Env: []string{"PATH=/bin", "SWIFT_RDMA_DEVICES=old", "HOME=/root"}}}
			},
			want: &specs.Spec{Process: &specs.Process{Env: []string{"PATH=/bin", "SWIFT_RDMA_DEVICES=rxe0", "HOME=/root", "NEW=1"}}},
		},
		{
			name: "prefix of another name is not replaced",
			mod:  Env{Vars: map[string]string{"A": "1"}},
			in:   func() *specs.Spec { return &specs.Spec{Process: &specs.Process{Env: []string{"AB=x", "A", "A_=y"}}} },
			want: &specs.Spec{Process: &specs.Process{Env: []string{"AB=x", "A", "A_=y", "A=1"}}},
		},
		{
			name: "empty value replaces",
			mod:  Env{Vars: map[string]string{"A": ""}},
			in:   func() *specs.Spec { return &specs.Spec{Process: &specs.Process{Env: []string{"A=full"}}} },
			want: &specs.Spec{Process: &specs.Process{Env: []string{"A="}}},
		},
	})
}

func TestApply(t *testing.T) {
	s := &specs.Spec{Process: &specs.Process{}}
	err := Apply(s, []Modifier{Memlock{Bytes: 1 << 20}, Env{Vars: map[string]string{"A": "1"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := &specs.Spec{Process: &specs.Process{
		Env:     []string{"A=1"},
		Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_MEMLOCK", Hard: 1 << 20, Soft: 1 << 20}},
	}}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("Apply:\n got %s\nwant %s", js(s), js(want))
	}
	if err := Apply(s, nil); err != nil || !reflect.DeepEqual(s, want) {
		t.Fatalf("Apply(nil) = %v and changed the spec", err)
	}
}

func TestApplyStopsAtFirstError(t *testing.T) {
	s := &specs.Spec{
		Process: &specs.Process{},
		Linux:   &specs.Linux{Devices: []specs.LinuxDevice{{Path: uv0.Path, Type: "c", Major: 1, Minor: 1}}},
	}
	err := Apply(s, []Modifier{Memlock{Bytes: 1 << 20}, Devices{Nodes: []rdma.Node{uv0}}, Env{Vars: map[string]string{"A": "1"}}})
	if err == nil {
		t.Fatal("want error")
	}
	if !errdefs.IsFailedPrecondition(err) {
		t.Errorf("error %q lost its class", err)
	}
	if !strings.HasPrefix(err.Error(), "inject devices: ") {
		t.Errorf("error %q does not start with the modifier name", err)
	}
	if s.Process.Env != nil {
		t.Errorf("env modifier after the failing one ran: %q", s.Process.Env)
	}
	if len(s.Process.Rlimits) != 1 {
		t.Errorf("memlock modifier before the failing one did not run: %+v", s.Process.Rlimits)
	}
}

func TestModifierNames(t *testing.T) {
	for _, tc := range []struct {
		m    Modifier
		want string
	}{{Devices{}, "devices"}, {RDMALimits{}, "rdma-limits"}, {Memlock{}, "memlock"}, {Env{}, "env"}} {
		if got := tc.m.Name(); got != tc.want {
			t.Errorf("%T.Name() = %q, want %q", tc.m, got, tc.want)
		}
	}
}
