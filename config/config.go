package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/swift-rdma/swift-containerd/config/tomlfile"
)

// DefaultPath is where the node configuration lives unless overridden.
const DefaultPath = "/etc/swift/config.toml"

// EnvPath names the environment variable that overrides DefaultPath.
const EnvPath = "SWIFT_CONFIG"

// DefaultPolicyPath is where the tenant policy lives unless policy_path or
// $SWIFT_POLICY says otherwise.
const DefaultPolicyPath = "/etc/swift/policy.toml"

// DefaultCRINamespace is the containerd namespace of containerd's CRI plugin.
const DefaultCRINamespace = "k8s.io"

// EnvPolicy names the environment variable that overrides policy_path.
const EnvPolicy = "SWIFT_POLICY"

// DefaultKeysDir is where provisioned tenant keyrings are looked for.
const DefaultKeysDir = "/etc/swift/keys"

// DefaultZygoteBinDir is where `make install` puts swift-init and swift-run.
const DefaultZygoteBinDir = "/usr/local/lib/swift"

// DefaultFunctionUIDBase is the first of the uids functions run under: the
// function in the zygote's slot N runs as uid and gid base+N.
const DefaultFunctionUIDBase = 2000000000

// FunctionUIDs is how many uids from the base the zygote uses (its slots).
const FunctionUIDs = 128

// FunctionUIDRanges is how many ranges of FunctionUIDs uids from the base
// the node hands out: under a tenant policy each zygote container without
// a user namespace takes one of its own (the ledger's UIDRange), so that no
// two containers' functions share a host uid.
const FunctionUIDRanges = 1024

// MemlockUnlimited is the RLIMIT_MEMLOCK value meaning "no limit".
const MemlockUnlimited = math.MaxUint64

// Config is the node configuration.
type Config struct {
	// LogLevel is the shim's log level (trace, debug, info, warn, error).
	LogLevel string `toml:"log_level"`
	// StateDir holds the node's Swift state (ledger, verbs cache).
	StateDir string `toml:"state_dir"`
	// PolicyPath is the tenant policy file (see PolicyFile); "" runs
	// without a policy.
	PolicyPath string `toml:"policy_path"`
	// PolicyPathSet records that the file sets policy_path itself (Parse):
	// a policy named so is required (see PolicyNamed).
	PolicyPathSet bool `toml:"-"`
	// CRINamespace is the containerd namespace of the CRI plugin: only a
	// container in it is a pod container (its CRI annotations name its
	// pod's namespace); any other is a local caller.
	CRINamespace string `toml:"cri_namespace"`
	// KeysDir holds tenant keyrings an operator provisions on every node
	// (<tenant>.keys); a tenant policy's key_file takes precedence.
	KeysDir string `toml:"keys_dir"`
	// RDMA holds what an opted-in container receives.
	RDMA RDMA `toml:"rdma"`
	// Zygote configures the INIT zygote (swift.io/zygote=true).
	Zygote Zygote `toml:"zygote"`
	// Hooks configures the OCI hooks added to opted-in containers.
	Hooks Hooks `toml:"hooks"`
}

// Hooks is the [hooks] table: swift-hook runs as every opted-in
// container's poststop hook (its lease released, a backstop) and, with
// NetCheck, as its createRuntime hook (RDMA checked from inside the
// container's network namespace before any of its processes runs).
type Hooks struct {
	// Path is swift-hook on the node; "" is the swift-hook beside the
	// shim's own binary.
	Path string `toml:"path"`
	// NetCheck adds the createRuntime check.
	NetCheck bool `toml:"netcheck"`
	// ExclusiveMove lets netcheck move a container's devices into its
	// network namespace in RDMA netns exclusive mode. Set it only where
	// every RDMA container's devices are allocated to it alone (a device
	// plugin, CDI or DRA): a moved device leaves the node's namespace.
	ExclusiveMove bool `toml:"exclusive_move"`
}

// Zygote is the [zygote] table.
type Zygote struct {
	// BinDir holds swift-init and swift-run (and nothing else a container
	// should see): it is mounted read-only into containers at /.swift/bin.
	BinDir string `toml:"bin_dir"`
	// FunctionUIDBase: each forked function runs as uid and gid
	// FunctionUIDBase+slot (FunctionUIDs of them), with no capabilities,
	// so that functions cannot signal, trace or list one another; 0 runs
	// them as the container's user. Under a tenant policy a container
	// without a user namespace takes the range FunctionUIDBase +
	// FunctionUIDs×i of its own (i < FunctionUIDRanges).
	FunctionUIDBase uint32 `toml:"function_uid_base"`
}

// RDMA is the [rdma] table.
type RDMA struct {
	// Default opts every container in when it carries no swift.io/rdma annotation.
	Default bool `toml:"default"`
	// Memlock is RLIMIT_MEMLOCK for opted-in containers: "unlimited" or a size.
	Memlock string `toml:"memlock"`
	// HCAHandle and HCAObject are linux.resources.rdma limits per device
	// (0 = unset); decoded wide so that Validate can name a bad value's key.
	HCAHandle int64 `toml:"hca_handle"`
	HCAObject int64 `toml:"hca_object"`
	// SysRoot and DevRoot are where sysfs classes and device nodes are read.
	SysRoot string `toml:"sys_root"`
	DevRoot string `toml:"dev_root"`
	// PodSoftRoCE gives every opted-in pod with a network namespace of
	// its own a soft-RoCE device on its own interface, made in that
	// namespace at the pod's first opted-in Create (hooks.EnsurePodLink;
	// the kernel removes it with the namespace). It needs Linux 7.1 or
	// later, and is refused on a node with any RDMA device other than
	// soft-RoCE: it is for nodes whose RDMA is soft-RoCE (development
	// clusters, clouds without RDMA NICs), never for hardware.
	PodSoftRoCE bool `toml:"pod_softroce"`
	// Env is added to the environment of opted-in containers.
	Env map[string]string `toml:"env"`
}

// Default returns the configuration used when no file exists.
func Default() Config {
	return Config{
		LogLevel:     "info",
		StateDir:     "/var/lib/swift",
		PolicyPath:   DefaultPolicyPath,
		CRINamespace: DefaultCRINamespace,
		KeysDir:      DefaultKeysDir,
		RDMA: RDMA{
			Memlock: "unlimited",
			SysRoot: "/",
			DevRoot: "/dev",
		},
		Zygote: Zygote{BinDir: DefaultZygoteBinDir, FunctionUIDBase: DefaultFunctionUIDBase},
		Hooks:  Hooks{NetCheck: true},
	}
}

// PathFromEnv returns the configuration path: $SWIFT_CONFIG or DefaultPath.
func PathFromEnv() string {
	if p := os.Getenv(EnvPath); p != "" {
		return p
	}
	return DefaultPath
}

// Load reads the file at path. A missing file yields Default() (the shim
// runs with the defaults then); Check is stricter.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Default(), nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("read node config %s: %w", path, err)
	}
	return Parse(path, data)
}

// Check reads and validates the node config at path for an operator
// (`swiftctl config check`). Unlike Load, a missing file is an error: a
// NotFound error naming it. So is a tenant policy the config names
// (policy_path, or $SWIFT_POLICY) that does not exist: the shim refuses
// every opted-in container then (a FailedPrecondition error naming
// policy_path and the file). The one missing policy the shim accepts is
// the built-in DefaultPolicyPath on a node that never enforced a policy
// (it runs without one: `swiftctl policy check` and `swiftctl doctor`
// say so); Check leaves that case to them.
func Check(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Config{}, fmt.Errorf("node config %s does not exist (the shim would run with the built-in defaults; "+
			"write it, for example from examples/config.toml, or name another file): %w", path, errdefs.ErrNotFound)
	}
	if err != nil {
		return Config{}, fmt.Errorf("read node config %s: %v: %w", path, err, errdefs.ErrInvalidArgument)
	}
	c, err := Parse(path, data)
	if err != nil {
		return Config{}, err
	}
	if err := c.checkPolicyFile(path); err != nil {
		return Config{}, err
	}
	return c, nil
}

// checkPolicyFile fails when the tenant policy the config names is
// missing or not a file, as the shim would (policy.LoadNode).
func (c Config) checkPolicyFile(name string) error {
	p := c.PolicyFile()
	if p == "" {
		return nil
	}
	key := "policy_path"
	if os.Getenv(EnvPolicy) != "" {
		key = "$" + EnvPolicy + " (which overrides policy_path)"
	}
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, os.ErrNotExist) && p == DefaultPolicyPath && !c.PolicyNamed():
		return nil // a fresh node runs without a policy (policy.LoadNode)
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("node config %s: %s names %s, which does not exist: the shim refuses every opted-in container "+
			"until it does (write the tenant policy there, correct the path, or set policy_path = \"\" to run without a policy): %w",
			name, key, p, errdefs.ErrFailedPrecondition)
	case err != nil:
		return fmt.Errorf("node config %s: %s names %s: %v: %w", name, key, p, err, errdefs.ErrFailedPrecondition)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("node config %s: %s names %s, which is not a file: the shim refuses every opted-in container: %w",
			name, key, p, errdefs.ErrFailedPrecondition)
	}
	return nil
}

// Parse decodes data (named name in errors) over the defaults and
// validates it. Every problem of the file is reported at once, each with
// its line and its key as the file spells it, in a *tomlfile.Error (an
// InvalidArgument error).
func Parse(name string, data []byte) (Config, error) {
	c := Default()
	pos, problems, _ := tomlfile.Decode(data, &c)
	c.PolicyPathSet = pos.Line("policy_path") > 0
	// A file that does not parse leaves the defaults, which are valid.
	for _, p := range c.problems() {
		p.Line = pos.Line(p.Key)
		problems = append(problems, p)
	}
	if len(problems) > 0 {
		tomlfile.Sort(problems)
		return Config{}, &tomlfile.Error{What: "node config", File: name, Problems: problems}
	}
	return c, nil
}

// Validate checks values that TOML types alone do not constrain. The
// error joins one InvalidArgument error per problem.
func (c Config) Validate() error {
	var errs []error
	for _, p := range c.problems() {
		errs = append(errs, fmt.Errorf("%s: %s: %w", p.Key, p.Msg, errdefs.ErrInvalidArgument))
	}
	return errors.Join(errs...)
}

// problems lists what Validate refuses, by key.
func (c Config) problems() []tomlfile.Problem {
	var ps []tomlfile.Problem
	add := func(key, format string, args ...any) {
		ps = append(ps, tomlfile.Problem{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	switch c.LogLevel {
	case "trace", "debug", "info", "warn", "warning", "error", "fatal", "panic":
	default:
		add("log_level", "%q: want trace, debug, info, warn or error", c.LogLevel)
	}
	if !filepath.IsAbs(c.StateDir) {
		add("state_dir", "%q: must be an absolute path", c.StateDir)
	}
	if c.PolicyPath != "" && !filepath.IsAbs(c.PolicyPath) {
		add("policy_path", "%q: must be an absolute path (or \"\" for no policy)", c.PolicyPath)
	}
	if c.CRINamespace == "" {
		add("cri_namespace", "must name the containerd namespace of the CRI plugin (default %q)", DefaultCRINamespace)
	}
	if !filepath.IsAbs(c.KeysDir) {
		add("keys_dir", "%q: must be an absolute path", c.KeysDir)
	}
	for _, k := range []struct {
		key string
		v   int64
	}{{"rdma.hca_handle", c.RDMA.HCAHandle}, {"rdma.hca_object", c.RDMA.HCAObject}} {
		if k.v < 0 || k.v > math.MaxUint32 {
			add(k.key, "%d: want 0 (no limit) to %d", k.v, uint32(math.MaxUint32))
		}
	}
	if _, err := ParseMemlock(c.RDMA.Memlock); err != nil {
		add("rdma.memlock", "%s", strings.TrimSuffix(err.Error(), ": "+errdefs.ErrInvalidArgument.Error()))
	}
	for _, k := range []struct{ key, p string }{{"rdma.sys_root", c.RDMA.SysRoot}, {"rdma.dev_root", c.RDMA.DevRoot}} {
		if !filepath.IsAbs(k.p) {
			add(k.key, "%q: must be an absolute path", k.p)
		}
	}
	envKeys := make([]string, 0, len(c.RDMA.Env))
	for k := range c.RDMA.Env {
		envKeys = append(envKeys, k)
	}
	sort.Strings(envKeys)
	for _, k := range envKeys {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			add(tomlfile.Join("rdma.env", k), "not a valid variable name")
		}
	}
	if c.Hooks.Path != "" && !filepath.IsAbs(c.Hooks.Path) {
		add("hooks.path", "%q: must be an absolute path (or \"\" for the swift-hook beside the shim)", c.Hooks.Path)
	}
	if !filepath.IsAbs(c.Zygote.BinDir) {
		add("zygote.bin_dir", "%q: must be an absolute path", c.Zygote.BinDir)
	}
	if b := c.Zygote.FunctionUIDBase; b != 0 && (b < 1000 || b > math.MaxUint32-1-FunctionUIDs*FunctionUIDRanges) {
		add("zygote.function_uid_base", "%d: want 0 (functions run as the container's user) or a uid from 1000 to %d (the node's %d ranges of %d uids follow it)",
			b, uint32(math.MaxUint32-1-FunctionUIDs*FunctionUIDRanges), FunctionUIDRanges, FunctionUIDs)
	}
	return ps
}

// PolicyFile is the tenant policy to enforce: $SWIFT_POLICY when set in
// the environment (containerd passes its environment to the shim), else
// policy_path.
func (c Config) PolicyFile() string {
	if p := os.Getenv(EnvPolicy); p != "" {
		return p
	}
	return c.PolicyPath
}

// PolicyNamed reports whether the tenant policy is named explicitly — by
// $SWIFT_POLICY, or by a policy_path the config file sets, even to the
// default path — rather than taken by default: a named policy that does
// not exist fails closed. Only the built-in default on a node that never
// enforced a policy may be missing.
func (c Config) PolicyNamed() bool {
	return os.Getenv(EnvPolicy) != "" || c.PolicyPathSet
}

// MemlockBytes is RDMA.Memlock as a byte count (MemlockUnlimited for "unlimited").
func (c Config) MemlockBytes() uint64 {
	n, _ := ParseMemlock(c.RDMA.Memlock)
	return n
}

// FormatBytes prints a byte count the way ParseMemlock reads it: "unlimited",
// an IEC binary unit where it divides exactly (64KiB, 1GiB), else bytes.
func FormatBytes(n uint64) string {
	switch {
	case n == MemlockUnlimited:
		return "unlimited"
	case n == 0:
		return "0"
	case n%(1<<40) == 0:
		return fmt.Sprintf("%dTiB", n>>40)
	case n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return strconv.FormatUint(n, 10)
}
