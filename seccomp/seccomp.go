package seccomp

import (
	"fmt"
	"slices"

	ctrdseccomp "github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Level names a set of denied syscalls.
type Level string

// Levels.
const (
	// None adds nothing: the container's profile (or none) stays as it is.
	None Level = "none"
	// Baseline denies cross-process inspection: one process of a tenant
	// (for example a function forked by the zygote) cannot read, trace or
	// compare another's memory or file table.
	Baseline Level = "baseline"
)

// baseline lists what Baseline denies.
var baseline = []string{
	"kcmp",              // compare kernel objects (files, mm) of two processes
	"perf_event_open",   // sample another process
	"pidfd_getfd",       // steal another process's file descriptor
	"process_madvise",   // act on another process's memory
	"process_vm_readv",  // read another process's memory
	"process_vm_writev", // write another process's memory
	"ptrace",            // trace another process
}

// ParseLevel checks a level name.
func ParseLevel(s string) (Level, error) {
	switch Level(s) {
	case None, Baseline:
		return Level(s), nil
	}
	return "", fmt.Errorf("seccomp level %q: want %q or %q: %w", s, None, Baseline, errdefs.ErrInvalidArgument)
}

// Syscalls returns the syscalls a level denies, sorted.
func (l Level) Syscalls() []string {
	if l == Baseline {
		return slices.Clone(baseline)
	}
	return nil
}

// EPERM is the errno denied syscalls return.
var EPERM = uint(unix.EPERM)

// Apply adds level's denials to s.Linux.Seccomp (see Deny).
func Apply(s *specs.Spec, l Level) error {
	if _, err := ParseLevel(string(l)); err != nil {
		return err
	}
	return Deny(s, l.Syscalls())
}

// Deny makes every syscall in names fail with EPERM under s's seccomp
// profile. A spec without a profile (an Unconfined pod, a privileged
// container, ctr run without --seccomp) stays unconfined but for these:
// it gets a profile that allows every other syscall (containerd's
// architectures, so 32-bit calls are filtered too), never containerd's
// default profile, which would deny what the pod did not ask to lose.
// For each name:
//   - an unconditional rule that already denies it (errno, kill, trap) is
//     kept and nothing is added;
//   - else a default action that kills or traps already denies it more
//     strongly, so the name is only taken out of rules that would let it
//     through;
//   - else the name is taken out of every rule naming it (rules left with
//     no names are dropped) and added to one unconditional
//     SCMP_ACT_ERRNO/EPERM rule at the end.
//
// Deny never turns a deny into an allow, and is idempotent.
func Deny(s *specs.Spec, names []string) error {
	if len(names) == 0 {
		return nil
	}
	if s.Linux == nil {
		s.Linux = &specs.Linux{}
	}
	if s.Linux.Seccomp == nil {
		s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Architectures: defaultProfile(s).Architectures}
	}
	p := s.Linux.Seccomp
	var add []string
	for _, n := range names {
		if deniedUnconditionally(p, n) {
			continue
		}
		if killing(p.DefaultAction) {
			removeName(p, n, func(r specs.LinuxSyscall) bool { return !denying(r.Action) })
			continue
		}
		removeName(p, n, func(specs.LinuxSyscall) bool { return true })
		add = append(add, n)
	}
	if len(add) > 0 {
		errno := EPERM
		p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{Names: add, Action: specs.ActErrno, ErrnoRet: &errno})
	}
	return nil
}

// defaultProfile is containerd's default profile for s (its
// architectures are those of this platform; the rest depends on
// its bounding capabilities; none when s has no process or capabilities).
func defaultProfile(s *specs.Spec) *specs.LinuxSeccomp {
	if s.Process != nil && s.Process.Capabilities != nil {
		return ctrdseccomp.DefaultProfile(s)
	}
	return ctrdseccomp.DefaultProfile(&specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}})
}

// denying tells whether an action denies the syscall.
func denying(a specs.LinuxSeccompAction) bool {
	switch a {
	case specs.ActErrno, specs.ActKill, specs.ActKillProcess, specs.ActKillThread, specs.ActTrap:
		return true
	}
	return false
}

// killing tells whether a default action denies more strongly than EPERM.
func killing(a specs.LinuxSeccompAction) bool {
	return denying(a) && a != specs.ActErrno
}

func deniedUnconditionally(p *specs.LinuxSeccomp, name string) bool {
	for _, r := range p.Syscalls {
		if len(r.Args) == 0 && denying(r.Action) && slices.Contains(r.Names, name) {
			return true
		}
	}
	return false
}

// removeName takes name out of the rules pick selects, dropping rules left empty.
func removeName(p *specs.LinuxSeccomp, name string, pick func(specs.LinuxSyscall) bool) {
	out := p.Syscalls[:0]
	for _, r := range p.Syscalls {
		if pick(r) && slices.Contains(r.Names, name) {
			r.Names = slices.DeleteFunc(slices.Clone(r.Names), func(n string) bool { return n == name })
			if len(r.Names) == 0 {
				continue
			}
		}
		out = append(out, r)
	}
	p.Syscalls = out
}
