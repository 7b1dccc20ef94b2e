package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/keys"
	"github.com/swift-rdma/swift-containerd/policy"
	"github.com/swift-rdma/swift-containerd/verbs"
)

// Status is a check's verdict.
type Status string

// Verdicts, from good to bad.
const (
	OK   Status = "OK"
	Warn Status = "WARN"
	Fail Status = "FAIL"
)

// Result is one check's outcome.
type Result struct {
	Check  string `json:"check"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	// Fix is what the operator can do (empty when Status is OK).
	Fix string `json:"fix"`
}

// Node is what the checks look at. Run fills zero fields with the real
// node's values (DefaultNode).
type Node struct {
	// ConfigPath is the node config (config.PathFromEnv()).
	ConfigPath string
	// SysRoot and DevRoot are where sysfs and device nodes are read; empty:
	// the node config's rdma.sys_root and rdma.dev_root.
	SysRoot, DevRoot string
	// ProcRoot and BootRoot hold the kernel config (/proc/config.gz,
	// /boot/config-RELEASE); CgroupRoot is where cgroups are mounted.
	ProcRoot, BootRoot, CgroupRoot string
	// KernelRelease is `uname -r`.
	KernelRelease string
	// Containerd and Runc are the binaries whose versions are checked (a
	// bare name is looked up on PATH); the default "containerd" is the
	// binary of the running containerd when there is one.
	Containerd, Runc string
	// ContainerdPIDFile names the running containerd (else the process
	// named containerd under ProcRoot is): the shim inherits its
	// RLIMIT_MEMLOCK and capabilities, and is found on its PATH.
	ContainerdPIDFile string
	// ContainerdConfig is containerd's root config; empty: the --config
	// the running containerd was started with, else
	// /etc/containerd/config.toml.
	ContainerdConfig string
	// RDMASystem queries RDMA_NLDEV_CMD_SYS_GET.
	RDMASystem func() (SystemInfo, error)
	// Version runs `bin --version` and returns its output.
	Version func(ctx context.Context, bin string) (string, error)
}

// DefaultNode is this node, as seen by this process.
func DefaultNode() Node {
	var uts unix.Utsname
	release := ""
	if err := unix.Uname(&uts); err == nil {
		release = unix.ByteSliceToString(uts.Release[:])
	}
	return Node{
		ConfigPath:    config.PathFromEnv(),
		ProcRoot:      "/proc",
		BootRoot:      "/boot",
		CgroupRoot:    "/sys/fs/cgroup",
		KernelRelease: release,
		Containerd:    "containerd",
		Runc:          "runc",

		ContainerdPIDFile: DefaultContainerdPIDFile,
		RDMASystem:        QueryRDMASystem,
		Version:           runVersion,
	}
}

func (n Node) withDefaults() Node {
	d := DefaultNode()
	set := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	set(&n.ConfigPath, d.ConfigPath)
	set(&n.ProcRoot, d.ProcRoot)
	set(&n.BootRoot, d.BootRoot)
	set(&n.CgroupRoot, d.CgroupRoot)
	set(&n.KernelRelease, d.KernelRelease)
	set(&n.Containerd, d.Containerd)
	set(&n.Runc, d.Runc)
	set(&n.ContainerdPIDFile, d.ContainerdPIDFile)
	if n.RDMASystem == nil {
		n.RDMASystem = d.RDMASystem
	}
	if n.Version == nil {
		n.Version = d.Version
	}
	return n
}

// Run performs every check, in a fixed order.
func Run(ctx context.Context, n Node) []Result {
	n = n.withDefaults()
	var rs []Result

	cfg, cfgResult := checkConfig(n.ConfigPath)
	if n.SysRoot == "" {
		n.SysRoot = cfg.RDMA.SysRoot
	}
	if n.DevRoot == "" {
		n.DevRoot = cfg.RDMA.DevRoot
	}
	kc := readKernelConfig(n.ProcRoot, n.BootRoot, n.KernelRelease)
	cd, running := findContainerd(n.ProcRoot, n.ContainerdPIDFile)
	if running && cd.Exe != "" && n.Containerd == DefaultNode().Containerd {
		n.Containerd = cd.Exe // the version of the containerd that runs
	}

	kernel := checkKernel(n, kc)
	rs = append(rs, kernel)
	rs = append(rs, checkDevices(n, kernel.Status == OK)...)
	rs = append(rs, checkSystem(n, kernel.Status == OK)...)
	rs = append(rs, checkCgroup(n, cfg, kc))
	rs = append(rs, checkMemlock(n, cfg, cd, running))
	rs = append(rs, cfgResult)
	rs = append(rs, checkContainerd(ctx, n))
	cri, entry := checkCRIRuntime(n, cd, running)
	rs = append(rs, cri)
	shim, shimPath := checkShim(n, cd, running, entry)
	rs = append(rs, shim)
	rs = append(rs, checkHook(n, cfg, shimPath))
	rs = append(rs, checkZygoteBin(n, cfg))
	rs = append(rs, checkRunc(ctx, n))
	rs = append(rs, checkVerbsCache(n, cfg))
	rs = append(rs, checkPolicy(cfg))
	rs = append(rs, checkKeys(cfg))
	return rs
}

// checkPolicy reports whether a tenant policy is enforced: a node
// without one lets any caller claim any tenant, which is loud; a
// configured policy that is missing or malformed refuses every opted-in
// container.
func checkPolicy(cfg config.Config) Result {
	r := Result{Check: "tenant.policy"}
	p, err := policy.LoadNode(cfg)
	switch {
	case err != nil:
		r.Status, r.Detail, r.Fix = Fail, err.Error()+" (every opted-in container is refused)", "swiftctl policy check"
	case p.IsOpen():
		what := "policy_path = \"\""
		if f := cfg.PolicyFile(); f != "" {
			what = f + " does not exist"
		}
		r.Status = Warn
		r.Detail = what + ": NO TENANT POLICY IS ENFORCED: any pod or local caller may claim any tenant " +
			"(its key, devices and pools), with no quotas"
		r.Fix = "write a tenant policy (examples/policy.toml) at " + config.DefaultPolicyPath + " or policy_path"
	default:
		r.Status, r.Detail = OK, fmt.Sprintf("%s: %d tenant(s)", p.Path, len(p.Tenants))
	}
	return r
}

// checkKeys reports which tenants have a provisioned keyring (the same on
// every node): a tenant without one gets a node-local key, and its zygotes
// cannot reach zygotes on other nodes.
func checkKeys(cfg config.Config) Result {
	r := Result{Check: "tenant.keys"}
	p, err := policy.LoadNode(cfg)
	if err != nil {
		r.Status, r.Detail, r.Fix = Warn, "tenant policy unreadable: "+err.Error(), "swiftctl policy check"
		return r
	}
	var names []string
	if !p.IsOpen() {
		for n := range p.Tenants {
			names = append(names, n)
		}
	} else if ents, err := os.ReadDir(cfg.KeysDir); err == nil {
		for _, e := range ents {
			if n, ok := strings.CutSuffix(e.Name(), ".keys"); ok {
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	var with, without, bad []string
	for _, n := range names {
		keyFile := ""
		if t := p.Tenants[n]; t != nil {
			keyFile = t.KeyFile
		}
		path, found, err := keys.Provisioned(cfg.KeysDir, keyFile, n)
		switch {
		case err != nil:
			bad = append(bad, err.Error())
		case found:
			with = append(with, n+" ("+path+")")
		default:
			without = append(without, n)
		}
	}
	switch {
	case len(bad) > 0:
		r.Status, r.Detail = Fail, strings.Join(bad, "; ")
		r.Fix = "swiftctl keys show FILE; a keyring is <id> <64 hex digits> per line, mode 0400"
	case len(without) > 0 || (p.IsOpen() && len(with) == 0):
		r.Status = Warn
		r.Detail = "tenants without a provisioned keyring get a node-local key: their zygotes cannot reach other nodes"
		if len(without) > 0 {
			r.Detail += ": " + strings.Join(without, ", ")
		}
		r.Fix = fmt.Sprintf("swiftctl keys gen %s/<tenant>.keys, the same file on every node (or key_file in the policy)", cfg.KeysDir)
	default:
		r.Status, r.Detail = OK, "provisioned: "+strings.Join(with, ", ")
	}
	return r
}

// checkVerbsCache reports whether opted-in containers get the cached verbs
// library or run stock.
func checkVerbsCache(n Node, cfg config.Config) Result {
	vr := verbs.Check(verbs.Node{StateDir: cfg.StateDir, Sources: verbs.Sources{SysRoot: n.SysRoot}})
	r := Result{Check: "verbs.cache", Detail: fmt.Sprintf("%s: %s", vr.State, vr.Why())}
	switch {
	case vr.Valid():
		r.Status, r.Detail = OK, "valid: "+vr.Dir
		if m := vr.Manifest; m != nil {
			r.Detail += fmt.Sprintf("; default mode %s (%s)", m.Profile.DefaultMode, m.Profile.DefaultWhy)
		}
	case vr.State == verbs.StateMissing:
		r.Status, r.Fix = Warn, "swiftctl cache build (containers run stock libibverbs setup meanwhile)"
	default:
		r.Status, r.Fix = Warn, "swiftctl cache build to rebuild it (containers run stock meanwhile)"
	}
	return r
}

// Failed tells whether any result is a FAIL.
func Failed(rs []Result) bool {
	for _, r := range rs {
		if r.Status == Fail {
			return true
		}
	}
	return false
}

// WriteText prints one line per result, a fix line under each that is not
// OK, and a count.
func WriteText(w io.Writer, rs []Result) error {
	width := 0
	for _, r := range rs {
		width = max(width, len(r.Check))
	}
	count := map[Status]int{}
	var b strings.Builder
	for _, r := range rs {
		count[r.Status]++
		fmt.Fprintf(&b, "%-4s  %-*s  %s\n", r.Status, width, r.Check, r.Detail)
		if r.Fix != "" && r.Status != OK {
			fmt.Fprintf(&b, "      %-*s  fix: %s\n", width, "", r.Fix)
		}
	}
	fmt.Fprintf(&b, "%d OK, %d WARN, %d FAIL\n", count[OK], count[Warn], count[Fail])
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON prints the results as a JSON array of {check, status, detail, fix}.
func WriteJSON(w io.Writer, rs []Result) error {
	if rs == nil {
		rs = []Result{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rs)
}

// runVersion runs `bin --version`, bounded in time.
func runVersion(ctx context.Context, bin string) (string, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Stdin = nil
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
			return "", fmt.Errorf("%s --version: %w: %s", path, err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("%s --version: %w", path, err)
	}
	return string(out), nil
}
