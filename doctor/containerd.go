package doctor

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/install"
)

// Binaries the runtime installs on a node.
const (
	ShimBinary = "containerd-shim-swift-v2"
	HookBinary = "swift-hook"
)

// DefaultContainerdPIDFile is where containerd writes its pid.
const DefaultContainerdPIDFile = "/run/containerd/containerd.pid"

// DefaultServicePath is the PATH systemd gives a service that sets none:
// containerd's PATH when its environment cannot be read.
const DefaultServicePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// capSysResource is CAP_SYS_RESOURCE's bit in /proc/PID/status CapEff.
const capSysResource = 24

// containerdProc is the running containerd, as far as /proc tells.
type containerdProc struct {
	PID int
	// How says how it was found, for details.
	How string
	// Path is its PATH (DefaultServicePath when its environment is
	// unreadable); PathFrom says where it came from.
	Path, PathFrom string
	// Exe is its binary ("" when unreadable); Config the --config it was
	// started with ("" when none).
	Exe, Config string
}

// findContainerd finds the containerd process: the pid in pidFile when
// that process is containerd, else the lowest pid whose comm is
// containerd. ok is false when none runs.
func findContainerd(procRoot, pidFile string) (p containerdProc, ok bool) {
	isContainerd := func(pid int) bool {
		b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "comm"))
		return err == nil && strings.TrimSpace(string(b)) == "containerd"
	}
	if b, err := os.ReadFile(pidFile); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 && isContainerd(pid) {
			p = containerdProc{PID: pid, How: "pid " + strconv.Itoa(pid) + " from " + pidFile}
		}
	}
	if p.PID == 0 {
		ents, _ := os.ReadDir(procRoot)
		var pids []int
		for _, e := range ents {
			if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 && isContainerd(pid) {
				pids = append(pids, pid)
			}
		}
		if len(pids) == 0 {
			return p, false
		}
		sort.Ints(pids)
		p = containerdProc{PID: pids[0], How: "pid " + strconv.Itoa(pids[0]) + ", the process named containerd"}
		if len(pids) > 1 {
			p.How += fmt.Sprintf(" (of %d)", len(pids))
		}
	}
	dir := filepath.Join(procRoot, strconv.Itoa(p.PID))
	p.Path, p.PathFrom = DefaultServicePath, "the default service PATH ("+filepath.Join(dir, "environ")+" unreadable)"
	if b, err := os.ReadFile(filepath.Join(dir, "environ")); err == nil {
		p.PathFrom = "PATH unset in " + filepath.Join(dir, "environ") + ": the default service PATH"
		for _, kv := range bytes.Split(b, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("PATH=")); ok {
				p.Path, p.PathFrom = string(v), "containerd's PATH"
			}
		}
	}
	if exe, err := os.Readlink(filepath.Join(dir, "exe")); err == nil {
		p.Exe = strings.TrimSuffix(exe, " (deleted)")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		for i, a := range args {
			switch {
			case (a == "--config" || a == "-c") && i+1 < len(args):
				p.Config = args[i+1]
			case strings.HasPrefix(a, "--config="):
				p.Config = strings.TrimPrefix(a, "--config=")
			case strings.HasPrefix(a, "-c="):
				p.Config = strings.TrimPrefix(a, "-c=")
			}
		}
	}
	return p, true
}

// procLimits reads the soft and hard "Max locked memory" of /proc/PID/limits.
func procMemlock(procRoot string, pid int) (soft, hard uint64, err error) {
	f, err := os.Open(filepath.Join(procRoot, strconv.Itoa(pid), "limits"))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Max locked memory")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) < 2 {
			break
		}
		parse := func(s string) (uint64, error) {
			if s == "unlimited" {
				return config.MemlockUnlimited, nil
			}
			return strconv.ParseUint(s, 10, 64)
		}
		if soft, err = parse(fields[0]); err == nil {
			hard, err = parse(fields[1])
		}
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %q: %w", f.Name(), sc.Text(), err)
		}
		return soft, hard, nil
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	return 0, 0, fmt.Errorf("%s has no \"Max locked memory\" line", f.Name())
}

// procHasCap tells whether /proc/PID/status says the process holds bit in CapEff.
func procHasCap(procRoot string, pid int, bit uint) bool {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "status"))
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && n&(1<<bit) != 0
		}
	}
	return false
}

const notRunning = "containerd is not running (no containerd process under %s, %s names none)"

// checkMemlock compares containerd's RLIMIT_MEMLOCK, which the shim and
// runc inherit, with what opted-in containers get.
func checkMemlock(n Node, cfg config.Config, cd containerdProc, found bool) Result {
	r := Result{Check: "memlock"}
	want := cfg.MemlockBytes()
	if !found {
		r.Status = Warn
		r.Detail = fmt.Sprintf(notRunning+": its RLIMIT_MEMLOCK, which the shim inherits, is unknown", n.ProcRoot, n.ContainerdPIDFile)
		r.Fix = "start containerd (systemctl start containerd), then run swiftctl doctor again"
		return r
	}
	_, hard, err := procMemlock(n.ProcRoot, cd.PID)
	if err != nil {
		r.Status, r.Detail = Warn, fmt.Sprintf("containerd (%s): cannot read its RLIMIT_MEMLOCK: %v", cd.How, err)
		r.Fix = "run swiftctl doctor as root"
		return r
	}
	have := fmt.Sprintf("containerd (%s) has hard RLIMIT_MEMLOCK %s", cd.How, size(hard))
	switch {
	case hard >= want:
		r.Status, r.Detail = OK, fmt.Sprintf("%s, which covers rdma.memlock %s", have, cfg.RDMA.Memlock)
	case procHasCap(n.ProcRoot, cd.PID, capSysResource):
		r.Status, r.Detail = OK, fmt.Sprintf("%s, below rdma.memlock %s, but it holds CAP_SYS_RESOURCE, so runc can raise it", have, cfg.RDMA.Memlock)
	default:
		r.Status = Fail
		r.Detail = fmt.Sprintf("%s, below rdma.memlock %s, and no CAP_SYS_RESOURCE to raise it: every opted-in container is refused", have, cfg.RDMA.Memlock)
		r.Fix = fmt.Sprintf("systemctl edit containerd, add [Service] LimitMEMLOCK=infinity, then systemctl restart containerd; or lower rdma.memlock in %s to %s",
			n.ConfigPath, size(hard))
	}
	return r
}

// executable tells whether p is a regular file someone may execute.
func executable(p string) (os.FileInfo, bool) {
	fi, err := os.Stat(p)
	return fi, err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// checkShim finds containerd-shim-swift-v2 where containerd looks for it:
// the runtime entry's runtime_path, else containerd's PATH, else beside
// containerd's own binary. It returns the shim's path ("" when not found).
func checkShim(n Node, cd containerdProc, found bool, entry *install.Runtime) (Result, string) {
	r := Result{Check: "shim.binary"}
	if entry != nil && entry.Path != "" {
		if _, ok := executable(entry.Path); ok {
			r.Status, r.Detail = OK, fmt.Sprintf("%s (runtime_path of runtime %q in %s)", entry.Path, entry.Name, entry.File)
			return r, entry.Path
		}
		r.Status = Fail
		r.Detail = fmt.Sprintf("runtime %q in %s sets runtime_path = %q, which is not an executable file: containerd cannot start the shim", entry.Name, entry.File, entry.Path)
		r.Fix = fmt.Sprintf("install %s there (make install), or remove runtime_path from that entry so containerd looks on its PATH", ShimBinary)
		return r, ""
	}
	searchPath, from := DefaultServicePath, "the default service PATH (containerd is not running)"
	if found {
		searchPath, from = cd.Path, cd.PathFrom+" ("+cd.How+")"
	}
	for _, dir := range filepath.SplitList(searchPath) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, ShimBinary)
		if _, ok := executable(p); ok {
			r.Status, r.Detail = OK, fmt.Sprintf("%s, on %s", p, from)
			return r, p
		}
	}
	if found && cd.Exe != "" {
		p := filepath.Join(filepath.Dir(cd.Exe), ShimBinary)
		if _, ok := executable(p); ok {
			r.Status, r.Detail = OK, fmt.Sprintf("%s, beside containerd's binary %s", p, cd.Exe)
			return r, p
		}
	}
	r.Status = Fail
	r.Detail = fmt.Sprintf("%s is not on %s (PATH=%s): containerd cannot start a Swift container", ShimBinary, from, searchPath)
	r.Fix = fmt.Sprintf("make install (puts %s in /usr/local/bin), or copy it into a directory of that PATH, then run swiftctl doctor again", ShimBinary)
	return r, ""
}

// checkHook checks swift-hook at hooks.path, else beside the shim: runc
// runs it as root for every opted-in container, so it must be root's and
// writable by no one else.
func checkHook(n Node, cfg config.Config, shim string) Result {
	r := Result{Check: "hooks.swift-hook"}
	p, where := cfg.Hooks.Path, "hooks.path"
	if p == "" {
		if shim == "" {
			r.Status, r.Detail, r.Fix = Warn, "not checked: hooks.path is unset and the shim was not found (swift-hook must be beside it)", "see shim.binary"
			return r
		}
		p, where = filepath.Join(filepath.Dir(shim), HookBinary), "beside the shim (hooks.path unset)"
	}
	fi, ok := executable(p)
	if !ok {
		r.Status = Fail
		r.Detail = fmt.Sprintf("%s (%s) is not an executable file: every opted-in container is refused", p, where)
		r.Fix = fmt.Sprintf("install %s with the shim (make install), or set hooks.path in %s", HookBinary, n.ConfigPath)
		return r
	}
	st, isUnix := fi.Sys().(*syscall.Stat_t)
	if isUnix && (st.Uid != 0 || fi.Mode().Perm()&0o022 != 0) {
		r.Status = Fail
		r.Detail = fmt.Sprintf("%s (%s) is owned by uid %d with mode %v: runc runs it as root, so it must be root's and writable by no one else; every opted-in container is refused",
			p, where, st.Uid, fi.Mode().Perm())
		r.Fix = fmt.Sprintf("chown root:root %s && chmod go-w %s", p, p)
		return r
	}
	r.Status, r.Detail = OK, fmt.Sprintf("%s (%s): executable, root's, writable by root only", p, where)
	return r
}

// checkZygoteBin checks that zygote.bin_dir holds swift-init and swift-run.
func checkZygoteBin(n Node, cfg config.Config) Result {
	r := Result{Check: "zygote.bin_dir"}
	dir := cfg.Zygote.BinDir
	var missing []string
	for _, f := range []string{"swift-init", "swift-run"} {
		if _, ok := executable(filepath.Join(dir, f)); !ok {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		r.Status = Warn
		r.Detail = fmt.Sprintf("%s (zygote.bin_dir) lacks %s: containers with swift.io/zygote=true are refused", dir, strings.Join(missing, " and "))
		r.Fix = fmt.Sprintf("make install (puts swift-init and swift-run in %s), or set zygote.bin_dir in %s to where they are", config.DefaultZygoteBinDir, n.ConfigPath)
		return r
	}
	// the shim hands a zygote its key with pidfd_getfd, which Yama's
	// ptrace_scope 3 refuses to everyone
	if b, err := os.ReadFile(filepath.Join(n.ProcRoot, "sys/kernel/yama/ptrace_scope")); err == nil && strings.TrimSpace(string(b)) == "3" {
		r.Status = Warn
		r.Detail = "kernel.yama.ptrace_scope is 3: the shim cannot hand a zygote its tenant key (pidfd_getfd needs ptrace rights), so containers with swift.io/zygote=true do not start"
		r.Fix = "set kernel.yama.ptrace_scope to 2 or lower (2 lets only root, as the shim runs); scope 3 holds until the next boot"
		return r
	}
	r.Status, r.Detail = OK, dir+": swift-init and swift-run"
	return r
}

// checkCRIRuntime checks that containerd's config declares a CRI runtime
// of the Swift type that passes the swift.io/ pod annotations through.
// It returns the entry (nil when there is none).
func checkCRIRuntime(n Node, cd containerdProc, found bool) (Result, *install.Runtime) {
	r := Result{Check: "containerd.cri_runtime"}
	path := n.ContainerdConfig
	if path == "" && found && cd.Config != "" {
		path = cd.Config
	}
	if path == "" {
		path = install.DefaultConfigPath
	}
	c, err := install.ReadCRI(path)
	if err != nil {
		r.Status = Warn
		r.Detail = fmt.Sprintf("cannot read containerd's config: %v: Kubernetes pods cannot select the Swift runtime (ctr and nerdctl --runtime %s can)", err, install.RuntimeType)
		r.Fix = "swiftctl install containerd --config " + path + " (containerd config default > " + path + " first when it does not exist), then systemctl restart containerd"
		return r, nil
	}
	names := c.RuntimesOfType(install.RuntimeType)
	if len(names) == 0 {
		r.Status = Warn
		r.Detail = fmt.Sprintf("%s (and its imports) declares no CRI runtime of type %s: Kubernetes pods cannot select it (ctr and nerdctl --runtime %s can)",
			path, install.RuntimeType, install.RuntimeType)
		r.Fix = "swiftctl install containerd --config " + path + ", then systemctl restart containerd"
		return r, nil
	}
	var ok, bad []string
	var first *install.Runtime
	for _, name := range names {
		rt := c.Runtimes[name]
		if first == nil {
			first = &rt
		}
		if missed := notPassed(rt.PodAnnotations); len(missed) > 0 {
			bad = append(bad, fmt.Sprintf("runtime %q in %s: pod_annotations %q do not pass %s", name, rt.File, rt.PodAnnotations, strings.Join(missed, ", ")))
			continue
		}
		ok = append(ok, fmt.Sprintf("%q (%s)", name, rt.File))
	}
	if len(bad) > 0 {
		r.Status = Fail
		r.Detail = strings.Join(bad, "; ") + ": pods cannot ask for RDMA, a tenant or the zygote"
		r.Fix = fmt.Sprintf("set pod_annotations = [%q] in that runtime entry (swiftctl install containerd writes it), then systemctl restart containerd", install.AnnotationGlob)
		return r, first
	}
	r.Status = OK
	r.Detail = fmt.Sprintf("runtime %s of type %s passes the swift.io/ pod annotations", strings.Join(ok, ", "), install.RuntimeType)
	return r, first
}

// notPassed lists the swift.io/ annotations that no pattern passes
// through (CRI matches them with path.Match).
func notPassed(patterns []string) []string {
	var out []string
	for _, k := range annotations.Known {
		passed := false
		for _, p := range patterns {
			if m, _ := path.Match(p, k); m {
				passed = true
				break
			}
		}
		if !passed {
			out = append(out, k)
		}
	}
	return out
}
