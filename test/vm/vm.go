package vm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/swift-rdma/swift-containerd/test/harness"
)

// Scenario names, in the order the guest runs them (see guest/scenarios.sh).
const (
	ScenarioRxe             = "rxe"
	ScenarioRDMAContainer   = "rdma-container"
	ScenarioNoRDMAContainer = "no-rdma-container"
	ScenarioRDMALimit       = "rdma-limit"
	ScenarioCleanup         = "cleanup"
	ScenarioZygote          = "zygote"
	ScenarioForkBench       = "fork-bench"
	ScenarioDemo            = "demo"
	// ScenarioDemoHang is the demo with a step made to hang: it must FAIL
	// within that step's own bound, naming the step.
	ScenarioDemoHang = "demo-hang"
	// ScenarioGateway invokes functions over HTTP through swift-gateway,
	// as OpenWhisk's invoker and Knative would, and measures invocation
	// (invoke.* in make bench).
	ScenarioGateway = "gateway"
	// ScenarioImpostor: a key holder's zygote under another's name is
	// refused; the victim's link, QPs and data are untouched.
	ScenarioImpostor = "impostor"
	// ScenarioSquat: a squatter on a zygote's exchange port does not stop it.
	ScenarioSquat = "squat"
	// ScenarioSniff: a host-network sniffer with CAP_NET_RAW reads no QP
	// number from the exchange (it does from RoCE headers, as documented).
	ScenarioSniff = "sniff"
	// ScenarioHeld: 100 held exchanges beyond a peer's cap are refused
	// and leave no row behind.
	ScenarioHeld    = "held"
	ScenarioDoctor  = "doctor"
	ScenarioPolicy  = "policy"
	ScenarioQPLimit = "qp-limit"
	ScenarioNonRoot = "nonroot"
	// ScenarioAlloc runs pods through CRI whose devices were allocated
	// before the shim (a device plugin's DeviceSpec, CDI).
	ScenarioAlloc = "alloc"
	// ScenarioCNI runs two pods with their own network namespaces
	// (macvlan on the RoCE link, host-local addresses) whose zygotes
	// pre-connect over the pods' own GIDs.
	ScenarioCNI = "cni"
	// ScenarioQuickstart follows the README's quickstart step by step as
	// an operator without Kubernetes would: make install, swiftctl
	// install containerd, the example policy, doctor, and the first pod
	// through crictl with examples/crictl (guest/quickstart.sh).
	ScenarioQuickstart = "quickstart"
	ScenarioHostile    = "hostile"
	// ScenarioXData and the other x- scenarios run on a pair of guests.
	ScenarioXData    = "x-data"
	ScenarioXKeys    = "x-keys"
	ScenarioXTamper  = "x-tamper"
	ScenarioXRestart = "x-restart"
	// ScenarioXCRI runs a pod through CRI (crictl) on node a: a sidecar
	// and a zygote container connecting to node b.
	ScenarioXCRI = "x-cri"
	// ScenarioXBench measures the data plane and fork start across the
	// pair (make bench).
	ScenarioXBench = "x-bench"
	// ScenarioXPodnet: pods on their own networks (CNI macvlan on the
	// link) each get a soft-RoCE device of their own (rdma.pod_softroce)
	// and their zygotes pre-connect across the pair; RDMA netns shared
	// mode. ScenarioXPodnetExclusive: the same in exclusive mode, where
	// the pod's device is moved into its namespace. Both need Linux 7.1
	// or later: they run on the pair, which boots PairKernel.
	ScenarioXPodnet          = "x-podnet"
	ScenarioXPodnetExclusive = "x-podnet-exclusive"
	// ScenarioXK8s makes the pair a Kubernetes cluster (k8s.go): a kubelet
	// on each guest, the control plane on the host, which runs every k8s-
	// check with kubectl while the guests serve as nodes (guest/k8s.sh).
	ScenarioXK8s = "x-k8s"
	// ScenarioBroken fails on purpose; it runs only when SWIFT_VM_BROKEN is set.
	ScenarioBroken = "broken"
	// ScenarioProbe runs the shell script SWIFT_VM_PROBE names (a host
	// path, read over the 9p root) in the guest: a developer's experiment
	// on real rxe, with containerd running. Selected only by name.
	ScenarioProbe = "probe"
	// ScenarioXProbe runs SWIFT_VM_PROBE on both guests of a pair
	// ($NODE is a or b; xsync, xput and xget meet the other node).
	ScenarioXProbe = "x-probe"
)

// AllScenarios is the default batch, in run order.
var AllScenarios = []string{
	ScenarioRxe, ScenarioRDMAContainer, ScenarioNoRDMAContainer, ScenarioRDMALimit, ScenarioCleanup,
	ScenarioZygote, ScenarioSquat, ScenarioImpostor, ScenarioSniff, ScenarioHeld, ScenarioHostile, ScenarioDoctor, ScenarioPolicy, ScenarioQPLimit, ScenarioNonRoot, ScenarioVerbs, ScenarioVerbsInvalidate,
	ScenarioAlloc, ScenarioCNI, ScenarioQuickstart, ScenarioDemoHang, ScenarioGateway,
	ScenarioXData, ScenarioXKeys, ScenarioXTamper, ScenarioXRestart, ScenarioXCRI,
	ScenarioXPodnet, ScenarioXPodnetExclusive, ScenarioXK8s,
}

// BenchScenarios are what `make bench` runs with full counts; `make test`
// runs them too, with a few runs each (SWIFT_VM_BENCH_RUNS), and the demo
// through `make demo` itself.
var BenchScenarios = []string{ScenarioForkBench, ScenarioVerbsBench, ScenarioDemo, ScenarioXBench}

// DefaultBenchRuns is the run count of each mode in a benchmark scenario.
const DefaultBenchRuns = 30

// NeedsContainerd reports whether a scenario runs containers (and so needs
// containerd, runc and the Swift shim).
func NeedsContainerd(name string) bool {
	return name != ScenarioRxe && name != ScenarioBroken
}

// Default locations; the top-level Makefile exports SWIFT_BIN and
// SWIFT_CONTAINERD_BIN.
const (
	DefaultCacheDir      = "/var/cache/swift-build/vm"
	DefaultContainerdDir = "/var/cache/swift-build/containerd-2.4.2"
	ShimBinary           = "containerd-shim-swift-v2"
	modulePath           = "github.com/swift-rdma/swift-containerd"
)

// Config describes one VM run.
type Config struct {
	Repo            string        // repository root (holds go.mod, test/vm)
	CacheDir        string        // kernel and initramfs cache
	BinDir          string        // holds containerd-shim-swift-v2
	ContainerdDir   string        // holds containerd, ctr, containerd-shim-runc-v2
	CrictlDir       string        // holds crictl (CRI scenarios)
	CNIDir          string        // holds the CNI plugins (pods with their own network)
	K8sDir          string        // holds the Kubernetes binaries (K8sBinaries)
	K8sTimeout      time.Duration // the x-k8s scenario's timeout in the guests
	Scenarios       []string      // scenarios to run, in order
	Broken          string        // "" (off), "1" (exit non-zero) or "hang"
	Timeout         time.Duration // whole VM; the guest is killed after it
	ScenarioTimeout time.Duration // per scenario, enforced inside the guest
	MemoryMiB       int
	CPUs            int
	PairCPUs        int    // CPUs of each guest of a pair
	Kernel          string // the one-guest batch's kernel: 6.1 or 7.3 (guest/build.sh)
	PairKernel      string // the pair's kernel
	Accel           string // auto, tcg or kvm
	RDMALimit       int    // hca_object limit for the rdma-limit scenario
	Keep            bool   // keep the run directory
	Probe           string // script the probe scenario runs
	BenchRuns       int    // runs of each mode in the benchmark scenarios
}

// ConfigFromEnv returns the configuration for the repository at repo,
// overridden by the environment:
//
//	SWIFT_VM_SCENARIOS         comma/space separated scenarios; "default" is
//	                           the test batch (AllScenarios), also the default
//	SWIFT_VM_BROKEN            1 adds a scenario that exits non-zero; hang adds
//	                           one that hangs until the scenario timeout
//	SWIFT_VM_TIMEOUT           whole-VM timeout (default 40m)
//	SWIFT_VM_SCENARIO_TIMEOUT  per-scenario timeout in the guest (default 5m)
//	SWIFT_VM_K8S_TIMEOUT       x-k8s's, every k8s- check in one (default 30m)
//	SWIFT_VM_CACHE             kernel/initramfs cache (default /var/cache/swift-build/vm)
//	SWIFT_BIN                  directory with containerd-shim-swift-v2 (default <repo>/bin)
//	SWIFT_CONTAINERD_BIN       directory with containerd, ctr, containerd-shim-runc-v2
//	SWIFT_CRICTL_BIN           directory with crictl (scenarios through CRI)
//	SWIFT_CNI_BIN              directory with the CNI plugins (macvlan, host-local, loopback)
//	SWIFT_K8S_BIN              directory with the Kubernetes binaries (x-k8s)
//	SWIFT_VM_KERNEL            kernel of the one-guest batch: 6.1 (default:
//	                           Debian 12's, where rxe lives in the node's
//	                           network namespace) or 7.3
//	SWIFT_VM_PAIR_KERNEL       kernel of the pair: 7.3 (default: trixie-
//	                           backports, rxe per network namespace) or 6.1
//	SWIFT_VM_ACCEL             auto (default), tcg or kvm
//	SWIFT_VM_MEMORY            guest memory in MiB (default 2048)
//	SWIFT_VM_CPUS              guest CPUs (default 2)
//	SWIFT_VM_PAIR_CPUS         CPUs of each guest of a pair (default 1: two
//	                           guests of two on a two-core host leave a woken
//	                           vCPU waiting for a host core)
//	SWIFT_VM_RDMA_LIMIT        hca_object limit tested by rdma-limit (default 5)
//	SWIFT_VM_KEEP              1 keeps the run directory (console log, results)
//	SWIFT_VM_PROBE             script the probe scenario runs in the guest
//	SWIFT_VM_BENCH_RUNS        runs of each mode in fork-bench, verbs-bench and
//	                           x-bench (default 30; `make test` runs them with 3,
//	                           so that none of them can break unseen)
func ConfigFromEnv(repo string) (Config, error) {
	c := Config{
		Repo:            repo,
		CacheDir:        envOr("SWIFT_VM_CACHE", DefaultCacheDir),
		BinDir:          envOr("SWIFT_BIN", filepath.Join(repo, "bin")),
		ContainerdDir:   envOr("SWIFT_CONTAINERD_BIN", DefaultContainerdDir),
		CrictlDir:       os.Getenv(harness.EnvCrictlBin),
		CNIDir:          os.Getenv(EnvCNIBin),
		K8sDir:          os.Getenv(EnvK8sBin),
		K8sTimeout:      30 * time.Minute,
		Scenarios:       AllScenarios,
		Broken:          os.Getenv("SWIFT_VM_BROKEN"),
		Timeout:         40 * time.Minute,
		ScenarioTimeout: 5 * time.Minute,
		MemoryMiB:       2048,
		CPUs:            2,
		PairCPUs:        1,
		Kernel:          envOr("SWIFT_VM_KERNEL", Kernel61),
		PairKernel:      envOr("SWIFT_VM_PAIR_KERNEL", Kernel73),
		Accel:           envOr("SWIFT_VM_ACCEL", "auto"),
		RDMALimit:       5,
		Keep:            os.Getenv("SWIFT_VM_KEEP") == "1",
		Probe:           os.Getenv("SWIFT_VM_PROBE"),
		BenchRuns:       DefaultBenchRuns,
	}
	if s := os.Getenv("SWIFT_VM_SCENARIOS"); s != "" {
		c.Scenarios = nil
		for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
			if f == "default" {
				c.Scenarios = append(c.Scenarios, AllScenarios...)
				continue
			}
			if !knownScenario(f) {
				return c, fmt.Errorf("SWIFT_VM_SCENARIOS: unknown scenario %q (known: %s, %s)",
					f, strings.Join(AllScenarios, ", "), ScenarioBroken)
			}
			c.Scenarios = append(c.Scenarios, f)
		}
	}
	if contains(c.Scenarios, ScenarioProbe) || contains(c.Scenarios, ScenarioXProbe) {
		if c.Probe == "" || !filepath.IsAbs(c.Probe) {
			return c, fmt.Errorf("scenario probe needs SWIFT_VM_PROBE, an absolute path to a script (got %q)", c.Probe)
		}
		if _, err := os.Stat(c.Probe); err != nil {
			return c, fmt.Errorf("SWIFT_VM_PROBE: %w", err)
		}
	}
	switch c.Broken {
	case "", "0":
		c.Broken = ""
	case "1", "hang":
		if !contains(c.Scenarios, ScenarioBroken) {
			c.Scenarios = append(append([]string(nil), c.Scenarios...), ScenarioBroken)
		}
	default:
		return c, fmt.Errorf("SWIFT_VM_BROKEN=%q: want 1 or hang", c.Broken)
	}
	var err error
	if c.Timeout, err = envDuration("SWIFT_VM_TIMEOUT", c.Timeout); err != nil {
		return c, err
	}
	if c.ScenarioTimeout, err = envDuration("SWIFT_VM_SCENARIO_TIMEOUT", c.ScenarioTimeout); err != nil {
		return c, err
	}
	if c.K8sTimeout, err = envDuration("SWIFT_VM_K8S_TIMEOUT", c.K8sTimeout); err != nil {
		return c, err
	}
	if c.MemoryMiB, err = envInt("SWIFT_VM_MEMORY", c.MemoryMiB); err != nil {
		return c, err
	}
	if c.CPUs, err = envInt("SWIFT_VM_CPUS", c.CPUs); err != nil {
		return c, err
	}
	if c.PairCPUs, err = envInt("SWIFT_VM_PAIR_CPUS", c.PairCPUs); err != nil {
		return c, err
	}
	if c.RDMALimit, err = envInt("SWIFT_VM_RDMA_LIMIT", c.RDMALimit); err != nil {
		return c, err
	}
	if c.BenchRuns, err = envInt("SWIFT_VM_BENCH_RUNS", c.BenchRuns); err != nil {
		return c, err
	}
	for _, k := range []struct{ key, v string }{{"SWIFT_VM_KERNEL", c.Kernel}, {"SWIFT_VM_PAIR_KERNEL", c.PairKernel}} {
		if k.v != Kernel61 && k.v != Kernel73 {
			return c, fmt.Errorf("%s=%q: want %s or %s", k.key, k.v, Kernel61, Kernel73)
		}
	}
	switch c.Accel {
	case "auto", "tcg", "kvm":
	default:
		return c, fmt.Errorf("SWIFT_VM_ACCEL=%q: want auto, tcg or kvm", c.Accel)
	}
	return c, nil
}

func knownScenario(s string) bool {
	return s == ScenarioBroken || s == ScenarioProbe || s == ScenarioXProbe || contains(AllScenarios, s) ||
		contains(BenchScenarios, s)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envDuration(key string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(key)
	if v == "" {
		return def, nil
	}
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return def, fmt.Errorf("%s=%q: want a duration like 90s or 15m", key, v)
	}
	return d, nil
}

func envInt(key string, def int) (int, error) {
	v := os.Getenv(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return def, fmt.Errorf("%s=%q: want a positive integer", key, v)
	}
	return n, nil
}

// FindRepoRoot walks up from dir to the directory whose go.mod declares
// this module.
func FindRepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module "+modulePath)) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod for %s above %s", modulePath, dir)
		}
	}
}

// lookPath finds a command on PATH or in the sbin directories (which a
// non-login root shell may lack).
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

// MissingHostDeps lists what the host lacks to build and boot the guest,
// each with the Debian package that provides it.
func MissingHostDeps() []string {
	var missing []string
	for _, d := range []struct{ cmd, pkg string }{
		{"qemu-system-x86_64", "qemu-system-x86"},
		{"dpkg-deb", "dpkg"},
		{"apt-get", "apt"},
		{"depmod", "kmod"},
		{"modprobe", "kmod"},
		{"cpio", "cpio"},
		{"gzip", "gzip"},
		{"gcc", "gcc"},
		{"ibv_rc_pingpong", "ibverbs-utils"},
		{"ibv_devinfo", "ibverbs-utils"},
		{"ip", "iproute2"},
		{"rdma", "iproute2"},
		{"runc", "runc"},
		{"timeout", "coreutils"},
	} {
		if _, err := lookPath(d.cmd); err != nil {
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", d.cmd, d.pkg))
		}
	}
	for _, f := range []struct{ path, pkg string }{
		{"/bin/busybox", "busybox-static"},
		{"/usr/include/infiniband/verbs.h", "libibverbs-dev"},
		{"/etc/libibverbs.d/rxe.driver", "ibverbs-providers"},
	} {
		if _, err := os.Stat(f.path); err != nil {
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", f.path, f.pkg))
		}
	}
	if m, _ := filepath.Glob("/usr/lib/x86_64-linux-gnu/libibverbs/librxe-*.so"); len(m) == 0 {
		missing = append(missing, "librxe provider (Debian package ibverbs-providers)")
	}
	return missing
}

// MissingContainerdDeps lists what the container scenarios lack, each with
// the make target that provides it.
func MissingContainerdDeps(c Config) []string {
	var missing []string
	for _, b := range []string{"containerd", "ctr", "containerd-shim-runc-v2"} {
		if !isExecutable(filepath.Join(c.ContainerdDir, b)) {
			missing = append(missing, fmt.Sprintf("%s (containerd 2.4.2; `make deps` builds it)",
				filepath.Join(c.ContainerdDir, b)))
		}
	}
	if !isExecutable(filepath.Join(c.BinDir, ShimBinary)) {
		missing = append(missing, fmt.Sprintf("%s (the Swift shim; `make build` builds it)",
			filepath.Join(c.BinDir, ShimBinary)))
	}
	return missing
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// The guest kernels guest/build.sh builds: Debian 12's 6.1, whose rxe
// receives only in the node's network namespace, and trixie-backports'
// 7.3, whose rxe works per network namespace (Linux 7.1 and later).
const (
	Kernel61 = "6.1"
	Kernel73 = "7.3"
)

// Guest is a built guest: kernel and initramfs.
type Guest struct {
	Kernel string
	Initrd string
}

// BuildGuest builds the guest on kernel series (Kernel61, Kernel73) with
// guest/build.sh, or reuses the cached one. The script's progress goes to
// logw.
func BuildGuest(ctx context.Context, c Config, series string, logw io.Writer) (Guest, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.Repo, "test/vm/guest/build.sh"))
	cmd.Env = append(os.Environ(), "SWIFT_VM_CACHE="+c.CacheDir, "SWIFT_VM_KERNEL="+series)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = logw
	if err := cmd.Run(); err != nil {
		return Guest{}, fmt.Errorf("guest/build.sh: %w", err)
	}
	var g Guest
	for _, l := range strings.Split(out.String(), "\n") {
		if v, ok := strings.CutPrefix(l, "KERNEL="); ok {
			g.Kernel = v
		}
		if v, ok := strings.CutPrefix(l, "INITRD="); ok {
			g.Initrd = v
		}
	}
	if g.Kernel == "" || g.Initrd == "" {
		return g, fmt.Errorf("guest/build.sh printed no KERNEL=/INITRD= lines:\n%s", out.String())
	}
	return g, nil
}

// The guest mounts fresh file systems over these host paths, so host files
// under them are invisible in the guest and must be copied to the results
// share instead.
var guestMasked = []string{"/tmp", "/run", "/var/lib", "/var/tmp", "/dev", "/proc", "/sys"}

// ResultsMount is where the guest mounts the per-run results directory.
const ResultsMount = "/run/swiftvm-results"

func guestVisible(p string) bool {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	for _, m := range guestMasked {
		if p == m || strings.HasPrefix(p, m+"/") {
			return false
		}
	}
	return true
}

// copyTree copies the regular files of src, and of its subdirectories, into dst.
func copyTree(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		info, err := os.Stat(filepath.Join(src, e.Name()))
		if err == nil && info.IsDir() {
			// bin/ has lib/ and handlers/ for the zygote
			if err := copyTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
			continue
		}
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

// guestDir returns the guest's path for host directory dir, copying it into
// the run directory under name when the guest cannot see it in place.
func guestDir(runDir, dir, name string) (string, error) {
	if guestVisible(dir) {
		return dir, nil
	}
	if _, err := os.Stat(dir); err != nil {
		return dir, nil // missing: the guest reports it
	}
	if err := copyTree(dir, filepath.Join(runDir, name)); err != nil {
		return "", fmt.Errorf("copy %s to the results share: %w", dir, err)
	}
	return ResultsMount + "/" + name, nil
}

// guestRepo is the repository as the guest sees it. A checkout the guest
// masks (under /tmp, /run, /var/lib: CI's clones may be there) is given to
// the quickstart scenario, which runs `make install` from it, as what that
// needs: the Makefile and what it includes, the examples, and bin/ (a link
// to the guest's copy of the binaries).
func guestRepo(runDir string, c Config, guestBin string) (string, error) {
	if guestVisible(c.Repo) || !contains(c.Scenarios, ScenarioQuickstart) {
		return c.Repo, nil
	}
	dst := filepath.Join(runDir, "repo")
	for _, f := range []string{"Makefile", "test/vm/vm.mk"} {
		b, err := os.ReadFile(filepath.Join(c.Repo, f))
		if err != nil {
			return "", fmt.Errorf("repository for the guest: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			return "", err
		}
	}
	if err := copyTree(filepath.Join(c.Repo, "examples"), filepath.Join(dst, "examples")); err != nil {
		return "", fmt.Errorf("repository for the guest: %w", err)
	}
	if err := os.Symlink(guestBin, filepath.Join(dst, "bin")); err != nil {
		return "", fmt.Errorf("repository for the guest: %w", err)
	}
	return ResultsMount + "/repo", nil
}

// Prepare fills runDir (the results share) for a run: the guest scripts,
// the rdmaquota test program, the container rootfs and the env file the
// guest reads.
func Prepare(ctx context.Context, c Config, runDir string, logw io.Writer) error {
	return prepare(ctx, c, runDir, nil, logw)
}

// prepare is Prepare with extra env entries (a guest of a pair: its node).
func prepare(ctx context.Context, c Config, runDir string, extra map[string]string, logw io.Writer) error {
	if err := copyTree(filepath.Join(c.Repo, "test/vm/guest"), filepath.Join(runDir, "guest")); err != nil {
		return fmt.Errorf("copy guest scripts: %w", err)
	}
	// Test programs for the container rootfs, each built warning-free:
	// rdmaquota, and the hostile scenario's attackers (a function handler
	// and clients that try to hold the zygote's loop), and qpbench (the
	// data bench's plain process with its own QP).
	csrc := filepath.Join(c.Repo, "test/vm/csrc")
	zdir := filepath.Join(c.Repo, "zygote")
	progs := []struct {
		out, src string
		args     []string
	}{
		{"rdmaquota", "rdmaquota.c", []string{"-libverbs"}},
		{"hostile.so", "hostile.c", []string{"-shared", "-fPIC", "-DSWIFT_SHARED_HANDLER",
			"-I", filepath.Join(c.Repo, "zygote"), "-Wl,--disable-new-dtags,-rpath,/.swift/bin/lib"}},
		{"hostile-client", "hostile-client.c", []string{"-static"}},
		{"sniff", "sniff.c", []string{"-static"}},
		// the impostor speaks the zygotes' protocol: it is built from it
		{"impostor", "impostor.c", []string{"-static", "-D_GNU_SOURCE", "-I", zdir, filepath.Join(zdir, "exchange.c"),
			filepath.Join(zdir, "sha256.c"), filepath.Join(zdir, "x25519.c"), filepath.Join(zdir, "util.c"), filepath.Join(zdir, "config.c")}},
		{"qpbench", "qpbench.c", []string{"-I", zdir, "-libverbs"}}, // message.h: the handlers' messages
	}
	var built []string
	// gwload drives swift-gateway as a platform would, from the node and
	// from inside a container (test/vm/gwload): static, for any rootfs
	gw := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(runDir, "gwload"), "./test/vm/gwload")
	gw.Dir, gw.Env = c.Repo, append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := gw.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./test/vm/gwload: %v\n%s", err, msg)
	}
	built = append(built, filepath.Join(runDir, "gwload"))
	for _, p := range progs {
		out := filepath.Join(runDir, p.out)
		args := append([]string{"-Wall", "-Wextra", "-Werror", "-O2", "-o", out, filepath.Join(csrc, p.src)}, p.args...)
		if msg, err := exec.CommandContext(ctx, "gcc", args...).CombinedOutput(); err != nil || len(bytes.TrimSpace(msg)) > 0 {
			return fmt.Errorf("gcc %s (must build warning-free; libibverbs-dev installed?): %v\n%s", p.src, err, msg)
		}
		built = append(built, out)
	}
	mk := exec.CommandContext(ctx, filepath.Join(c.Repo, "test/vm/guest/mkrootfs.sh"),
		append([]string{filepath.Join(runDir, "rootfs")}, built...)...)
	mk.Stdout, mk.Stderr = logw, logw
	if err := mk.Run(); err != nil {
		return fmt.Errorf("guest/mkrootfs.sh: %w", err)
	}
	tar := exec.CommandContext(ctx, "tar", "-C", filepath.Join(runDir, "rootfs"), "-cf",
		filepath.Join(runDir, "rootfs.tar"), ".")
	if out, err := tar.CombinedOutput(); err != nil {
		return fmt.Errorf("tar rootfs: %v\n%s", err, out)
	}
	binDir, err := guestDir(runDir, c.BinDir, "bin")
	if err != nil {
		return err
	}
	crictlDir, cniDir := "", ""
	if slices.ContainsFunc(c.Scenarios, NeedsCRI) {
		if crictlDir, err = prepareCRI(ctx, c, runDir); err != nil {
			return err
		}
		if c.CNIDir != "" {
			if cniDir, err = guestDir(runDir, c.CNIDir, "cni"); err != nil {
				return err
			}
		}
	}
	if slices.Contains(c.Scenarios, ScenarioXK8s) && !guestVisible(c.K8sDir) {
		return fmt.Errorf("%s=%s is under a path the guest masks (%s): the nodes run its kubelet in place",
			EnvK8sBin, c.K8sDir, strings.Join(guestMasked, " "))
	}
	ctrdDir, err := guestDir(runDir, c.ContainerdDir, "containerd")
	if err != nil {
		return err
	}
	repoDir, err := guestRepo(runDir, c, binDir)
	if err != nil {
		return err
	}
	env := map[string]string{
		"SWIFTVM_RUNNER":           ResultsMount + "/guest/runner.sh",
		"SWIFTVM_REPO":             repoDir,
		"SWIFTVM_SCENARIOS":        strings.Join(c.Scenarios, " "),
		"SWIFTVM_BIN_DIR":          binDir,
		"SWIFTVM_CONTAINERD_DIR":   ctrdDir,
		"SWIFTVM_SCENARIO_TIMEOUT": strconv.Itoa(int(c.ScenarioTimeout / time.Second)),
		"SWIFTVM_BROKEN":           c.Broken,
		"SWIFTVM_RDMA_LIMIT":       strconv.Itoa(c.RDMALimit),
		"SWIFTVM_PROBE":            c.Probe,
		"SWIFTVM_CRICTL_DIR":       crictlDir,
		"SWIFTVM_CNI_DIR":          cniDir,
		"SWIFTVM_K8S_DIR":          c.K8sDir,
		"SWIFTVM_K8S_TIMEOUT":      strconv.Itoa(int(c.K8sTimeout / time.Second)),
		"SWIFTVM_BENCH_RUNS":       strconv.Itoa(c.BenchRuns),
		"SWIFTVM_VERBS_RUNS":       strconv.Itoa(c.BenchRuns),
		// x-bench's message counts scale with the run count (2,000
		// round trips and 20,000 messages at the default 30)
		"SWIFTVM_BENCH_LAT": strconv.Itoa(max(100, 2000*c.BenchRuns/DefaultBenchRuns)),
		"SWIFTVM_BENCH_BW":  strconv.Itoa(max(1000, 20000*c.BenchRuns/DefaultBenchRuns)),
		// the gateway's vegeta runs: 10 s at each concurrency at the default
		"SWIFTVM_GATEWAY_RATE_SECS": strconv.Itoa(max(2, 10*c.BenchRuns/DefaultBenchRuns)),
	}
	keys := []string{"SWIFTVM_RUNNER", "SWIFTVM_REPO", "SWIFTVM_SCENARIOS", "SWIFTVM_BIN_DIR",
		"SWIFTVM_CONTAINERD_DIR", "SWIFTVM_SCENARIO_TIMEOUT", "SWIFTVM_BROKEN", "SWIFTVM_RDMA_LIMIT", "SWIFTVM_PROBE",
		"SWIFTVM_CRICTL_DIR", "SWIFTVM_CNI_DIR", "SWIFTVM_K8S_DIR", "SWIFTVM_K8S_TIMEOUT", "SWIFTVM_BENCH_RUNS", "SWIFTVM_VERBS_RUNS", "SWIFTVM_BENCH_LAT",
		"SWIFTVM_BENCH_BW", "SWIFTVM_GATEWAY_RATE_SECS"}
	extraKeys := make([]string, 0, len(extra))
	for k, v := range extra {
		env[k] = v
		extraKeys = append(extraKeys, k)
	}
	slices.Sort(extraKeys)
	var b strings.Builder
	b.WriteString("# written by the host harness (test/vm); sourced by the guest\n")
	for _, k := range append(keys, extraKeys...) {
		fmt.Fprintf(&b, "%s='%s'\n", k, strings.ReplaceAll(env[k], "'", `'\''`))
	}
	return os.WriteFile(filepath.Join(runDir, "env"), []byte(b.String()), 0o644)
}

// NeedsCRI reports whether a scenario runs pods through containerd's CRI
// plugin (the guest then enables it and imports the images).
func NeedsCRI(name string) bool {
	return name == ScenarioXCRI || name == ScenarioAlloc || name == ScenarioCNI || name == ScenarioQuickstart ||
		name == ScenarioXPodnet || name == ScenarioXPodnetExclusive || name == ScenarioXK8s
}

// EnvCNIBin names the directory of the CNI plugins (make deps builds them).
const EnvCNIBin = "SWIFT_CNI_BIN"

// CRI images the guest imports: the pinned sandbox image and one made of
// the container rootfs; for x-k8s also the rootfs as the examples' sidecar
// image, whose command is the waiting worker.
const (
	PauseRef      = "swift.local/pause:1"
	VMRootRef     = "swift.local/vmroot:1"
	K8sShipperRef = "registry.example/log-shipper:1.0"
)

// workerScript is the vmroot image's /bin/worker: the command of the
// examples' pod (examples/runtimeclass.yaml, examples/crictl), whose
// image the quickstart scenario replaces with vmroot. It waits until it
// is stopped.
const workerScript = `#!/bin/sh
# the examples' worker (registry.example/rdma-worker:1.0 /bin/worker): waits
trap 'exit 0' TERM INT
sleep 86400 &
wait
`

// prepareCRI writes the CRI images to runDir/images (pause.tar,
// vmroot.tar: docker archives for `ctr images import`) and returns the
// guest's path of crictl's directory.
func prepareCRI(ctx context.Context, c Config, runDir string) (string, error) {
	if c.CrictlDir == "" || !isExecFile(filepath.Join(c.CrictlDir, "crictl")) {
		return "", fmt.Errorf("scenarios %s, %s, %s and %s need crictl: $%s=%q has none (run `make deps`)",
			ScenarioXCRI, ScenarioAlloc, ScenarioCNI, ScenarioQuickstart, harness.EnvCrictlBin, c.CrictlDir)
	}
	dir := filepath.Join(runDir, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	pause, err := harness.PauseImage(ctx, dir, PauseRef)
	if err != nil {
		return "", err
	}
	files, err := harness.FilesFromDir(filepath.Join(runDir, "rootfs"))
	if err != nil {
		return "", err
	}
	// /bin is a link to usr/bin in the rootfs
	files["usr/bin/worker"] = harness.File{Mode: 0o755, Data: []byte(workerScript)}
	root := harness.Image{Ref: VMRootRef, Files: files, Cmd: []string{"/bin/sh"}}
	images := map[string]harness.Image{"pause.tar": pause, "vmroot.tar": root}
	if slices.Contains(c.Scenarios, ScenarioXK8s) {
		// examples/k8s/zygote-pod.yaml's sidecar runs its image's own
		// command, which must keep running as a log shipper's does
		images["shipper.tar"] = harness.Image{Ref: K8sShipperRef, Files: files, Cmd: []string{"/bin/worker"}}
	}
	for name, img := range images {
		if err := harness.WriteDockerArchive(filepath.Join(dir, name), img); err != nil {
			return "", fmt.Errorf("CRI image %s: %w", img.Ref, err)
		}
	}
	return guestDir(runDir, c.CrictlDir, "crictl")
}

func isExecFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// kvmUsable reports whether KVM can run the guest: the CPU must advertise
// vmx or svm (a /dev/kvm without them hangs the guest) and /dev/kvm must open.
func kvmUsable() bool {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil || !regexp.MustCompile(`(?m)^flags\s*:.*\b(vmx|svm)\b`).Match(b) {
		return false
	}
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// Marker is a "SWIFTVM:" console line and when the host saw it.
type Marker struct {
	At   time.Duration // since qemu started
	Line string        // without the "SWIFTVM: " prefix
}

// Run is a finished VM boot.
type Run struct {
	Dir      string        // the results share
	Console  string        // console log path
	Accel    string        // tcg or kvm
	Wall     time.Duration // qemu start to exit
	TimedOut bool          // killed at Config.Timeout
	Err      error         // qemu's exit error, if any
	Markers  []Marker
}

// markerWriter records SWIFTVM console markers as they arrive.
type markerWriter struct {
	mu       sync.Mutex
	start    time.Time
	partial  []byte
	markers  []Marker
	progress func(Marker)
}

func (w *markerWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(w.partial[:i]), "\r")
		w.partial = w.partial[i+1:]
		if j := strings.Index(line, "SWIFTVM: "); j >= 0 {
			m := Marker{At: time.Since(w.start), Line: line[j+len("SWIFTVM: "):]}
			w.markers = append(w.markers, m)
			if w.progress != nil {
				w.progress(m)
			}
		}
	}
	return len(p), nil
}

// Boot boots the guest once with runDir as its results share, runs the
// batch and waits for power-off, killing qemu at c.Timeout. progress, if
// not nil, sees every console marker as it arrives.
func Boot(ctx context.Context, c Config, g Guest, runDir string, progress func(Marker)) (*Run, error) {
	return boot(ctx, c, g, runDir, []string{"-nic", "user,model=virtio-net-pci"}, progress)
}

// boot is Boot with the guest's network (qemu arguments) and, in extra,
// more qemu arguments (a pair's shared directory).
func boot(ctx context.Context, c Config, g Guest, runDir string, net []string, progress func(Marker)) (*Run, error) {
	qemu, err := lookPath("qemu-system-x86_64")
	if err != nil {
		return nil, err
	}
	accel := c.Accel
	if accel == "auto" {
		accel = "tcg"
		if kvmUsable() {
			accel = "kvm"
		}
	}
	cpu := "max"
	if accel == "kvm" {
		cpu = "host"
	}
	args := []string{
		"-accel", accel, "-cpu", cpu,
		"-m", strconv.Itoa(c.MemoryMiB), "-smp", strconv.Itoa(c.CPUs),
		"-display", "none", "-monitor", "none", "-serial", "stdio", "-no-reboot",
		"-kernel", g.Kernel, "-initrd", g.Initrd,
		"-append", "console=ttyS0 panic=-1 loglevel=4",
		"-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
		"-virtfs", "local,path=" + runDir + ",mount_tag=results,security_model=none,multidevs=remap",
	}
	args = append(args, net...)
	consolePath := filepath.Join(runDir, "console.log")
	console, err := os.Create(consolePath)
	if err != nil {
		return nil, err
	}
	defer console.Close()
	fmt.Fprintf(console, "# %s %s\n", qemu, strings.Join(args, " "))

	tctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, qemu, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	mw := &markerWriter{progress: progress}
	cmd.Stdout = io.MultiWriter(console, mw)
	cmd.Stderr = cmd.Stdout
	run := &Run{Dir: runDir, Console: consolePath, Accel: accel}
	start := time.Now()
	mw.start = start
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start qemu: %w", err)
	}
	run.Err = cmd.Wait()
	run.Wall = time.Since(start)
	run.TimedOut = errors.Is(tctx.Err(), context.DeadlineExceeded)
	mw.mu.Lock()
	run.Markers = append([]Marker(nil), mw.markers...)
	mw.mu.Unlock()
	return run, nil
}

// MarkerAt returns when the first marker starting with prefix arrived.
func (r *Run) MarkerAt(prefix string) (time.Duration, bool) {
	for _, m := range r.Markers {
		if strings.HasPrefix(m.Line, prefix) {
			return m.At, true
		}
	}
	return 0, false
}

// Completed reports whether the guest runner finished the whole batch.
func (r *Run) Completed() bool {
	_, err := os.Stat(filepath.Join(r.Dir, "runner.done"))
	_, ok := r.MarkerAt("DONE")
	return err == nil || ok
}

// ConsoleTail returns the last n lines of the console log.
func (r *Run) ConsoleTail(n int) string {
	return tailFile(r.Console, n)
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Result is one scenario's outcome.
type Result struct {
	Name     string            `json:"name"`
	Status   string            `json:"status"` // PASS, FAIL or MISSING
	ExitCode int               `json:"exit_code"`
	Seconds  float64           `json:"seconds"`
	TimedOut bool              `json:"timed_out"`
	Source   string            `json:"source"` // results-share, console or none
	Facts    map[string]string `json:"facts,omitempty"`
	LogPath  string            `json:"log,omitempty"`
}

var resultMarker = regexp.MustCompile(`^RESULT (\S+) (PASS|FAIL) rc=(\d+) seconds=([0-9.]+)`)

// Result reads a scenario's result from the results share, falling back to
// the console markers when the share has none.
func (r *Run) Result(name string) Result {
	res := Result{Name: name, Status: "MISSING", Source: "none", Facts: map[string]string{}}
	if b, err := os.ReadFile(filepath.Join(r.Dir, name+".status")); err == nil {
		res.Status = strings.TrimSpace(string(b))
		res.Source = "results-share"
		if jb, err := os.ReadFile(filepath.Join(r.Dir, name+".json")); err == nil {
			var j Result
			if json.Unmarshal(jb, &j) == nil {
				res.ExitCode, res.Seconds, res.TimedOut = j.ExitCode, j.Seconds, j.TimedOut
			}
		}
	} else {
		for _, m := range r.Markers {
			sm := resultMarker.FindStringSubmatch(m.Line)
			if sm == nil || sm[1] != name {
				continue
			}
			res.Status, res.Source = sm[2], "console"
			res.ExitCode, _ = strconv.Atoi(sm[3])
			res.Seconds, _ = strconv.ParseFloat(sm[4], 64)
		}
	}
	if f, err := os.Open(filepath.Join(r.Dir, name+".facts")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), "="); ok {
				res.Facts[k] = v
			}
		}
		f.Close()
	}
	if _, err := os.Stat(filepath.Join(r.Dir, name+".log")); err == nil {
		res.LogPath = filepath.Join(r.Dir, name+".log")
	}
	return res
}

// LogTail returns the last n lines of the scenario's log.
func (res Result) LogTail(n int) string {
	if res.LogPath == "" {
		return "(no log)"
	}
	return tailFile(res.LogPath, n)
}

// Summary is written to summary.json in the run directory.
type Summary struct {
	Accel       string   `json:"accel"`
	WallSeconds float64  `json:"wall_seconds"`
	BootSeconds float64  `json:"boot_seconds"` // qemu start to runner start
	TimedOut    bool     `json:"timed_out"`
	Completed   bool     `json:"completed"`
	Results     []Result `json:"results"`
}

// WriteSummary writes summary.json for the given scenarios.
func (r *Run) WriteSummary(scenarios []string) (Summary, error) {
	s := Summary{Accel: r.Accel, WallSeconds: r.Wall.Seconds(), TimedOut: r.TimedOut, Completed: r.Completed()}
	if at, ok := r.MarkerAt("RUNNER-START"); ok {
		s.BootSeconds = at.Seconds()
	}
	for _, n := range scenarios {
		s.Results = append(s.Results, r.Result(n))
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return s, err
	}
	return s, os.WriteFile(filepath.Join(r.Dir, "summary.json"), append(b, '\n'), 0o644)
}
