package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/pelletier/go-toml/v2"
	"github.com/swift-rdma/swift-containerd/internal/tomlstrict"
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
	// them as the container's user.
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

// Load reads the file at path. A missing file yields Default().
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

// Parse decodes data (named name in errors) over the defaults and validates it.
func Parse(name string, data []byte) (Config, error) {
	c := Default()
	if err := tomlstrict.Decode(data, &c); err != nil {
		return Config{}, fmt.Errorf("node config %s: %s: %w", name, describe(err, data), errdefs.ErrInvalidArgument)
	}
	if err := c.Validate(); err != nil {
		// Validate's messages start with the key: say where it is.
		key, _, _ := strings.Cut(err.Error(), " ")
		if line := lineOf(data, strings.TrimSuffix(key, ":"), 1); line > 0 {
			return Config{}, fmt.Errorf("node config %s: line %d: %w", name, line, err)
		}
		return Config{}, fmt.Errorf("node config %s: %w", name, err)
	}
	return c, nil
}

// describe turns a go-toml error into "line N: message".
func describe(err error, data []byte) string {
	// A StrictMissingError unwraps to DecodeErrors: look for it first.
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) && len(sm.Errors) > 0 {
		parts := make([]string, 0, len(sm.Errors))
		for _, e := range sm.Errors {
			row, _ := e.Position()
			parts = append(parts, fmt.Sprintf("line %d: unknown key %q", row, strings.Join(e.Key(), ".")))
		}
		return strings.Join(parts, "; ")
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		return fmt.Sprintf("line %d, column %d: %s", row, col, de.Error())
	}
	// Errors go-toml reports without a position: find the key's line.
	msg := err.Error()
	var key string
	nth := 1
	switch {
	case fieldRe.MatchString(msg):
		key = tomlPath(reflect.TypeOf(Config{}), fieldRe.FindStringSubmatch(msg)[1])
	case dupKeyRe.MatchString(msg):
		key, nth = dupKeyRe.FindStringSubmatch(msg)[1], 2
	case dupTableRe.MatchString(msg):
		key, nth = "["+dupTableRe.FindStringSubmatch(msg)[1]+"]", 2
	}
	if line := lineOf(data, key, nth); key != "" && line > 0 {
		return fmt.Sprintf("line %d: %s", line, msg)
	}
	return msg
}

var (
	fieldRe    = regexp.MustCompile(`into struct field \S*?\.?(\w+) of type`)
	dupKeyRe   = regexp.MustCompile(`key (\S+) is already defined`)
	dupTableRe = regexp.MustCompile(`table (\S+) already exists`)
)

// tomlPath returns the dotted TOML key of the Go field called field in t.
func tomlPath(t reflect.Type, field string) string {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if f.Name == field {
			return tag
		}
		if f.Type.Kind() == reflect.Struct {
			if sub := tomlPath(f.Type, field); sub != "" {
				return tag + "." + sub
			}
		}
	}
	return ""
}

// lineOf finds the nth line (1-based) where key is set, or where the table
// "[key]" starts, by a line scan of the file; 0 when not found. A bare key
// (no dot) matches that key in any table.
func lineOf(data []byte, key string, nth int) int {
	table, seen := "", 0
	for i, raw := range strings.Split(string(data), "\n") {
		l := strings.TrimSpace(raw)
		var path string
		switch {
		case strings.HasPrefix(l, "[") && !strings.HasPrefix(l, "[["):
			end := strings.Index(l, "]")
			if end < 0 {
				end = len(l)
			}
			table = strings.TrimSpace(l[1:end])
			path = "[" + table + "]"
		case strings.Contains(l, "=") && !strings.HasPrefix(l, "#"):
			k, _, _ := strings.Cut(l, "=")
			k = strings.Trim(strings.TrimSpace(k), `"'`)
			path = k
			if table != "" {
				path = table + "." + k
			}
			if !strings.Contains(key, ".") && !strings.HasPrefix(key, "[") && k == key {
				path = key
			}
		default:
			continue
		}
		if path == key {
			if seen++; seen == nth {
				return i + 1
			}
		}
	}
	return 0
}

// Validate checks values that TOML types alone do not constrain.
func (c Config) Validate() error {
	switch c.LogLevel {
	case "trace", "debug", "info", "warn", "warning", "error", "fatal", "panic":
	default:
		return fmt.Errorf("log_level %q: want trace, debug, info, warn or error: %w", c.LogLevel, errdefs.ErrInvalidArgument)
	}
	if !filepath.IsAbs(c.StateDir) {
		return fmt.Errorf("state_dir %q: must be an absolute path: %w", c.StateDir, errdefs.ErrInvalidArgument)
	}
	if c.PolicyPath != "" && !filepath.IsAbs(c.PolicyPath) {
		return fmt.Errorf("policy_path %q: must be an absolute path (or \"\" for no policy): %w", c.PolicyPath, errdefs.ErrInvalidArgument)
	}
	if c.CRINamespace == "" {
		return fmt.Errorf("cri_namespace: must name the containerd namespace of the CRI plugin (default %q): %w", DefaultCRINamespace, errdefs.ErrInvalidArgument)
	}
	for k, v := range map[string]int64{"rdma.hca_handle": c.RDMA.HCAHandle, "rdma.hca_object": c.RDMA.HCAObject} {
		if v < 0 || v > math.MaxUint32 {
			return fmt.Errorf("%s %d: want 0 (no limit) to %d: %w", k, v, uint32(math.MaxUint32), errdefs.ErrInvalidArgument)
		}
	}
	if _, err := ParseMemlock(c.RDMA.Memlock); err != nil {
		return fmt.Errorf("rdma.memlock: %w", err)
	}
	for k, p := range map[string]string{"rdma.sys_root": c.RDMA.SysRoot, "rdma.dev_root": c.RDMA.DevRoot} {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("%s %q: must be an absolute path: %w", k, p, errdefs.ErrInvalidArgument)
		}
	}
	if !filepath.IsAbs(c.KeysDir) {
		return fmt.Errorf("keys_dir %q: must be an absolute path: %w", c.KeysDir, errdefs.ErrInvalidArgument)
	}
	if c.Hooks.Path != "" && !filepath.IsAbs(c.Hooks.Path) {
		return fmt.Errorf("hooks.path %q: must be an absolute path (or \"\" for the swift-hook beside the shim): %w", c.Hooks.Path, errdefs.ErrInvalidArgument)
	}
	if !filepath.IsAbs(c.Zygote.BinDir) {
		return fmt.Errorf("zygote.bin_dir %q: must be an absolute path: %w", c.Zygote.BinDir, errdefs.ErrInvalidArgument)
	}
	if b := c.Zygote.FunctionUIDBase; b != 0 && (b < 1000 || b > math.MaxUint32-1-FunctionUIDs) {
		return fmt.Errorf("zygote.function_uid_base %d: want 0 (functions run as the container's user) or a uid from 1000 to %d: %w",
			b, uint32(math.MaxUint32-1-FunctionUIDs), errdefs.ErrInvalidArgument)
	}
	for k := range c.RDMA.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("rdma.env key %q: not a valid variable name: %w", k, errdefs.ErrInvalidArgument)
		}
	}
	return nil
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

// MemlockBytes is RDMA.Memlock as a byte count (MemlockUnlimited for "unlimited").
func (c Config) MemlockBytes() uint64 {
	n, _ := ParseMemlock(c.RDMA.Memlock)
	return n
}

var units = []struct {
	suffix string
	mult   uint64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// ParseMemlock parses "unlimited", a byte count, or a count with a binary
// unit (K, KiB, M, MiB, G, GiB, T, TiB).
func ParseMemlock(s string) (uint64, error) {
	if s == "unlimited" || s == "-1" {
		return MemlockUnlimited, nil
	}
	num, mult := s, uint64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("%q is not \"unlimited\" or a size such as 65536, 64KiB or 1GiB: %w", s, errdefs.ErrInvalidArgument)
	}
	if n != 0 && mult > math.MaxUint64/n {
		return 0, fmt.Errorf("%q overflows 64 bits: %w", s, errdefs.ErrInvalidArgument)
	}
	if n*mult < 64<<10 {
		return 0, fmt.Errorf("%q is below 64KiB, too small for any RDMA registration: %w", s, errdefs.ErrInvalidArgument)
	}
	return n * mult, nil
}

// FormatBytes prints a byte count the way ParseMemlock reads it: "unlimited",
// a binary unit where it divides exactly (64KiB, 1GiB), else bytes.
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
