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
	VerbsCached  = verbs.ModeCached
	VerbsTrimmed = verbs.ModeTrimmed
	VerbsStock   = verbs.ModeStock

	VerbsDir       = ZygoteDir + "/verbs"
	VerbsConfigDir = verbs.DefaultConfigDir
	verbsMountWhat = "verbs cache"
)

// Verbs serves libibverbs from the node's cache: the cache directory is
// mounted read-only at /.swift/verbs, and one of its driver lists over
// /etc/libibverbs.d: in trimmed mode the providers the node's devices
// need (libibverbs loads no other), in cached mode the same and
// libswiftverbs.so as a provider entry, which libibverbs loads only in a
// process that lists devices. Nothing is preloaded: a process that never
// uses RDMA loads nothing of the cache. The cache's tuning environment is
// set where the image does not set it already.
type Verbs struct {
	CacheDir string            // host directory of a valid cache
	Mode     string            // VerbsCached or VerbsTrimmed
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
	list := verbs.ConfigDirName
	switch m.Mode {
	case VerbsCached:
		list = verbs.CachedDirName
	case VerbsTrimmed:
	default:
		return fmt.Errorf("verbs mode %q is neither %s nor %s: %w", m.Mode, VerbsCached, VerbsTrimmed, errdefs.ErrInvalidArgument)
	}
	// No noexec: libswiftverbs.so is mapped executable from this mount.
	ro := []string{"rbind", "ro", "nosuid", "nodev"}
	// /.swift/verbs is the shim's; a container's own libibverbs.d is kept
	// (and the shim's copy of it is taken out and appended again, so that
	// a retried Create gets the same order)
	if _, err := claimMounts(s, "the verbs cache", []specs.Mount{{Destination: VerbsDir, Type: "bind", Source: m.CacheDir, Options: ro}},
		[]string{VerbsDir}, nil); err != nil {
		return err
	}
	s.Mounts = slices.DeleteFunc(s.Mounts, func(x specs.Mount) bool {
		return x.Destination == VerbsConfigDir && x.Type == "bind" && strings.HasPrefix(x.Source, m.CacheDir+"/") && reflect.DeepEqual(x.Options, ro)
	})
	conf := specs.Mount{Destination: VerbsConfigDir, Type: "bind", Source: filepath.Join(m.CacheDir, list), Options: ro}
	if !slices.ContainsFunc(s.Mounts, func(x specs.Mount) bool { return path.Clean(x.Destination) == VerbsConfigDir }) {
		s.Mounts = append(s.Mounts, conf)
	}

	vars := map[string]string{}
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
	if len(vars) == 0 {
		return nil
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

// VerbsDecision is the verbs mode of one container.
type VerbsDecision struct {
	Mode     string // VerbsCached, VerbsTrimmed or VerbsStock
	Modifier *Verbs // nil for stock
	// Warning, when set, is for the shim log: the cache was wanted (asked
	// for, or the default) but cannot be used, so the container runs stock.
	Warning string
	// Note, when set, is for the shim log: the node's default mode was
	// taken, and why it is the default.
	Note string
}

// DecideVerbs picks a container's verbs mode from its swift.io/verbs value
// ("" when absent: the cache's measured default) and the node's cache
// check. It never fails: without a valid cache the container runs stock,
// and the warning says why.
func DecideVerbs(requested string, cache verbs.Result) VerbsDecision {
	switch requested {
	case VerbsStock:
		return VerbsDecision{Mode: VerbsStock}
	case "", VerbsCached, VerbsTrimmed:
	default:
		return VerbsDecision{Mode: VerbsStock,
			Warning: fmt.Sprintf("verbs: unknown mode %q, running stock libibverbs", requested)}
	}
	if !cache.Valid() || cache.Dir == "" || cache.Manifest == nil {
		why := cache.Why()
		if why == "" {
			why = "no usable cache"
		}
		what := "the default mode"
		if requested != "" {
			what = requested + " mode requested"
		}
		return VerbsDecision{Mode: VerbsStock,
			Warning: fmt.Sprintf("verbs: %s but the verbs cache is %s (%s): running stock libibverbs",
				what, stateWord(cache.State), why)}
	}
	env := map[string]string{}
	for k, v := range cache.Manifest.Env {
		env[k] = v
	}
	mode, note := requested, ""
	if mode == "" {
		mode = cache.Manifest.Profile.DefaultMode
		note = fmt.Sprintf("verbs: %s, the node's default (%s)", mode, cache.Manifest.Profile.DefaultWhy)
	}
	if mode != VerbsCached && mode != VerbsTrimmed { // Load refuses such a manifest
		mode = VerbsTrimmed
	}
	return VerbsDecision{Mode: mode, Modifier: &Verbs{CacheDir: cache.Dir, Mode: mode, Env: env}, Note: note}
}

func stateWord(s verbs.State) string {
	if s == "" {
		return "not checked"
	}
	return string(s)
}
