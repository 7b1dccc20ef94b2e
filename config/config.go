package config

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/pelletier/go-toml/v2"
)

// DefaultPath is where the node configuration lives unless overridden.
const DefaultPath = "/etc/swift/config.toml"

// EnvPath names the environment variable that overrides DefaultPath.
const EnvPath = "SWIFT_CONFIG"

// DefaultZygoteBinDir is where `make install` puts swift-init and swift-run.
const DefaultZygoteBinDir = "/usr/local/lib/swift"

// MemlockUnlimited is the RLIMIT_MEMLOCK value meaning "no limit".
const MemlockUnlimited = math.MaxUint64

// Config is the node configuration.
type Config struct {
	// LogLevel is the shim's log level (trace, debug, info, warn, error).
	LogLevel string `toml:"log_level"`
	// StateDir holds the node's Swift state (ledger, verbs cache).
	StateDir string `toml:"state_dir"`
	// RDMA holds what an opted-in container receives.
	RDMA RDMA `toml:"rdma"`
	// Zygote configures the INIT zygote (swift.io/zygote=true).
	Zygote Zygote `toml:"zygote"`
}

// Zygote is the [zygote] table.
type Zygote struct {
	// BinDir holds swift-init and swift-run (and nothing else a container
	// should see): it is mounted read-only into containers at /.swift/bin.
	BinDir string `toml:"bin_dir"`
}

// RDMA is the [rdma] table.
type RDMA struct {
	// Default opts every container in when it carries no swift.io/rdma annotation.
	Default bool `toml:"default"`
	// Memlock is RLIMIT_MEMLOCK for opted-in containers: "unlimited" or a size.
	Memlock string `toml:"memlock"`
	// HCAHandle and HCAObject are linux.resources.rdma limits per device (0 = unset).
	HCAHandle uint32 `toml:"hca_handle"`
	HCAObject uint32 `toml:"hca_object"`
	// SysRoot and DevRoot are where sysfs classes and device nodes are read.
	SysRoot string `toml:"sys_root"`
	DevRoot string `toml:"dev_root"`
	// Env is added to the environment of opted-in containers.
	Env map[string]string `toml:"env"`
}

// Default returns the configuration used when no file exists.
func Default() Config {
	return Config{
		LogLevel: "info",
		StateDir: "/var/lib/swift",
		RDMA: RDMA{
			Memlock: "unlimited",
			SysRoot: "/",
			DevRoot: "/dev",
		},
		Zygote: Zygote{BinDir: DefaultZygoteBinDir},
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
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("node config %s: %s: %w", name, describe(err), errdefs.ErrInvalidArgument)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("node config %s: %w", name, err)
	}
	return c, nil
}

// describe turns a go-toml error into "line N: message".
func describe(err error) string {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		return fmt.Sprintf("line %d, column %d: %s", row, col, de.Error())
	}
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) && len(sm.Errors) > 0 {
		parts := make([]string, 0, len(sm.Errors))
		for _, e := range sm.Errors {
			row, _ := e.Position()
			parts = append(parts, fmt.Sprintf("line %d: unknown key %q", row, strings.Join(e.Key(), ".")))
		}
		return strings.Join(parts, "; ")
	}
	return err.Error()
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
	if _, err := ParseMemlock(c.RDMA.Memlock); err != nil {
		return fmt.Errorf("rdma.memlock: %w", err)
	}
	for k, p := range map[string]string{"rdma.sys_root": c.RDMA.SysRoot, "rdma.dev_root": c.RDMA.DevRoot} {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("%s %q: must be an absolute path: %w", k, p, errdefs.ErrInvalidArgument)
		}
	}
	if !filepath.IsAbs(c.Zygote.BinDir) {
		return fmt.Errorf("zygote.bin_dir %q: must be an absolute path: %w", c.Zygote.BinDir, errdefs.ErrInvalidArgument)
	}
	for k := range c.RDMA.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("rdma.env key %q: not a valid variable name: %w", k, errdefs.ErrInvalidArgument)
		}
	}
	return nil
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
