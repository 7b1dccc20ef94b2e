package doctor

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/rdma"
)

// kernelConfig is the running kernel's build config, when readable.
type kernelConfig struct {
	// Source is the file it came from ("" when none was readable).
	Source string
	// Opts maps CONFIG_X to "y", "m", a value, or "n" for "is not set".
	Opts map[string]string
}

// get returns the option's value ("" when the config is unknown or silent).
func (k kernelConfig) get(opt string) string { return k.Opts[opt] }

var notSet = regexp.MustCompile(`^# (CONFIG_[A-Za-z0-9_]+) is not set$`)

// readKernelConfig reads procRoot/config.gz, else bootRoot/config-RELEASE.
func readKernelConfig(procRoot, bootRoot, release string) kernelConfig {
	try := func(path string, gz bool) (kernelConfig, bool) {
		f, err := os.Open(path)
		if err != nil {
			return kernelConfig{}, false
		}
		defer f.Close()
		var r io.Reader = f
		if gz {
			zr, err := gzip.NewReader(f)
			if err != nil {
				return kernelConfig{}, false
			}
			defer zr.Close()
			r = zr
		}
		kc := kernelConfig{Source: path, Opts: map[string]string{}}
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			line := sc.Text()
			if m := notSet.FindStringSubmatch(line); m != nil {
				kc.Opts[m[1]] = "n"
			} else if k, v, ok := strings.Cut(line, "="); ok && strings.HasPrefix(k, "CONFIG_") {
				kc.Opts[k] = v
			}
		}
		return kc, sc.Err() == nil
	}
	if kc, ok := try(filepath.Join(procRoot, "config.gz"), true); ok {
		return kc
	}
	if release != "" {
		if kc, ok := try(filepath.Join(bootRoot, "config-"+release), false); ok {
			return kc
		}
	}
	return kernelConfig{}
}

func checkConfig(path string) (config.Config, Result) {
	r := Result{Check: "node.config"}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		r.Status, r.Detail = OK, path+": absent, defaults apply"
		return config.Default(), r
	}
	c, err := config.Load(path)
	if err != nil {
		r.Status, r.Detail = Fail, err.Error()
		r.Fix = "correct the key named above (check with: swiftctl config check " + path + ")"
		return config.Default(), r
	}
	r.Status = OK
	r.Detail = fmt.Sprintf("%s: valid (rdma.default=%v, rdma.memlock=%s)", path, c.RDMA.Default, c.RDMA.Memlock)
	return c, r
}

func checkKernel(n Node, kc kernelConfig) Result {
	r := Result{Check: "rdma.kernel"}
	class := filepath.Join(n.SysRoot, "sys/class/infiniband")
	if fi, err := os.Stat(class); err == nil && fi.IsDir() {
		r.Status, r.Detail = OK, "RDMA core loaded ("+class+" present)"
		return r
	}
	r.Status = Fail
	rel := n.KernelRelease
	switch v := kc.get("CONFIG_INFINIBAND"); v {
	case "n":
		r.Detail = fmt.Sprintf("no RDMA support: kernel %s is built without CONFIG_INFINIBAND (%s), so there are no RDMA devices (%s absent)", rel, kc.Source, class)
		r.Fix = "boot a kernel with CONFIG_INFINIBAND=m and a provider (e.g. Debian's linux-image-amd64 with rdma_rxe), or run RDMA tests in the VM (test/vm)"
	case "m":
		r.Detail = fmt.Sprintf("no RDMA devices: kernel %s has CONFIG_INFINIBAND=m but ib_core is not loaded (%s absent)", rel, class)
		r.Fix = "modprobe ib_uverbs rdma_ucm and the NIC's RDMA driver (or rdma_rxe for soft-RoCE)"
	case "y":
		r.Detail = fmt.Sprintf("%s absent although kernel %s has CONFIG_INFINIBAND=y: is sysfs mounted under rdma.sys_root (%s)?", class, rel, n.SysRoot)
		r.Fix = "mount sysfs at " + filepath.Join(n.SysRoot, "sys") + " or set rdma.sys_root in the node config"
	default:
		r.Detail = fmt.Sprintf("no RDMA devices or kernel without CONFIG_INFINIBAND: %s absent (kernel config not readable)", class)
		r.Fix = "modprobe ib_uverbs rdma_ucm; if that fails the kernel lacks CONFIG_INFINIBAND"
	}
	return r
}

func skipped(check string) Result {
	return Result{Check: check, Status: Warn, Detail: "not checked: no RDMA kernel support", Fix: "see rdma.kernel"}
}

func checkDevices(n Node, kernelOK bool) []Result {
	if !kernelOK {
		return []Result{skipped("rdma.devices"), skipped("rdma.cm")}
	}
	var rs []Result
	inv, err := rdma.Discover(n.SysRoot, n.DevRoot)
	if err != nil {
		return []Result{{Check: "rdma.devices", Status: Fail, Detail: err.Error(),
			Fix: "recreate the node with the numbers sysfs gives (udev with rdma-core's rules, or mknod), or set rdma.dev_root"},
			{Check: "rdma.cm", Status: Warn, Detail: "not checked: device discovery failed", Fix: "see rdma.devices"}}
	}
	// verbs devices without a uverbs node (ib_uverbs not loaded)
	entries, _ := os.ReadDir(filepath.Join(n.SysRoot, "sys/class/infiniband"))
	var noUverbs []string
	for _, e := range entries {
		if _, ok := inv.Device(e.Name()); !ok {
			noUverbs = append(noUverbs, e.Name())
		}
	}
	switch {
	case len(inv.Devices) == 0 && len(noUverbs) == 0:
		rs = append(rs, Result{Check: "rdma.devices", Status: Fail, Detail: "no RDMA devices",
			Fix: "load the NIC's RDMA driver, or add soft-RoCE: modprobe rdma_rxe; rdma link add rxe0 type rxe netdev eth0"})
	case len(noUverbs) == 0:
		rs = append(rs, Result{Check: "rdma.devices", Status: OK,
			Detail: fmt.Sprintf("%d with uverbs nodes: %s", len(inv.Devices), strings.Join(inv.Names(), ", "))})
	default:
		st := Warn
		if len(inv.Devices) == 0 {
			st = Fail
		}
		rs = append(rs, Result{Check: "rdma.devices", Status: st,
			Detail: fmt.Sprintf("%d with uverbs nodes (%s), %d without (%s)", len(inv.Devices), strings.Join(inv.Names(), ", "),
				len(noUverbs), strings.Join(noUverbs, ", ")),
			Fix: "modprobe ib_uverbs"})
	}
	for _, d := range inv.Devices {
		rs = append(rs, Result{Check: "rdma.device/" + d.Name, Status: OK,
			Detail: fmt.Sprintf("%s is %d:%d as sysfs says (guid %s, fw %s)", d.Uverbs.HostPath, d.Uverbs.Major, d.Uverbs.Minor, d.NodeGUID, d.FWVersion)})
		rs = append(rs, checkProvider(n.SysRoot, d.Name))
	}
	for _, name := range noUverbs {
		rs = append(rs, Result{Check: "rdma.device/" + name, Status: Fail,
			Detail: "no uverbs node in sys/class/infiniband_verbs: ib_uverbs not loaded, containers cannot use it",
			Fix:    "modprobe ib_uverbs"})
	}
	if inv.RDMACM != nil {
		rs = append(rs, Result{Check: "rdma.cm", Status: OK,
			Detail: fmt.Sprintf("%s is %d:%d as sysfs says", inv.RDMACM.HostPath, inv.RDMACM.Major, inv.RDMACM.Minor)})
	} else {
		rs = append(rs, Result{Check: "rdma.cm", Status: Warn,
			Detail: "no rdma_cm device (rdma_ucm not loaded): containers get no RDMA connection manager (librdmacm)",
			Fix:    "modprobe rdma_ucm"})
	}
	return rs
}

// Provider capabilities for sharing verbs objects with forked children.
const (
	CapRelay  = "relay doorbell"
	CapShared = "shared buffers (untested on hardware)"
	CapNone   = "none (functions connect QPs of their own)"
)

// Provider tells a device's kernel driver, where that came from, and its
// fork-sharing capability in words (rdma.Provider).
func Provider(sysRoot, name string) (driver, source, capability string) {
	driver, source, mode := rdma.Provider(sysRoot, name)
	switch mode {
	case rdma.ShareRelay:
		capability = CapRelay
	case rdma.ShareBuffers:
		capability = CapShared
	default:
		capability = CapNone
	}
	return driver, source, capability
}

func checkProvider(sysRoot, name string) Result {
	driver, source, capability := Provider(sysRoot, name)
	r := Result{Check: "rdma.provider/" + name, Detail: fmt.Sprintf("%s (%s): fork sharing by %s", driver, source, capability)}
	switch capability {
	case CapRelay:
		r.Status = OK
	case CapShared:
		r.Status = Warn
		r.Fix = "verify swift.io/zygote=true on this device before relying on it: the zygote allocates mlx5 queues in shared memory through a parent domain and replaces a QP after each function, which is built but verified on rxe only"
	default:
		r.Status = Warn
		r.Fix = "swift.io/zygote=true forks functions here, but each creates and connects QPs of its own (the swift-run --own path, verified on rxe only): this provider's pool queues live in memory a forked child does not share with the device"
	}
	return r
}

func checkSystem(n Node, kernelOK bool) []Result {
	if !kernelOK {
		return []Result{skipped("rdma.netns"), skipped("rdma.copy_on_fork")}
	}
	info, err := n.RDMASystem()
	if err != nil {
		fail := func(check string) Result {
			return Result{Check: check, Status: Fail, Detail: "RDMA netlink query failed: " + err.Error(),
				Fix: "load ib_core (modprobe ib_uverbs); run doctor as root in the host network namespace"}
		}
		return []Result{fail("rdma.netns"), fail("rdma.copy_on_fork")}
	}
	var rs []Result
	switch info.NetnsMode {
	case "shared":
		rs = append(rs, Result{Check: "rdma.netns", Status: OK, Detail: "shared: every network namespace sees every RDMA device"})
	case "exclusive":
		rs = append(rs, Result{Check: "rdma.netns", Status: Warn,
			Detail: "exclusive: a container in its own network namespace sees no RDMA device unless the device is moved there",
			Fix:    "rdma system set netns shared (moving devices into pod namespaces is not implemented)"})
	default:
		rs = append(rs, Result{Check: "rdma.netns", Status: Warn, Detail: "the kernel reports no RDMA netns mode (kernel older than 5.2?)",
			Fix: "use a kernel ≥ 5.13"})
	}
	switch {
	case info.CopyOnFork != nil && *info.CopyOnFork:
		rs = append(rs, Result{Check: "rdma.copy_on_fork", Status: OK, Detail: "on: memory registered before fork stays valid in parent and child"})
	default:
		what := "off"
		if info.CopyOnFork == nil {
			what = "not reported (kernel older than 5.13)"
		}
		rs = append(rs, Result{Check: "rdma.copy_on_fork", Status: Warn,
			Detail: "copy-on-fork " + what + ": forking after registering memory needs ibv_fork_init, and the zygote (planned) would not work",
			Fix:    "use a kernel ≥ 5.13"})
	}
	return rs
}

func checkCgroup(n Node, cfg config.Config, kc kernelConfig) Result {
	r := Result{Check: "rdma.cgroup"}
	mode := "v1"
	if _, err := os.Stat(filepath.Join(n.CgroupRoot, "cgroup.controllers")); err == nil {
		mode = "v2"
	}
	if rdma.CgroupAvailable(n.CgroupRoot) {
		r.Status, r.Detail = OK, "rdma controller available (cgroup "+mode+" at "+n.CgroupRoot+")"
		return r
	}
	r.Status = Warn
	var why string
	switch {
	case kc.get("CONFIG_CGROUP_RDMA") == "n":
		why = "the kernel is built without CONFIG_CGROUP_RDMA"
		r.Fix = "use a kernel with CONFIG_CGROUP_RDMA=y to enforce rdma.hca_* limits"
	case mode == "v1":
		why = "no rdma hierarchy is mounted"
		r.Fix = "mount it: mkdir " + filepath.Join(n.CgroupRoot, "rdma") + " && mount -t cgroup -o rdma rdma " + filepath.Join(n.CgroupRoot, "rdma")
	default:
		why = "rdma is not in " + filepath.Join(n.CgroupRoot, "cgroup.controllers")
		r.Fix = "use a kernel with CONFIG_CGROUP_RDMA=y"
	}
	limits := "rdma.hca_handle/hca_object limits would be left out"
	if cfg.RDMA.HCAHandle > 0 || cfg.RDMA.HCAObject > 0 {
		limits = fmt.Sprintf("the configured limits (hca_handle=%d, hca_object=%d) are left out", cfg.RDMA.HCAHandle, cfg.RDMA.HCAObject)
	}
	r.Detail = fmt.Sprintf("cgroup %s: %s; %s", mode, why, limits)
	return r
}

func size(n uint64) string {
	switch {
	case n == config.MemlockUnlimited:
		return "unlimited"
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return strconv.FormatUint(n, 10)
}

var versionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)(?:\.(\d+))?`)

// ParseVersion finds the first MAJOR.MINOR[.PATCH] among the fields of
// `tool --version` output (after the program name).
func ParseVersion(out string) (major, minor int, text string, ok bool) {
	line, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	fields := strings.Fields(line)
	for i, f := range fields {
		if i == 0 {
			continue
		}
		if m := versionRE.FindStringSubmatch(f); m != nil {
			major, _ = strconv.Atoi(m[1])
			minor, _ = strconv.Atoi(m[2])
			return major, minor, f, true
		}
	}
	return 0, 0, "", false
}

// probeVersion runs bin --version for r's check. When bin does not run
// (Fail, with installFix) or prints no version it recognises (Warn: check
// by hand that it is atLeast), it fills r and returns ok false.
func probeVersion(ctx context.Context, n Node, r *Result, bin, installFix, atLeast string) (major, minor int, v string, ok bool) {
	out, err := n.Version(ctx, bin)
	if err != nil {
		r.Status = Fail
		r.Detail = fmt.Sprintf("cannot run %s --version: %v", bin, err)
		r.Fix = installFix
		return 0, 0, "", false
	}
	major, minor, v, ok = ParseVersion(out)
	if !ok {
		r.Status, r.Detail = Warn, fmt.Sprintf("unrecognised version output %q", strings.TrimSpace(out))
		r.Fix = "check by hand that it is " + atLeast
	}
	return major, minor, v, ok
}

func checkContainerd(ctx context.Context, n Node) Result {
	r := Result{Check: "containerd"}
	major, minor, v, ok := probeVersion(ctx, n, &r, n.Containerd,
		"install containerd 2.x (or 1.7), or name its binary with --containerd", "containerd ≥ 1.7")
	if !ok {
		return r
	}
	switch {
	case major == 2:
		r.Status, r.Detail = OK, "containerd "+v+": supported (2.x; tested with 2.4.2, config version 3 or 4)"
	case major == 1 && minor == 7:
		r.Status, r.Detail = OK, "containerd "+v+": supported (1.7, config version 2)"
	case major > 2:
		r.Status, r.Detail = Warn, "containerd "+v+": newer than the support matrix (1.7, 2.x)"
		r.Fix = "test it, or run containerd 2.x"
	default:
		r.Status = Fail
		r.Detail = "containerd " + v + ": unsupported (it cannot start shims built with the containerd/v2 module; need ≥ 1.7)"
		r.Fix = "upgrade to containerd 2.x (or 1.7); Debian 12's containerd package is 1.6"
	}
	return r
}

func checkRunc(ctx context.Context, n Node) Result {
	r := Result{Check: "runc"}
	major, minor, v, ok := probeVersion(ctx, n, &r, n.Runc,
		"apt-get install runc (1.1+), or name its binary with --runc", "runc ≥ 1.1")
	if !ok {
		return r
	}
	switch {
	case major > 1 || major == 1 && minor >= 1:
		r.Status, r.Detail = OK, "runc "+v+": supported (1.1+)"
	default:
		r.Status, r.Detail = Fail, "runc "+v+": too old (need 1.1+)"
		r.Fix = "upgrade runc to 1.1 or later"
	}
	return r
}
