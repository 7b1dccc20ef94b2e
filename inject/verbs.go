package inject

import (
	"fmt"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/verbs"
)

// swift.io/verbs modes, and where the cache appears inside a container.
const (
	VerbsCached = "cached"
	VerbsStock  = "stock"

	VerbsDir       = ZygoteDir + "/verbs"
	VerbsPreload   = VerbsDir + "/" + verbs.PreloadFile
	VerbsConfigDir = verbs.DefaultConfigDir
	EnvVerbsCache  = "SWIFT_VERBS_CACHE"
	EnvLDPreload   = "LD_PRELOAD"
	verbsMountWhat = "verbs cache"
)

// Verbs serves libibverbs from the node's cache: the cache directory is
// mounted read-only at /.swift/verbs, its trimmed libibverbs.d over
// /etc/libibverbs.d (libibverbs then loads only the providers the node's
// devices need), libswiftverbs.so is preloaded, and the cache's tuning
// environment is set where the image does not set it already.
type Verbs struct {
	CacheDir string            // host directory of a valid cache
	Env      map[string]string // tuning environment from the cache
}

// Name implements Modifier.
func (Verbs) Name() string { return "verbs" }

// Modify implements Modifier.
func (m Verbs) Modify(s *specs.Spec) error {
	if s.Process == nil {
		return fmt.Errorf("spec has no process: %w", errdefs.ErrInvalidArgument)
	}
	if m.CacheDir == "" || !filepath.IsAbs(m.CacheDir) {
		return fmt.Errorf("%s directory %q is not an absolute path: %w", verbsMountWhat, m.CacheDir, errdefs.ErrInvalidArgument)
	}
	// No noexec: the preload is mapped executable from this mount.
	ro := []string{"rbind", "ro", "nosuid", "nodev"}
	// /.swift/verbs is the shim's; a container's own libibverbs.d is kept
	// (and the shim's copy of it is taken out and appended again, so that
	// a retried Create gets the same order)
	if _, err := claimMounts(s, "the verbs cache", []specs.Mount{{Destination: VerbsDir, Type: "bind", Source: m.CacheDir, Options: ro}},
		[]string{VerbsDir}, nil); err != nil {
		return err
	}
	conf := specs.Mount{Destination: VerbsConfigDir, Type: "bind", Source: filepath.Join(m.CacheDir, verbs.ConfigDirName), Options: ro}
	s.Mounts = slices.DeleteFunc(s.Mounts, func(x specs.Mount) bool { return reflect.DeepEqual(x, conf) })
	if !slices.ContainsFunc(s.Mounts, func(x specs.Mount) bool { return path.Clean(x.Destination) == VerbsConfigDir }) {
		s.Mounts = append(s.Mounts, conf)
	}

	vars := map[string]string{EnvVerbsCache: VerbsDir}
	if cur, ok := getEnv(s, EnvLDPreload); !ok || cur == "" {
		vars[EnvLDPreload] = VerbsPreload
	} else if !containsPreload(cur, VerbsPreload) {
		vars[EnvLDPreload] = VerbsPreload + ":" + cur
	}
	names := make([]string, 0, len(m.Env))
	for k := range m.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if _, ok := getEnv(s, k); !ok { // the image's or user's value wins
			vars[k] = m.Env[k]
		}
	}
	return Env{Vars: vars}.Modify(s)
}

func getEnv(s *specs.Spec, key string) (string, bool) {
	for _, e := range s.Process.Env {
		if k, v, ok := strings.Cut(e, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// containsPreload reports whether an LD_PRELOAD value (space or colon
// separated, as ld.so reads it) already lists lib.
func containsPreload(list, lib string) bool {
	for _, f := range strings.FieldsFunc(list, func(r rune) bool { return r == ':' || r == ' ' }) {
		if f == lib {
			return true
		}
	}
	return false
}

// VerbsDecision is the verbs mode of one container.
type VerbsDecision struct {
	Mode     string // VerbsCached or VerbsStock
	Modifier *Verbs // nil for stock
	// Warning, when set, is for the shim log: cached was wanted (asked for,
	// or the default) but the cache cannot be used, so the container runs
	// stock.
	Warning string
}

// DecideVerbs picks a container's verbs mode from its swift.io/verbs value
// ("" when absent) and the node's cache check. It never fails: without a
// valid cache the container runs stock, and the warning says why.
func DecideVerbs(requested string, cache verbs.Result) VerbsDecision {
	switch requested {
	case VerbsStock:
		return VerbsDecision{Mode: VerbsStock}
	case "", VerbsCached:
	default:
		return VerbsDecision{Mode: VerbsStock,
			Warning: fmt.Sprintf("verbs: unknown mode %q, running stock libibverbs", requested)}
	}
	if !cache.Valid() || cache.Dir == "" || cache.Manifest == nil {
		why := cache.Why()
		if why == "" {
			why = "no usable cache"
		}
		how := "default"
		if requested == VerbsCached {
			how = "requested"
		}
		return VerbsDecision{Mode: VerbsStock,
			Warning: fmt.Sprintf("verbs: cached mode %s but the verbs cache is %s (%s): running stock libibverbs",
				how, stateWord(cache.State), why)}
	}
	env := map[string]string{}
	for k, v := range cache.Manifest.Env {
		env[k] = v
	}
	return VerbsDecision{Mode: VerbsCached, Modifier: &Verbs{CacheDir: cache.Dir, Env: env}}
}

func stateWord(s verbs.State) string {
	if s == "" {
		return "not checked"
	}
	return string(s)
}
