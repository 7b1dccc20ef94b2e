package seccomp

import (
	"encoding/json"
	"reflect"
	"runtime"
	"slices"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
)

func eperm() *uint { e := EPERM; return &e }

func deny(names ...string) specs.LinuxSyscall {
	return specs.LinuxSyscall{Names: names, Action: specs.ActErrno, ErrnoRet: eperm()}
}

func allow(names ...string) specs.LinuxSyscall {
	return specs.LinuxSyscall{Names: names, Action: specs.ActAllow}
}

func withProfile(p *specs.LinuxSeccomp) *specs.Spec {
	return &specs.Spec{Process: &specs.Process{Args: []string{"sh"}}, Linux: &specs.Linux{Seccomp: p}}
}

func js(v any) string { b, _ := json.MarshalIndent(v, "", " "); return string(b) }

func TestDeny(t *testing.T) {
	eq := specs.LinuxSeccompArg{Index: 0, Value: 16, Op: specs.OpEqualTo}
	enosys := uint(38)
	tests := []struct {
		name  string
		names []string
		in    func() *specs.Spec
		want  *specs.Spec
	}{
		{
			name:  "allowlist profile: names leave the allow rule, one EPERM rule added",
			names: []string{"ptrace", "kcmp"},
			in: func() *specs.Spec {
				return withProfile(&specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Syscalls: []specs.LinuxSyscall{
					allow("read", "ptrace", "write"), allow("kcmp"),
				}})
			},
			want: withProfile(&specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Syscalls: []specs.LinuxSyscall{
				allow("read", "write"), deny("ptrace", "kcmp"),
			}}),
		},
		{
			name:  "denylist profile (default allow): deny rule added",
			names: []string{"ptrace"},
			in: func() *specs.Spec {
				return withProfile(&specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{
					{Names: []string{"mount"}, Action: specs.ActErrno},
				}})
			},
			want: withProfile(&specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{
				{Names: []string{"mount"}, Action: specs.ActErrno}, deny("ptrace"),
			}}),
		},
		{
			name:  "already denied unconditionally: kept as is, even with another errno",
			names: []string{"ptrace", "kcmp"},
			in: func() *specs.Spec {
				return withProfile(&specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{
					{Names: []string{"ptrace"}, Action: specs.ActErrno, ErrnoRet: &enosys},
					{Names: []string{"kcmp"}, Action: specs.ActKillProcess},
				}})
			},
			want: withProfile(&specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{
				{Names: []string{"ptrace"}, Action: specs.ActErrno, ErrnoRet: &enosys},
				{Names: []string{"kcmp"}, Action: specs.ActKillProcess},
			}}),
		},
		{
			name:  "conditional allow removed, conditional deny made unconditional",
			names: []string{"ptrace", "perf_event_open"},
			in: func() *specs.Spec {
				return withProfile(&specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{
					{Names: []string{"ptrace"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{eq}},
					{Names: []string{"perf_event_open", "bpf"}, Action: specs.ActErrno, Args: []specs.LinuxSeccompArg{eq}},
				}})
			},
			want: withProfile(&specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{
				{Names: []string{"bpf"}, Action: specs.ActErrno, Args: []specs.LinuxSeccompArg{eq}},
				deny("ptrace", "perf_event_open"),
			}}),
		},
		{
			name:  "log, trace and notify let a call through: removed",
			names: []string{"ptrace", "kcmp", "pidfd_getfd"},
			in: func() *specs.Spec {
				return withProfile(&specs.LinuxSeccomp{DefaultAction: specs.ActErrno, ListenerPath: "/run/l.sock", Syscalls: []specs.LinuxSyscall{
					{Names: []string{"ptrace"}, Action: specs.ActLog},
					{Names: []string{"kcmp"}, Action: specs.ActTrace},
					{Names: []string{"pidfd_getfd", "open"}, Action: specs.ActNotify},
				}})
			},
			want: withProfile(&specs.LinuxSeccomp{DefaultAction: specs.ActErrno, ListenerPath: "/run/l.sock", Syscalls: []specs.LinuxSyscall{
				{Names: []string{"open"}, Action: specs.ActNotify},
				deny("ptrace", "kcmp", "pidfd_getfd"),
			}}),
		},
		{
			name:  "default kill: allow rule loses the name, no weaker EPERM added",
			names: []string{"ptrace"},
			in: func() *specs.Spec {
				return withProfile(&specs.LinuxSeccomp{DefaultAction: specs.ActKillProcess, Syscalls: []specs.LinuxSyscall{
					allow("ptrace", "read"), {Names: []string{"ptrace"}, Action: specs.ActTrap, Args: []specs.LinuxSeccompArg{eq}},
				}})
			},
			want: withProfile(&specs.LinuxSeccomp{DefaultAction: specs.ActKillProcess, Syscalls: []specs.LinuxSyscall{
				allow("read"), {Names: []string{"ptrace"}, Action: specs.ActTrap, Args: []specs.LinuxSeccompArg{eq}},
			}}),
		},
		{
			name:  "other fields of the profile and spec kept",
			names: []string{"ptrace"},
			in: func() *specs.Spec {
				s := withProfile(&specs.LinuxSeccomp{DefaultAction: specs.ActErrno, DefaultErrnoRet: &enosys,
					Architectures: []specs.Arch{specs.ArchX86_64}, Flags: []specs.LinuxSeccompFlag{"SECCOMP_FILTER_FLAG_LOG"},
					Syscalls: []specs.LinuxSyscall{allow("read")}})
				s.Hostname = "h"
				return s
			},
			want: func() *specs.Spec {
				s := withProfile(&specs.LinuxSeccomp{DefaultAction: specs.ActErrno, DefaultErrnoRet: &enosys,
					Architectures: []specs.Arch{specs.ArchX86_64}, Flags: []specs.LinuxSeccompFlag{"SECCOMP_FILTER_FLAG_LOG"},
					Syscalls: []specs.LinuxSyscall{allow("read"), deny("ptrace")}})
				s.Hostname = "h"
				return s
			}(),
		},
		{
			name:  "no names: nothing changes, not even a missing profile",
			names: nil,
			in:    func() *specs.Spec { return &specs.Spec{Hostname: "h"} },
			want:  &specs.Spec{Hostname: "h"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.in()
			if err := Deny(s, tc.names); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(s, tc.want) {
				t.Fatalf("Deny:\n got %s\nwant %s", js(s), js(tc.want))
			}
			if err := Deny(s, tc.names); err != nil || !reflect.DeepEqual(s, tc.want) {
				t.Fatalf("second Deny changed the spec (%v):\n got %s", err, js(s))
			}
		})
	}
}

// unconfinedArchs are the architectures a profile made for an unconfined
// spec filters on this platform (containerd's, for 32-bit calls too).
func unconfinedArchs(t *testing.T) []specs.Arch {
	switch runtime.GOARCH {
	case "amd64":
		return []specs.Arch{"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"}
	case "arm64":
		return []specs.Arch{"SCMP_ARCH_ARM", "SCMP_ARCH_AARCH64"}
	}
	t.Fatalf("no expected seccomp architectures for %s in this test", runtime.GOARCH)
	return nil
}

// TestApplyBaselineUnconfined: a spec without a profile (an Unconfined
// pod, a privileged container, ctr run) stays unconfined but for the
// baseline: every other syscall is allowed, on every architecture the
// platform runs; it does not get containerd's default profile.
func TestApplyBaselineUnconfined(t *testing.T) {
	want := &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: unconfinedArchs(t),
		Syscalls: []specs.LinuxSyscall{{
			Names:    []string{"kcmp", "perf_event_open", "pidfd_getfd", "process_madvise", "process_vm_readv", "process_vm_writev", "ptrace"},
			Action:   specs.ActErrno,
			ErrnoRet: &EPERM,
		}},
	}
	for _, s := range []*specs.Spec{
		{},
		{Process: &specs.Process{Args: []string{"sh"}}},
		{Process: &specs.Process{Args: []string{"sh"}, Capabilities: &specs.LinuxCapabilities{Bounding: []string{"CAP_SYS_PTRACE", "CAP_SYS_ADMIN"}}}},
	} {
		if err := Apply(s, Baseline); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(s.Linux.Seccomp, want) {
			t.Fatalf("profile\n got %s\nwant %s", js(s.Linux.Seccomp), js(want))
		}
		once := js(s)
		if err := Apply(s, Baseline); err != nil || js(s) != once {
			t.Fatalf("second Apply changed the spec (%v)", err)
		}
	}
}

func TestApplyNone(t *testing.T) {
	s := &specs.Spec{Process: &specs.Process{}}
	if err := Apply(s, None); err != nil || s.Linux != nil {
		t.Fatalf("Apply(none) = %v, linux %+v; want the spec untouched", err, s.Linux)
	}
	p := &specs.LinuxSeccomp{DefaultAction: specs.ActAllow}
	s = withProfile(p)
	if err := Apply(s, None); err != nil || !reflect.DeepEqual(s.Linux.Seccomp, &specs.LinuxSeccomp{DefaultAction: specs.ActAllow}) {
		t.Fatalf("Apply(none) changed the profile: %v %+v", err, s.Linux.Seccomp)
	}
}

func TestParseLevel(t *testing.T) {
	for _, s := range []string{"none", "baseline"} {
		if l, err := ParseLevel(s); err != nil || string(l) != s {
			t.Errorf("ParseLevel(%q) = %q, %v", s, l, err)
		}
	}
	for _, s := range []string{"", "strict", "Baseline"} {
		if _, err := ParseLevel(s); !errdefs.IsInvalidArgument(err) {
			t.Errorf("ParseLevel(%q) = %v, want InvalidArgument", s, err)
		}
		if err := Apply(&specs.Spec{}, Level(s)); !errdefs.IsInvalidArgument(err) {
			t.Errorf("Apply(%q) = %v, want InvalidArgument", s, err)
		}
	}
	if got := Baseline.Syscalls(); !slices.Equal(got, baseline) || !slices.IsSorted(got) || None.Syscalls() != nil {
		t.Errorf("Syscalls: baseline %q, none %q", got, None.Syscalls())
	}
	// Syscalls returns a copy.
	Baseline.Syscalls()[0] = "x"
	if baseline[0] == "x" {
		t.Error("Syscalls returned the package's slice")
	}
}
