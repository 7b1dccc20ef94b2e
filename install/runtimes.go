package install

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/swift-rdma/swift-containerd/config/tomlfile"
)

// RuncRuntime is the runtime entry whose options the Swift entry copies:
// the shim delegates to runc, so it runs runc the way the node does.
const RuncRuntime = "runc"

// Runtime is one CRI runtime entry of containerd's configuration
// (plugins.<CRI runtime plugin>.containerd.runtimes.NAME).
type Runtime struct {
	Name string
	// Type is runtime_type, Path runtime_path ("" when unset).
	Type, Path string
	// PodAnnotations and ContainerAnnotations are the annotation patterns
	// CRI passes to the runtime.
	PodAnnotations, ContainerAnnotations []string
	// Options is the entry's options table (nil when it has none).
	Options map[string]any
	// File is the file that declares the entry (the last one that does,
	// in the order containerd reads them).
	File string
}

// CRIConfig is what containerd's configuration, its root config and the
// files it imports, declares for CRI runtimes.
type CRIConfig struct {
	// Path is the root config; Version its config version.
	Path    string
	Version int
	// Files are the files read, root config first, then imports in the
	// order containerd reads them.
	Files []string
	// Runtimes by name.
	Runtimes map[string]Runtime
}

// ReadCRI reads containerd's root config at path and the files it imports
// and returns the CRI runtime entries they declare, merged as containerd
// merges them: version 2 (containerd 1.7) takes a plugin's section from
// the last file that sets it, versions 3 and 4 merge tables key by key.
// A missing root config is a NotFound error.
func ReadCRI(path string) (*CRIConfig, error) {
	rc, err := readRoot(path)
	if err != nil {
		return nil, err
	}
	if rc.Src == nil {
		return nil, fmt.Errorf("containerd config %s does not exist: %w", path, errdefs.ErrNotFound)
	}
	plugin, err := PluginFor(rc.Version)
	if err != nil {
		return nil, fmt.Errorf("containerd config %s: %w", path, err)
	}
	files, err := imported(rc, "")
	if err != nil {
		return nil, err
	}
	trees := []map[string]any{rc.Tree}
	for _, f := range files {
		tree, err := readImported(f)
		if err != nil {
			return nil, err
		}
		trees = append(trees, tree)
	}
	c := &CRIConfig{Path: path, Version: rc.Version, Files: append([]string{path}, files...), Runtimes: map[string]Runtime{}}
	merged := mergeTrees(rc.Version, trees)
	rts, _ := lookup(merged, "plugins", plugin, "containerd", "runtimes")
	rtMap, _ := rts.(map[string]any)
	for name, v := range rtMap {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		r := Runtime{Name: name, Type: str(m["runtime_type"]), Path: str(m["runtime_path"]),
			PodAnnotations: strs(m["pod_annotations"]), ContainerAnnotations: strs(m["container_annotations"])}
		if o, ok := m["options"].(map[string]any); ok {
			r.Options = o
		}
		for i, t := range trees {
			if _, ok := lookup(t, "plugins", plugin, "containerd", "runtimes", name); ok {
				r.File = c.Files[i]
			}
		}
		c.Runtimes[name] = r
	}
	return c, nil
}

// RuntimesOfType lists the names of the runtime entries of type typ, sorted.
func (c *CRIConfig) RuntimesOfType(typ string) []string {
	var out []string
	for n, r := range c.Runtimes {
		if r.Type == typ {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// mergeTrees merges parsed config files in the order containerd reads them.
func mergeTrees(version int, trees []map[string]any) map[string]any {
	out := map[string]any{}
	for _, t := range trees {
		if version == 2 {
			// containerd 1.7 replaces a plugin's whole section (containerd#5837)
			t = maps.Clone(t)
			if ps, ok := t["plugins"].(map[string]any); ok {
				dst, _ := out["plugins"].(map[string]any)
				if dst == nil {
					dst = map[string]any{}
				}
				dst = maps.Clone(dst)
				for k, v := range ps {
					dst[k] = v
				}
				out["plugins"] = dst
				delete(t, "plugins")
			}
		}
		deepMerge(out, t)
	}
	return out
}

// deepMerge sets src's keys into dst, merging tables key by key.
func deepMerge(dst, src map[string]any) {
	for k, v := range src {
		sm, sok := v.(map[string]any)
		dm, dok := dst[k].(map[string]any)
		if sok && dok {
			dm = maps.Clone(dm)
			deepMerge(dm, sm)
			dst[k] = dm
			continue
		}
		dst[k] = v
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func strs(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// shimOptions are the options keys containerd-shim-swift-v2 accepts in a
// runtime entry (shim.RuntimeOptions; TestShimOptionKeys keeps them in
// step), with the TOML type of each; it refuses any other key.
var shimOptions = map[string]string{
	"BinaryName": "string", "Root": "string", "SystemdCgroup": "bool", "NoPivotRoot": "bool",
	"NoNewKeyring": "bool", "ShimCgroup": "string", "IoUid": "uint32", "IoGid": "uint32",
	"CriuImagePath": "string", "CriuWorkPath": "string", "SwiftConfig": "string",
}

// runcOptions works out the options of the Swift entry from those of the
// node's runc entry (nil: none): every option runc's entry sets is copied,
// except those only the Swift entry decides (SwiftConfig) and those the
// shim would refuse (reported in notes); BinaryName and SystemdCgroup
// come back apart, for the entry's first lines.
func runcOptions(runc map[string]any, where string) (binary string, systemd bool, rest map[string]any, notes []string, err error) {
	rest = map[string]any{}
	var skipped []string
	for _, k := range slices.Sorted(maps.Keys(runc)) {
		v := runc[k]
		typ, known := shimOptions[k]
		switch {
		case k == "SwiftConfig":
			continue // the Swift entry's own
		case !known:
			skipped = append(skipped, k)
			continue
		}
		ok := false
		switch typ {
		case "string":
			_, ok = v.(string)
		case "bool":
			_, ok = v.(bool)
		case "uint32":
			n, isInt := v.(int64)
			ok = isInt && n >= 0 && n <= 1<<32-1
		}
		if !ok {
			want := map[string]string{"string": "a string", "bool": "true or false", "uint32": "an integer from 0 to 4294967295"}[typ]
			shown := fmt.Sprint(v)
			if s, isStr := v.(string); isStr {
				shown = tomlfile.Quote(s)
			}
			return "", false, nil, nil, fmt.Errorf("%s: options.%s = %s: runc wants %s; correct it there, then run install again: %w",
				where, k, shown, want, errdefs.ErrInvalidArgument)
		}
		switch k {
		case "BinaryName":
			binary = v.(string)
		case "SystemdCgroup":
			systemd = v.(bool)
		default:
			if !isZero(v) {
				rest[k] = v
			}
		}
	}
	if len(skipped) > 0 {
		notes = append(notes, fmt.Sprintf("%s sets %s, which containerd-shim-swift-v2 does not accept (it refuses runtime options it does not know): not copied",
			where, strings.Join(skipped, ", ")))
	}
	return binary, systemd, rest, notes, nil
}

func isZero(v any) bool {
	switch x := v.(type) {
	case string:
		return x == ""
	case bool:
		return !x
	case int64:
		return x == 0
	}
	return false
}

// checkRunc refuses a runc binary that is not an executable file.
func checkRunc(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil && os.IsNotExist(err):
		return fmt.Errorf("runc binary %s does not exist: name the runc this node runs (--runc PATH; `command -v runc` finds it): %w", path, errdefs.ErrNotFound)
	case err != nil:
		return fmt.Errorf("runc binary %s: %v: %w", path, err, errdefs.ErrFailedPrecondition)
	case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("runc binary %s is not an executable file (mode %v): name the runc this node runs (--runc PATH): %w",
			path, fi.Mode(), errdefs.ErrFailedPrecondition)
	}
	return nil
}

// checkShim accepts an executable file for the entry's runtime_path.
func checkShim(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil && os.IsNotExist(err):
		return fmt.Errorf("shim %s does not exist: name the installed containerd-shim-swift-v2 (--shim PATH): %w", path, errdefs.ErrNotFound)
	case err != nil:
		return fmt.Errorf("shim %s: %v: %w", path, err, errdefs.ErrFailedPrecondition)
	case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("shim %s is not an executable file (mode %v): %w", path, fi.Mode(), errdefs.ErrFailedPrecondition)
	}
	return nil
}
